//! Models: per-example losses f(w; x, y) with gradients, predictions and metrics.
//!
//! The algorithms see a model only through [`Model`] and [`GradientOracle`] (which adds
//! per-example clipping). Lipschitz constants matter for privacy: a model reports the
//! constant of its loss over inputs of bounded norm, and noise is calibrated to it (or to the
//! clip threshold, which bounds every per-example gradient regardless of the data).

/// The two batch-gradient methods of [`Model`] for a model whose one per-example loop is an
/// inherent `fn batch(&self, w, data, idx, clip: Option<f64>, scale, out)` (out += scale·Σ_i
/// clip(∇f_i) over the rows `idx`, no clipping with `None`): the unclipped and the clipped
/// gradient are the same loop, so they cannot drift apart.
macro_rules! batch_grads_from_loop {
    () => {
        fn add_batch_grad(
            &self,
            w: &[f64],
            data: &Dataset,
            idx: &[usize],
            scale: f64,
            out: &mut [f64],
        ) {
            self.batch(w, data, idx, None, scale, out);
        }
        fn add_clipped_batch_grad(
            &self,
            w: &[f64],
            data: &Dataset,
            idx: &[usize],
            clip: f64,
            scale: f64,
            out: &mut [f64],
            _scratch: &mut [f64],
        ) {
            self.batch(w, data, idx, Some(clip), scale, out);
        }
    };
}

mod absolute;
mod batch;
mod deep_mlp;
mod external;
mod hinge;
mod linear;
mod logistic;
mod mlp;
mod moreau_linear;
mod nc_logistic;
mod softmax;

pub use absolute::{Absolute, AbsoluteLoss, prox_step as absolute_prox_step};
pub use deep_mlp::{Activation, DeepMlp, Precision};
pub use external::{ExternalModel, GradientProvider, index_dataset};
pub use hinge::{Hinge, HingeLoss};
pub use linear::LinearRegression;
pub use logistic::LogisticRegression;
pub use mlp::{Mlp, MlpEval};
pub use moreau_linear::{MoreauLinear, ProxLinearLoss};
pub use nc_logistic::NonconvexLogistic;
pub use softmax::SoftmaxRegression;

use serde::{Deserialize, Serialize};

use crate::data::Dataset;
use crate::linalg::{axpy, norm2, scale};
use crate::units::ClipNorm;

/// How a model's predictions are scored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Metric {
    /// Fraction of misclassified rows.
    ErrorRate,
    /// Root mean squared error.
    Rmse,
}

/// A differentiable per-example loss.
pub trait Model: Send + Sync + std::fmt::Debug {
    /// Short name for reports.
    fn name(&self) -> &'static str;
    /// Length of the parameter vector w.
    fn num_params(&self) -> usize;
    /// Length of an input row x.
    fn num_features(&self) -> usize;
    /// f(w; x, y).
    fn loss(&self, w: &[f64], x: &[f64], y: f64) -> f64;
    /// out += scale · ∇_w f(w; x, y).
    fn add_grad(&self, w: &[f64], x: &[f64], y: f64, scale: f64, out: &mut [f64]);
    /// Predicted class index, or predicted value.
    fn predict(&self, w: &[f64], x: &[f64]) -> f64;
    /// The evaluation metric that suits the model.
    fn metric(&self) -> Metric;
    /// Lipschitz constant of w ↦ f(w; x, y) over inputs with ‖x‖₂ ≤ `max_norm`, if finite.
    fn lipschitz(&self, max_norm: f64) -> Option<f64>;
    /// Checks that `data` fits this model (feature count, label kind and range).
    fn check_data(&self, data: &Dataset) -> crate::Result<()>;

    /// The β-Moreau envelope of this loss (Lowy & Razaviyayn Lemma D.7), for non-smooth losses
    /// with a per-example prox; `Ok(None)` if the model offers none.
    fn smoothed(&self, _beta: f64) -> crate::Result<Option<std::sync::Arc<dyn Model>>> {
        Ok(None)
    }

    /// For losses whose per-example gradient is a multiple of the input, ∇f(w; x, y) = a·x:
    /// a as a function of z = ⟨w, x⟩, xx = ‖x‖² and y. `None` (the default) for losses of
    /// another shape; a model answers `Some` for every input or for none. The default batch
    /// kernels use it to clip through ‖a·x‖ = |a|·‖x‖ without materialising the gradient.
    fn input_coefficient(&self, _z: f64, _xx: f64, _y: f64) -> Option<f64> {
        None
    }

    /// The model's starting point w⁰: zeros, or a seeded random draw for models that need to
    /// break symmetry (the network).
    fn initial_params(&self) -> Vec<f64> {
        vec![0.0; self.num_params()]
    }

    /// out += scale · Σ_{i∈idx} ∇f(w; x_i, y_i). Models may override with a faster kernel.
    fn add_batch_grad(
        &self,
        w: &[f64],
        data: &Dataset,
        idx: &[usize],
        scale: f64,
        out: &mut [f64],
    ) {
        if rank_one_by_coefficient(self, w, data, idx, None, scale, out) {
            return;
        }
        for &i in idx {
            let (x, y) = data.row(i);
            self.add_grad(w, x, y, scale, out);
        }
    }

    /// out += scale · Σ_{i∈idx} clip_C(∇f(w; x_i, y_i)) with clip_C(g) = g·min(1, C/‖g‖).
    /// Models with an [`Model::input_coefficient`] get a one-pass kernel; otherwise the default
    /// materialises each gradient in `scratch` (num_params entries). Models whose gradient has
    /// another known norm (softmax: an outer product with x) override it. Overrides must clip
    /// exactly as the default does (same factor from the same norm up to rounding), since the
    /// noise is calibrated to C.
    #[allow(clippy::too_many_arguments)]
    fn add_clipped_batch_grad(
        &self,
        w: &[f64],
        data: &Dataset,
        idx: &[usize],
        clip: f64,
        scale: f64,
        out: &mut [f64],
        scratch: &mut [f64],
    ) {
        if rank_one_by_coefficient(self, w, data, idx, Some(clip), scale, out) {
            return;
        }
        clipped_batch_grad_per_example(self, w, data, idx, clip, scale, out, scratch);
    }
}

/// The reference clipped batch gradient: out += scale · Σ_{i∈idx} clip_C(∇f(w; x_i, y_i)),
/// each per-example gradient materialised in `scratch` (num_params entries), its norm taken
/// and the clipped gradient added. Kernels that clip without materialising are tested against
/// it.
#[allow(clippy::too_many_arguments)]
pub fn clipped_batch_grad_per_example<M: Model + ?Sized>(
    model: &M,
    w: &[f64],
    data: &Dataset,
    idx: &[usize],
    clip: f64,
    scale: f64,
    out: &mut [f64],
    scratch: &mut [f64],
) {
    for &i in idx {
        let (x, y) = data.row(i);
        scratch.iter_mut().for_each(|v| *v = 0.0);
        model.add_grad(w, x, y, 1.0, scratch);
        let f = crate::linalg::clip_factor(norm2(scratch), clip);
        if f > 0.0 {
            axpy(scale * f, scratch, out);
        }
    }
}

/// The default batch kernels' fast path: for a model with an [`Model::input_coefficient`],
/// runs [`rank_one_batch`] on it and returns true; false (nothing done) for other models.
fn rank_one_by_coefficient<M: Model + ?Sized>(
    model: &M,
    w: &[f64],
    data: &Dataset,
    idx: &[usize],
    clip: Option<f64>,
    scale: f64,
    out: &mut [f64],
) -> bool {
    if model.input_coefficient(0.0, 0.0, 0.0).is_none() {
        return false;
    }
    rank_one_batch(w, data, idx, clip, scale, out, |z, xx, y| {
        model.input_coefficient(z, xx, y).unwrap_or(0.0)
    });
    true
}

/// The index of the largest of `z` (the first on ties): a classifier's predicted class.
pub(crate) fn argmax(z: &[f64]) -> usize {
    let mut best = 0;
    for k in 1..z.len() {
        if z[k] > z[best] {
            best = k;
        }
    }
    best
}

/// Batch kernel for losses whose per-example gradient is a·x with a = `coef(⟨w,x⟩, ‖x‖², y)`
/// (logistic, linear, hinge): out += scale·Σ clip(a_i x_i), clipping (when `clip` is set)
/// through ‖a·x‖ = |a|·‖x‖. Large batches go through [`batch::rank_one_gathered`].
pub(crate) fn rank_one_batch(
    w: &[f64],
    data: &Dataset,
    idx: &[usize],
    clip: Option<f64>,
    scale: f64,
    out: &mut [f64],
    coef: impl Fn(f64, f64, f64) -> f64,
) {
    if batch::use_gathered(idx.len(), w.len()) {
        return batch::rank_one_gathered(w, data, idx, clip, scale, out, coef);
    }
    for &i in idx {
        let (x, y) = data.row(i);
        let (z, xx) = crate::linalg::dot_and_sq(w, x);
        let a = coef(z, xx, y);
        if a != 0.0 {
            let f = clip.map_or(1.0, |c| crate::linalg::clip_factor(a.abs() * xx.sqrt(), c));
            if f > 0.0 {
                axpy(scale * a * f, x, out);
            }
        }
    }
}

/// Gradients as the algorithms need them: mean over a batch, with optional per-example L2
/// clipping at threshold C (Abadi et al. 2016): g ← g · min(1, C/‖g‖).
#[derive(Debug, Clone)]
pub struct GradientOracle {
    model: std::sync::Arc<dyn Model>,
    clip: Option<ClipNorm>,
    /// Non-finite per-example gradients zeroed by clipping, shared by the clones (one per
    /// silo) of one oracle and its [`Self::with_clip`] copies.
    nonfinite: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl GradientOracle {
    /// An oracle for `model`, clipping every per-example gradient at `clip` if given (> 0, finite).
    pub fn new(model: std::sync::Arc<dyn Model>, clip: Option<f64>) -> crate::Result<Self> {
        Ok(Self::clipping(model, clip.map(ClipNorm::new).transpose()?))
    }

    /// An oracle for `model`, clipping every per-example gradient at the checked `clip` if given.
    pub fn clipping(model: std::sync::Arc<dyn Model>, clip: Option<ClipNorm>) -> Self {
        GradientOracle {
            model,
            clip,
            nonfinite: Default::default(),
        }
    }

    /// This oracle clipping at `clip`, sharing its count of non-finite gradients.
    pub fn with_clip(&self, clip: f64) -> crate::Result<Self> {
        let mut o = GradientOracle::new(self.model.clone(), Some(clip))?;
        o.nonfinite = self.nonfinite.clone();
        Ok(o)
    }

    /// Per-example gradients with a NaN or infinite coordinate that this oracle (and its
    /// clones) replaced by zero before clipping.
    pub fn nonfinite_gradients(&self) -> u64 {
        self.nonfinite.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn count_nonfinite(&self, before: u64) {
        let n = crate::linalg::nonfinite_count() - before;
        if n > 0 {
            self.nonfinite
                .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        }
    }
    /// The model.
    pub fn model(&self) -> &dyn Model {
        self.model.as_ref()
    }
    /// The model, shared.
    pub fn model_arc(&self) -> std::sync::Arc<dyn Model> {
        self.model.clone()
    }
    /// The per-example clip norm, if any.
    pub fn clip(&self) -> Option<f64> {
        self.clip.map(ClipNorm::get)
    }

    /// The L2 bound on every per-example gradient this oracle returns over inputs with
    /// ‖x‖ ≤ `max_norm`: the clip threshold, or the model's Lipschitz constant if smaller.
    pub fn gradient_bound(&self, max_norm: f64) -> Option<f64> {
        match (self.clip(), self.model.lipschitz(max_norm)) {
            (Some(c), Some(l)) => Some(c.min(l)),
            (Some(c), None) => Some(c),
            (None, l) => l,
        }
    }

    /// out = (1/|idx|) Σ_{i∈idx} clip(∇f(w; x_i, y_i)). `scratch` must have num_params entries.
    pub fn mean_grad(
        &self,
        w: &[f64],
        data: &Dataset,
        idx: &[usize],
        out: &mut [f64],
        scratch: &mut [f64],
    ) {
        out.iter_mut().for_each(|v| *v = 0.0);
        if idx.is_empty() {
            return;
        }
        let s = 1.0 / idx.len() as f64;
        match self.clip() {
            None => self.model.add_batch_grad(w, data, idx, s, out),
            Some(c) => {
                let before = crate::linalg::nonfinite_count();
                self.model
                    .add_clipped_batch_grad(w, data, idx, c, s, out, scratch);
                self.count_nonfinite(before);
            }
        }
    }

    /// out = clip(∇f(w; x, y)).
    pub fn clipped_grad(&self, w: &[f64], x: &[f64], y: f64, out: &mut [f64]) {
        self.per_example_grad(w, x, y, out);
        if let Some(c) = self.clip() {
            let before = crate::linalg::nonfinite_count();
            let f = crate::linalg::clip_factor(norm2(out), c);
            if f == 0.0 {
                out.iter_mut().for_each(|v| *v = 0.0);
                self.count_nonfinite(before);
            } else if f < 1.0 {
                scale(f, out);
            }
        }
    }

    /// out = ∇f(w; x, y), unclipped.
    pub fn per_example_grad(&self, w: &[f64], x: &[f64], y: f64, out: &mut [f64]) {
        out.iter_mut().for_each(|v| *v = 0.0);
        self.model.add_grad(w, x, y, 1.0, out);
    }
}

/// The feasible set W of the paper. Only Euclidean balls centred at 0 (and no constraint).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Projection {
    /// W = R^d (the paper's experiments).
    #[default]
    None,
    /// W = {w : ‖w‖₂ ≤ radius}; diameter D = 2·radius.
    L2Ball {
        /// The ball's radius.
        radius: f64,
    },
}

impl Projection {
    /// Π_W(w) in place.
    pub fn apply(&self, w: &mut [f64]) {
        if let Projection::L2Ball { radius } = *self {
            let n = norm2(w);
            if n > radius {
                scale(radius / n, w);
            }
        }
    }
    /// Diameter D of W (∞ without constraint).
    pub fn diameter(&self) -> f64 {
        match *self {
            Projection::None => f64::INFINITY,
            Projection::L2Ball { radius } => 2.0 * radius,
        }
    }
}

/// Mean loss over a dataset.
pub fn mean_loss(model: &dyn Model, w: &[f64], data: &Dataset) -> f64 {
    if data.is_empty() {
        return f64::NAN;
    }
    (0..data.len())
        .map(|i| {
            let (x, y) = data.row(i);
            model.loss(w, x, y)
        })
        .sum::<f64>()
        / data.len() as f64
}

/// The model's metric over a dataset (error rate or RMSE).
pub fn metric_value(model: &dyn Model, w: &[f64], data: &Dataset) -> f64 {
    if data.is_empty() {
        return f64::NAN;
    }
    let n = data.len() as f64;
    match model.metric() {
        Metric::ErrorRate => {
            (0..data.len())
                .filter(|&i| {
                    let (x, y) = data.row(i);
                    model.predict(w, x) != y
                })
                .count() as f64
                / n
        }
        Metric::Rmse => ((0..data.len())
            .map(|i| {
                let (x, y) = data.row(i);
                (model.predict(w, x) - y).powi(2)
            })
            .sum::<f64>()
            / n)
            .sqrt(),
    }
}

/// Which model to build, as named in a config file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ModelSpec {
    /// Binary logistic regression on labels {0, 1}; `logit_clip` clamps ⟨w,x⟩ to ±clip.
    Logistic {
        /// Clamp of ⟨w,x⟩, if any.
        #[serde(default)]
        logit_clip: Option<f64>,
    },
    /// Least squares, f = (⟨w,x⟩ − y)²/2.
    Linear,
    /// Multinomial logistic (softmax) regression.
    Softmax,
    /// Linear SVM (hinge loss) on labels {0, 1}; with `smoothing = β` its β-Moreau envelope
    /// (Lowy & Razaviyayn Thm D.2 / F.2), which is β-smooth and reports 2L as its Lipschitz
    /// constant (Lemma D.7).
    Hinge {
        /// The Moreau envelope's β, if smoothed.
        #[serde(default)]
        smoothing: Option<f64>,
    },
    /// Least absolute deviations, f = |⟨w,x⟩ − y| on a real target: convex, max‖x‖-Lipschitz,
    /// not smooth (Cheu et al. 2022 §4.2); its gradient is the subgradient sign(r)·x. With
    /// `smoothing = β` its β-Moreau envelope (a Huber loss), β-smooth, reporting 2L as its
    /// Lipschitz constant (Lemma 4.6). The shuffle algorithms can instead smooth it themselves
    /// (`smoothing` on the algorithm).
    Absolute {
        /// The Moreau envelope's β, if smoothed.
        #[serde(default)]
        smoothing: Option<f64>,
    },
    /// Binary logistic regression with λ·Σ w_j²/(1 + w_j²) in every per-example loss
    /// (SoteriaFL's a9a model, λ = 0.2 there).
    NonconvexLogistic {
        /// The regulariser's weight λ ≥ 0.
        lambda: f64,
    },
    /// A one-hidden-layer network: inputs → `hidden` sigmoid units → softmax over the classes,
    /// cross-entropy (SoteriaFL's MNIST model: 784 → 64 → 10). `inputs`, if given, must equal
    /// the data's feature count; parameters start at N(0, `init_std`²) drawn from `init_seed`.
    Mlp {
        /// Input width, checked against the data.
        #[serde(default)]
        inputs: Option<usize>,
        /// Hidden units.
        #[serde(default = "default_hidden")]
        hidden: usize,
        /// Seed of the initial parameters.
        #[serde(default)]
        init_seed: u64,
        /// Standard deviation of the initial parameters.
        #[serde(default = "default_init_std")]
        init_std: f64,
    },
    /// A fully connected network of any depth: inputs → `hidden` widths with `activation`
    /// (ReLU by default) → softmax, cross-entropy, PyTorch's default initialisation from
    /// `init_seed` (DP-NormFedAvg's 784 → 300 → 300 → 10 is `hidden = [300, 300]`).
    DeepMlp {
        /// Input width, checked against the data.
        #[serde(default)]
        inputs: Option<usize>,
        /// Hidden layer widths.
        hidden: Vec<usize>,
        /// Hidden activation.
        #[serde(default)]
        activation: Activation,
        /// Seed of the initial parameters.
        #[serde(default)]
        init_seed: u64,
        /// Arithmetic of the products: `f32` (default, ≈ 2x faster, measured in BENCHMARKS.md)
        /// or `f64`; parameters, gradients and everything downstream stay f64.
        #[serde(default)]
        precision: Precision,
    },
    /// A model of `params` parameters outside dpfl, its per-example gradients the silo's own
    /// (`external.rs`; only from Python's `dpfl.halves`, never in an experiment file).
    #[schemars(skip)]
    External {
        /// d.
        params: usize,
    },
}

fn default_hidden() -> usize {
    64
}

/// The official SoteriaFL code's randn(d)/5.
fn default_init_std() -> f64 {
    0.2
}

impl ModelSpec {
    /// Builds the model for `features` inputs and (for classifiers) `classes` classes.
    pub fn build(
        &self,
        features: usize,
        classes: Option<usize>,
    ) -> crate::Result<std::sync::Arc<dyn Model>> {
        let params = match self {
            ModelSpec::Softmax => features.checked_mul(classes.unwrap_or(1)),
            ModelSpec::Mlp { hidden, .. } => {
                Mlp::param_count(features, *hidden, classes.unwrap_or(2))
            }
            ModelSpec::DeepMlp { hidden, .. } => {
                let mut widths = vec![features];
                widths.extend_from_slice(hidden);
                widths.push(classes.unwrap_or(2));
                DeepMlp::param_count(&widths)
            }
            ModelSpec::External { params } => Some(*params),
            _ => Some(features),
        };
        crate::data::limits::check_params("model", params)?;
        Ok(match self {
            ModelSpec::Logistic { logit_clip } => {
                if classes.is_some_and(|c| c != 2) {
                    return Err(crate::Error::config(
                        "model.kind",
                        format!(
                            "logistic regression needs 2 classes, the data has {}",
                            classes.unwrap_or(0)
                        ),
                    ));
                }
                std::sync::Arc::new(LogisticRegression::new(features, *logit_clip)?)
            }
            ModelSpec::Linear => std::sync::Arc::new(LinearRegression::new(features)),
            ModelSpec::Softmax => {
                let c = classes.ok_or_else(|| {
                    crate::Error::config("model.kind", "softmax regression needs a class target")
                })?;
                std::sync::Arc::new(SoftmaxRegression::new(features, c)?)
            }
            ModelSpec::Hinge { smoothing } => {
                if classes.is_some_and(|c| c != 2) {
                    return Err(crate::Error::config(
                        "model.kind",
                        format!(
                            "the hinge loss needs 2 classes, the data has {}",
                            classes.unwrap_or(0)
                        ),
                    ));
                }
                std::sync::Arc::new(HingeLoss::new(features, *smoothing)?)
            }
            ModelSpec::Absolute { smoothing } => {
                if let Some(c) = classes {
                    return Err(crate::Error::config(
                        "model.kind",
                        format!("the absolute loss needs a real target, the data has {c} classes"),
                    ));
                }
                std::sync::Arc::new(AbsoluteLoss::new(features, *smoothing)?)
            }
            ModelSpec::NonconvexLogistic { lambda } => {
                if classes.is_some_and(|c| c != 2) {
                    return Err(crate::Error::config(
                        "model.kind",
                        format!(
                            "logistic regression needs 2 classes, the data has {}",
                            classes.unwrap_or(0)
                        ),
                    ));
                }
                std::sync::Arc::new(NonconvexLogistic::new(features, *lambda)?)
            }
            ModelSpec::Mlp {
                inputs,
                hidden,
                init_seed,
                init_std,
            } => {
                let c = mlp::network_classes(*inputs, features, classes)?;
                std::sync::Arc::new(Mlp::new(features, *hidden, c, *init_seed, *init_std)?)
            }
            ModelSpec::DeepMlp {
                inputs,
                hidden,
                activation,
                init_seed,
                precision,
            } => {
                let c = mlp::network_classes(*inputs, features, classes)?;
                std::sync::Arc::new(
                    DeepMlp::new(features, hidden, c, *activation, *init_seed)?
                        .with_precision(*precision),
                )
            }
            // The public side of a user's model: its dimension (a silo gets its provider).
            ModelSpec::External { params } => {
                std::sync::Arc::new(ExternalModel::new(*params, None))
            }
        })
    }
}

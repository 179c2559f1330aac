//! A model outside dpfl (`model.kind = "external"`, issue 29 item 2): `params` parameters
//! whose per-example gradients a [`GradientProvider`] computes (in the Python package, a
//! user's callable on numpy arrays). dpfl treats the gradients exactly as a built-in model's:
//! every algorithm's oracle clips each record's gradient at min(clip, L)
//! ([`crate::algo::BuildContext::enforcing_oracle`]) before any noise, compression,
//! quantisation or shuffling, so the sensitivity the noise is calibrated to holds whatever the
//! provider returns.
//!
//! The silo's [`Dataset`] is [`index_dataset`]: one feature column holding each record's
//! index 0..n, so the algorithms' record samplers pick indices and the provider maps them to
//! the user's own records (kept wherever the user keeps them).
//!
//! The guarantee needs of the provider what the papers assume of a per-example gradient: row j
//! of its answer depends on the parameters and record `indices[j]` only (it reads no other
//! record and keeps no state between calls). A provider that fails, returns the wrong shape
//! or a non-finite value is recorded as this model's error ([`ExternalModel::take_error`])
//! and the gradient is NaN, so the message it would have fed is discarded by the runner,
//! never sent. Without a provider (the server's side: it needs only d) every gradient is such
//! an error.

use std::sync::{Arc, Mutex};

use super::{Metric, Model};
use crate::data::{Dataset, Target};
use crate::linalg::{Matrix, axpy, clip_factor, norm2};

/// Per-example gradients of a model dpfl does not implement.
pub trait GradientProvider: Send + Sync + std::fmt::Debug {
    /// Writes ∇f(w; record `indices[j]`) into row j of `out` (`indices.len()` rows of
    /// `w.len()` values, row-major). An `Err` names what went wrong.
    fn gradients(&self, indices: &[usize], w: &[f64], out: &mut [f64]) -> Result<(), String>;
}

/// A model of `params` parameters whose gradients come from a [`GradientProvider`].
#[derive(Debug)]
pub struct ExternalModel {
    params: usize,
    provider: Option<Arc<dyn GradientProvider>>,
    /// The first failure of the provider since the last [`Self::take_error`].
    error: Mutex<Option<String>>,
}

impl ExternalModel {
    /// One call of the provider for the whole batch, each row clipped (with `clip`) as
    /// [`super::clipped_batch_grad_per_example`] clips it, summed in record order into `out`
    /// (scaled); a failed call poisons `out` (see [`Self::poison`]).
    fn batch(
        &self,
        w: &[f64],
        data: &Dataset,
        idx: &[usize],
        clip: Option<f64>,
        scale: f64,
        out: &mut [f64],
    ) {
        let Some(g) = self.rows(w, data, idx) else {
            return Self::poison(out);
        };
        for row in g.chunks_exact(self.params.max(1)) {
            let f = clip.map_or(1.0, |c| clip_factor(norm2(row), c));
            if f > 0.0 {
                axpy(scale * f, row, out);
            }
        }
    }

    /// A model of `params` parameters; `provider` `None` for a party that computes no
    /// gradients (the server).
    pub fn new(params: usize, provider: Option<Arc<dyn GradientProvider>>) -> Self {
        ExternalModel {
            params,
            provider,
            error: Mutex::new(None),
        }
    }

    /// The provider's first failure since the last call, taken out: a runner checks it after
    /// every silo step and discards the step's message if there was one.
    pub fn take_error(&self) -> Option<String> {
        self.error.lock().map_or_else(
            |_| Some("the gradient provider panicked".into()),
            |mut e| e.take(),
        )
    }

    fn fail(&self, why: String) {
        if let Ok(mut e) = self.error.lock()
            && e.is_none()
        {
            *e = Some(why);
        }
    }

    /// Row-major gradients of the records `idx` at `w`, checked (shape by the provider's
    /// contract, every value finite); `None` after recording the failure.
    fn rows(&self, w: &[f64], data: &Dataset, idx: &[usize]) -> Option<Vec<f64>> {
        let Some(p) = &self.provider else {
            self.fail(
                "the external model has no gradient provider here: its gradients come from \
                 the silo's own callable (dpfl.halves.SiloHalf(gradients=...))"
                    .into(),
            );
            return None;
        };
        let records: Vec<usize> = idx.iter().map(|&i| data.row(i).0[0] as usize).collect();
        let mut out = vec![0.0; idx.len() * self.params];
        if let Err(e) = p.gradients(&records, w, &mut out) {
            self.fail(e);
            return None;
        }
        if let Some(k) = out.iter().position(|v| !v.is_finite()) {
            let d = self.params.max(1);
            self.fail(format!(
                "the gradients callable returned {} at record {} (row {}), coordinate {}: \
                 per-example gradients must be finite",
                out[k],
                records[k / d],
                k / d,
                k % d
            ));
            return None;
        }
        Some(out)
    }

    fn poison(out: &mut [f64]) {
        out.iter_mut().for_each(|v| *v = f64::NAN);
    }
}

/// The dataset of a silo of `n` records of an external model: feature `record` = 0..n (the
/// index the provider is asked for), target 0.
pub fn index_dataset(n: usize) -> crate::Result<Dataset> {
    let x = Matrix::from_vec(n, 1, (0..n).map(|i| i as f64).collect())
        .ok_or_else(|| crate::Error::Dimension(format!("{n} records")))?;
    Dataset::new(x, vec![0.0; n], Target::Real, vec!["record".into()])
}

impl Model for ExternalModel {
    fn name(&self) -> &'static str {
        "external"
    }
    fn num_params(&self) -> usize {
        self.params
    }
    fn num_features(&self) -> usize {
        1
    }
    /// Not dpfl's to evaluate: the user evaluates their own model.
    fn loss(&self, _w: &[f64], _x: &[f64], _y: f64) -> f64 {
        f64::NAN
    }
    fn add_grad(&self, w: &[f64], x: &[f64], _y: f64, scale: f64, out: &mut [f64]) {
        let one = Dataset::new(
            Matrix::from_vec(1, 1, x.to_vec()).unwrap_or_else(|| Matrix::zeros(1, 1)),
            vec![0.0],
            Target::Real,
            vec!["record".into()],
        );
        match one.ok().and_then(|d| self.rows(w, &d, &[0])) {
            Some(g) => axpy(scale, &g, out),
            None => Self::poison(out),
        }
    }
    fn predict(&self, _w: &[f64], _x: &[f64]) -> f64 {
        f64::NAN
    }
    fn metric(&self) -> Metric {
        Metric::Rmse
    }
    /// Unknown: the oracle clips at the configured bound.
    fn lipschitz(&self, _max_norm: f64) -> Option<f64> {
        None
    }
    fn check_data(&self, data: &Dataset) -> crate::Result<()> {
        let n = data.len();
        if data.num_features() != 1
            || (0..n).any(|i| {
                let v = data.row(i).0[0];
                v.fract() != 0.0 || v < 0.0 || v >= n as f64
            })
        {
            return Err(crate::Error::Dimension(
                "an external model's data is one column of record indices 0..n".into(),
            ));
        }
        Ok(())
    }
    batch_grads_from_loop!();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{GradientOracle, LinearRegression};

    /// Least squares on a fixed 2-feature data set, as an external provider.
    #[derive(Debug)]
    struct Lsq {
        x: Vec<[f64; 2]>,
        y: Vec<f64>,
        bad: Option<f64>,
    }

    impl GradientProvider for Lsq {
        fn gradients(&self, idx: &[usize], w: &[f64], out: &mut [f64]) -> Result<(), String> {
            for (j, &i) in idx.iter().enumerate() {
                let r = w[0] * self.x[i][0] + w[1] * self.x[i][1] - self.y[i];
                out[2 * j] = r * self.x[i][0];
                out[2 * j + 1] = self.bad.unwrap_or(r * self.x[i][1]);
            }
            Ok(())
        }
    }

    #[test]
    fn external_gradients_clip_like_the_built_in_model_and_bad_ones_are_errors() {
        let x = vec![[1.0, 2.0], [3.0, -1.0], [0.5, 0.25], [-2.0, 4.0]];
        let y = vec![1.0, -2.0, 0.5, 3.0];
        let flat: Vec<f64> = x.iter().flatten().copied().collect();
        let data = Dataset::new(
            Matrix::from_vec(4, 2, flat).unwrap(),
            y.clone(),
            Target::Real,
            vec!["a".into(), "b".into()],
        )
        .unwrap();
        let lsq = Arc::new(Lsq { x, y, bad: None });
        let ext = Arc::new(ExternalModel::new(2, Some(lsq.clone())));
        let idx = index_dataset(4).unwrap();
        ext.check_data(&idx).unwrap();
        let w = [0.3, -0.7];
        let batch = [3, 0, 2];
        for clip in [None, Some(0.5)] {
            let builtin = GradientOracle::new(Arc::new(LinearRegression::new(2)), clip).unwrap();
            let external = GradientOracle::new(ext.clone(), clip).unwrap();
            let (mut a, mut b, mut s) = ([0.0; 2], [0.0; 2], [0.0; 2]);
            builtin.mean_grad(&w, &data, &batch, &mut a, &mut s);
            external.mean_grad(&w, &idx, &batch, &mut b, &mut s);
            // Equal up to rounding: the built-in kernel clips through |a|·‖x‖.
            let close = |a: [f64; 2], b: [f64; 2]| (0..2).all(|k| (a[k] - b[k]).abs() < 1e-12);
            assert!(close(a, b) && a != [0.0; 2], "{clip:?}: {a:?} vs {b:?}");
            let (mut a, mut b) = ([0.0; 2], [0.0; 2]);
            builtin.clipped_grad(&w, data.row(1).0, data.row(1).1, &mut a);
            external.clipped_grad(&w, idx.row(1).0, 0.0, &mut b);
            assert!(close(a, b), "{clip:?}: {a:?} vs {b:?}");
        }
        assert_eq!(ext.take_error(), None);
        // A NaN from the provider: NaN gradients and a recorded error naming the record.
        let mut bad = lsq.clone_data();
        bad.bad = Some(f64::NAN);
        let nan = ExternalModel::new(2, Some(Arc::new(bad)));
        let mut g = [0.0; 2];
        nan.add_batch_grad(&w, &idx, &[2], 1.0, &mut g);
        assert!(g.iter().all(|v| v.is_nan()));
        assert!(nan.take_error().unwrap().contains("record 2"));
        assert_eq!(nan.take_error(), None);
        // No provider: an error, never a gradient.
        let server = ExternalModel::new(2, None);
        server.add_grad(&w, &[0.0], 0.0, 1.0, &mut g);
        assert!(
            server
                .take_error()
                .unwrap()
                .contains("no gradient provider")
        );
    }

    impl Lsq {
        fn clone_data(&self) -> Lsq {
            Lsq {
                x: self.x.clone(),
                y: self.y.clone(),
                bad: self.bad,
            }
        }
    }
}

//! Algorithm specifications (what a config file names) and their construction into halves.
//!
//! [`AlgorithmSpec`] is only the serde enum of the configs: every question about an algorithm
//! (label, privacy, noise multiplier, grid knobs, requirements, audit view, plan) goes through
//! one exhaustive match (`with_wing!`) to the variant's [`Wing`] (issue 28 item 1).
//!
//! A wing defined outside this crate is [`AlgorithmSpec::Custom`], registered under its own
//! `kind` with [`AlgorithmSpec::register`] (issue 28 item 6; `registry.rs`): reading a config
//! looks the kind up among the registered ones first (a registered kind is never a built-in
//! one), and the built-in kinds are read by the derived code (`#[serde(remote = "Self")]`
//! keeps the derive and lets the trait impls below add the registry).

use serde::{Deserialize, Serialize};

use super::checked::{ParamError, ParamGuard};
use super::context::{BuildContext, BuiltAlgorithm, SiloCalibration};
use super::half::{ServerHalf, SiloHalf};
use super::lowy;
use super::normfedavg;
use super::registry::{self, CustomPlan, CustomSpec, ExternalWing};
use super::shuffle;
use super::soteria;
use super::wing::{AuditView, Knobs, NoiseMultiplier, Planned, Privacy, Requirements, Wing};

/// An algorithm as named in a config file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(remote = "Self")]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
#[schemars(rename = "AlgorithmSpec")]
pub enum AlgorithmSpec {
    /// Minibatch SGD (Lowy & Razaviyayn Algorithm 2); private when `calibration` is set.
    MbSgd(lowy::wing::MbSgdSpec),
    /// Local SGD / FedAvg: K local single-sample steps, server averages models; private
    /// (the paper's ISRL-DP Local SGD baseline, App. I) when `private = true` or a
    /// `calibration` is given.
    LocalSgd(lowy::wing::LocalSgdSpec),
    /// Accelerated Noisy MB-SGD (Lowy & Razaviyayn Algorithm 1), one-pass or ERM; see
    /// [`lowy::AcceleratedSpec`].
    AcceleratedMbSgd(lowy::acsa::AcceleratedSpec),
    /// Noisy MB-SGD in its general form (Algorithm 7: weights, per-silo K_i) with the
    /// theorems' parameter rules; see [`lowy::NoisyMbSgdSpec`].
    NoisyMbSgd(lowy::mbsgd::NoisyMbSgdSpec),
    /// Shuffled Noisy MB-SGD (Lowy & Razaviyayn Thm 5.1); see [`shuffle::SdpMbSgdSpec`].
    SdpMbSgd(shuffle::SdpMbSgdSpec),
    /// SDP One-Pass Accelerated Noisy MB-SGD (Lowy & Razaviyayn Algorithm 6, PVEC in AC-SA);
    /// see [`shuffle::SdpAcceleratedSpec`].
    SdpAcceleratedMbSgd(shuffle::SdpAcceleratedSpec),
    /// PSGD (Cheu, Joseph, Mao & Peng 2022 Algorithm 3); see [`shuffle::PsgdSpec`].
    Psgd(shuffle::PsgdSpec),
    /// PGD (Cheu, Joseph, Mao & Peng 2022 Algorithm 5); see [`shuffle::PgdSpec`].
    Pgd(shuffle::PgdSpec),
    /// PAGD (Cheu, Joseph, Mao & Peng 2022 Algorithm 4, with smoothing, phases and the
    /// robust variant); see [`shuffle::PagdSpec`].
    Pagd(shuffle::PagdSpec),
    /// Pan-private AC-SA (Cheu, Joseph, Mao & Peng 2022 Algorithm 6); see
    /// [`shuffle::PanPrivateSpec`].
    PanPrivateAcsa(shuffle::PanPrivateSpec),
    /// The DP-NormFedAvg family (Das et al.: Algorithms 2 and 3, the clipping and Binomial
    /// baselines); see [`normfedavg::NormFedAvgSpec`].
    NormFedAvg(normfedavg::NormFedAvgSpec),
    /// SoteriaFL (Li et al. 2022, Algorithms 2–3): shifted compression with a local
    /// estimator; see [`soteria::SoteriaSpec`].
    SoteriaFl(soteria::SoteriaSpec),
    /// CDP-SGD (SoteriaFL Algorithm 1): perturb, then compress.
    CdpSgd(soteria::SoteriaSpec),
    /// LDP-SGD: CDP-SGD uncompressed (SoteriaFL §5 baseline).
    LdpSgd(soteria::SoteriaSpec),
    /// LDP-SVRG: SoteriaFL-SVRG uncompressed (SoteriaFL §5 baseline).
    LdpSvrg(soteria::SoteriaSpec),
    /// Q-DPSGD-1 (Ding et al. 2021; SoteriaFL's Table 1 baseline): silos keep their own
    /// models and send them compressed; see `soteria/qdpsgd.rs`.
    #[serde(rename = "q-dpsgd-1")]
    QDpsgd1(soteria::SoteriaSpec),
    /// A wing defined outside this crate, under the `kind` it was registered with
    /// ([`AlgorithmSpec::register`]); not in the config reference (each program registers
    /// its own).
    #[serde(skip)]
    Custom(CustomSpec),
}

impl Serialize for AlgorithmSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // A registered wing writes its own kind; the built-in kinds are the derive's.
        if let AlgorithmSpec::Custom(c) = self {
            return c.serialize(s);
        }
        AlgorithmSpec::serialize(self, s)
    }
}

impl<'de> Deserialize<'de> for AlgorithmSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        // Without a registered wing (the CLI registers none), straight through the derive, as
        // before the registry: no copy into a JSON value, and a TOML `nan` reaches the
        // parameter check ("step_size must be finite and > 0, got NaN") instead of becoming
        // a JSON null.
        if !registry::any_registered() {
            return AlgorithmSpec::deserialize(d);
        }
        let mut value = serde_json::Value::deserialize(d)?;
        let kind = value
            .get("kind")
            .and_then(serde_json::Value::as_str)
            .map(str::to_owned);
        if let Some(kind) = kind.filter(|k| registry::is_registered(k))
            && let Some(m) = value.as_object_mut()
        {
            m.remove("kind");
            if let Some(spec) = registry::read_spec(&kind, value) {
                return spec.map(AlgorithmSpec::Custom).map_err(D::Error::custom);
            }
            return Err(D::Error::custom(format!(
                "`{kind}` is no longer registered"
            )));
        }
        // With a wing registered: serde_json's value holds no NaN, so a TOML `nan` arrives as
        // null and is refused here as a wrong type, never read as a number.
        AlgorithmSpec::deserialize(value).map_err(D::Error::custom)
    }
}

/// The error of a probe that reads only a kind ([`is_builtin`]).
#[derive(Debug)]
enum Probe {
    UnknownKind,
    Other,
}

impl std::fmt::Display for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self:?}")
    }
}

impl std::error::Error for Probe {}

impl serde::de::Error for Probe {
    fn custom<T: std::fmt::Display>(_: T) -> Self {
        Probe::Other
    }
    fn unknown_variant(_: &str, _: &'static [&'static str]) -> Self {
        Probe::UnknownKind
    }
}

/// Whether `kind` names a built-in algorithm: the derived reader, given only the kind, fails
/// for any other reason than an unknown kind (a missing field) or succeeds. No kind list to
/// keep.
fn is_builtin(kind: &str) -> bool {
    let only_kind =
        serde::de::value::MapDeserializer::<_, Probe>::new(std::iter::once(("kind", kind)));
    !matches!(
        AlgorithmSpec::deserialize(only_kind),
        Err(Probe::UnknownKind)
    )
}

/// Binds `$w` to the [`Wing`] of `$spec`'s variant and evaluates `$body`: the one exhaustive
/// match on the algorithm kinds that reads a config. A new variant fails to compile here
/// until it names its wing; nothing falls into a fallback arm.
macro_rules! with_wing {
    ($spec:expr, $w:ident => $body:expr) => {{
        use soteria::Method;
        use soteria::wing::SoteriaWing;
        let soteria = |method: Method, spec: &soteria::SoteriaSpec| SoteriaWing {
            method,
            spec: spec.clone(),
        };
        match $spec {
            AlgorithmSpec::MbSgd($w) => $body,
            AlgorithmSpec::LocalSgd($w) => $body,
            AlgorithmSpec::AcceleratedMbSgd($w) => $body,
            AlgorithmSpec::NoisyMbSgd($w) => $body,
            AlgorithmSpec::SdpMbSgd($w) => $body,
            AlgorithmSpec::SdpAcceleratedMbSgd($w) => $body,
            AlgorithmSpec::Psgd($w) => $body,
            AlgorithmSpec::Pgd($w) => $body,
            AlgorithmSpec::Pagd($w) => $body,
            AlgorithmSpec::PanPrivateAcsa($w) => $body,
            AlgorithmSpec::NormFedAvg($w) => $body,
            AlgorithmSpec::SoteriaFl(s) => {
                let $w = &soteria(Method::SoteriaFl, s);
                $body
            }
            AlgorithmSpec::CdpSgd(s) => {
                let $w = &soteria(Method::CdpSgd, s);
                $body
            }
            AlgorithmSpec::LdpSgd(s) => {
                let $w = &soteria(Method::LdpSgd, s);
                $body
            }
            AlgorithmSpec::LdpSvrg(s) => {
                let $w = &soteria(Method::LdpSvrg, s);
                $body
            }
            AlgorithmSpec::QDpsgd1(s) => {
                let $w = &soteria(Method::QDpsgd1, s);
                $body
            }
            AlgorithmSpec::Custom($w) => $body,
        }
    }};
}

impl AlgorithmSpec {
    /// Registers the wing `W`, defined outside this crate, under `W::KIND` for this program:
    /// from then on a config with that kind reads as [`AlgorithmSpec::Custom`] (experiment
    /// files, plans, federation files). A built-in kind, a malformed one, or one taken by
    /// another type is refused; registering `W` again is a no-op.
    pub fn register<W: ExternalWing>() -> crate::Result<()> {
        registry::insert::<W>(is_builtin)
    }

    /// A short label (used when a config gives none).
    pub fn default_label(&self) -> String {
        with_wing!(self, w => w.label())
    }
    /// Whether and how the algorithm is private ([`Wing::privacy`]).
    pub fn privacy(&self) -> Privacy {
        with_wing!(self, w => w.privacy())
    }
    /// Whether the algorithm adds noise (and so spends a privacy budget).
    pub fn is_private(&self) -> bool {
        self.privacy().is_private()
    }
    /// How the algorithm treats `privacy.noise_multiplier` ([`Wing::noise_multiplier`]).
    pub fn noise_multiplier(&self) -> NoiseMultiplier {
        with_wing!(self, w => w.noise_multiplier())
    }
    /// Whether the algorithm takes `privacy.noise_multiplier` (σ = z·Δ set directly): the
    /// Gaussian algorithms whose message has one L2 sensitivity Δ. See
    /// [`Self::noise_multiplier_refusal`] for the others.
    pub fn accepts_noise_multiplier(&self) -> bool {
        match self.noise_multiplier() {
            NoiseMultiplier::Accepts => true,
            NoiseMultiplier::Refuses(_) => false,
        }
    }
    /// Why an algorithm refuses `privacy.noise_multiplier` (empty where it accepts one).
    pub fn noise_multiplier_refusal(&self) -> &'static str {
        match self.noise_multiplier() {
            NoiseMultiplier::Accepts => "",
            NoiseMultiplier::Refuses(why) => why,
        }
    }
    /// What a reproduction's grid reads ([`Wing::knobs`]).
    pub fn knobs(&self) -> Knobs {
        with_wing!(self, w => w.knobs())
    }
    /// What a run requires of its runner, without the quorum (see
    /// [`crate::plan::Plan::requirements`] for the planned run's).
    pub fn requirements(&self) -> Requirements {
        with_wing!(self, w => w.requirements())
    }
    /// Whether the runner must put a shuffle stage between the silos and the server.
    pub fn needs_shuffler(&self) -> bool {
        self.requirements().shuffler
    }
    /// Whether a run tracks ‖∇f‖² and the bits sent by default ([`Wing::extended_metrics`]).
    pub fn extended_metrics(&self) -> bool {
        with_wing!(self, w => w.extended_metrics())
    }
    /// How an auditor reads the messages of this algorithm as planned in `wing`.
    pub fn audit_view(&self, wing: &WingPlan) -> crate::Result<AuditView> {
        with_wing!(self, w => Ok(w.audit_view(part(wing, self)?)))
    }
    /// The configured step size; `None` where `params = "theory"` or a preset computes it.
    pub fn explicit_step_size(&self) -> Option<f64> {
        self.knobs().step_size
    }
    /// The same algorithm with step size `eta` and, where it has one, K = `batch` (a grid
    /// point; [`Wing::tuned`]).
    pub fn tuned(&self, eta: f64, batch: Option<usize>) -> Self {
        with_wing!(self, w => AlgorithmSpec::from(w.tuned(eta, batch)))
    }
    /// The same algorithm with another step size (for grid searches).
    pub fn with_step_size(&self, eta: f64) -> Self {
        self.tuned(eta, None)
    }

    /// Checks every parameter that can be checked without the federation ([`ParamGuard`]):
    /// what an experiment runs for each algorithm before it trains any.
    pub fn check(&self) -> Result<(), ParamError> {
        with_wing!(self, w => w.check().map(|_| ()))
    }

    /// Checks the parameters and calibrates every silo once: the algorithm part of a run's
    /// plan (per-silo K_i, σ_i, formula and run event, and what the halves are built from).
    /// `ctx` holds only public information and the gradient oracle (a model without data);
    /// see the module doc of [`crate::algo`].
    pub fn plan(&self, ctx: &BuildContext) -> crate::Result<(Vec<SiloCalibration>, WingPlan)> {
        self.plan_parts(ctx)
            .map(|(calibration, wing, _)| (calibration, wing))
    }

    /// [`AlgorithmSpec::plan`], plus the whole federation where planning already built it (the
    /// shuffle wing calibrates by building), so that the simulator builds it once.
    pub fn plan_parts(
        &self,
        ctx: &BuildContext,
    ) -> crate::Result<(Vec<SiloCalibration>, WingPlan, Option<BuiltAlgorithm>)> {
        with_wing!(self, w => {
            let p = checked_plan(w, ctx)?;
            Ok((p.calibration, p.plan.into_wing_plan(), p.built))
        })
    }

    /// Plans and builds every half at once (the simulator's whole federation, and tests).
    pub fn build(&self, ctx: &BuildContext) -> crate::Result<BuiltAlgorithm> {
        match self.plan_parts(ctx)? {
            (_, _, Some(built)) => Ok(built),
            (calibration, wing, None) => wing.build(ctx, calibration),
        }
    }
}

/// The one path from a config to a plan: checked once, then planned from the checked type.
fn checked_plan<W: Wing>(w: &W, ctx: &BuildContext) -> crate::Result<Planned<W::Plan>> {
    let params = w.check()?;
    W::plan(&params, ctx)
}

/// `wing`'s part for `spec`'s wing; an error if the plan is another wing's.
fn part<'a, P: WingPart>(wing: &'a WingPlan, spec: &AlgorithmSpec) -> crate::Result<&'a P> {
    P::of(wing).filter(|p| p.fits(spec)).ok_or_else(|| {
        crate::Error::config(
            "plan",
            format!("the plan is not one of {}", spec.default_label()),
        )
    })
}

/// A wing's plan as a variant of [`WingPlan`], and back.
trait WingPart: Sized {
    fn into_wing_plan(self) -> WingPlan;
    fn of(wing: &WingPlan) -> Option<&Self>;
    /// Whether the plan is `spec`'s (one variant per wing says it, but for registered wings,
    /// which share one).
    fn fits(&self, _spec: &AlgorithmSpec) -> bool {
        true
    }
}

impl WingPart for CustomPlan {
    fn into_wing_plan(self) -> WingPlan {
        WingPlan::Custom(self)
    }
    fn of(wing: &WingPlan) -> Option<&Self> {
        let WingPlan::Custom(p) = wing else {
            return None;
        };
        Some(p)
    }
    fn fits(&self, spec: &AlgorithmSpec) -> bool {
        matches!(spec, AlgorithmSpec::Custom(c) if c.kind() == self.kind())
    }
}

impl WingPart for lowy::mbsgd::MbSgdPlan {
    fn into_wing_plan(self) -> WingPlan {
        WingPlan::Lowy(LowyPlan::MbSgd(self))
    }
    fn of(wing: &WingPlan) -> Option<&Self> {
        let WingPlan::Lowy(LowyPlan::MbSgd(p)) = wing else {
            return None;
        };
        Some(p)
    }
}

impl WingPart for lowy::acsa::AcsaPlan {
    fn into_wing_plan(self) -> WingPlan {
        WingPlan::Lowy(LowyPlan::Acsa(self))
    }
    fn of(wing: &WingPlan) -> Option<&Self> {
        let WingPlan::Lowy(LowyPlan::Acsa(p)) = wing else {
            return None;
        };
        Some(p)
    }
}

impl WingPart for lowy::local_sgd::LocalSgdPlan {
    fn into_wing_plan(self) -> WingPlan {
        WingPlan::Lowy(LowyPlan::LocalSgd(self))
    }
    fn of(wing: &WingPlan) -> Option<&Self> {
        let WingPlan::Lowy(LowyPlan::LocalSgd(p)) = wing else {
            return None;
        };
        Some(p)
    }
}

impl WingPart for soteria::plan::SoteriaPlan {
    fn into_wing_plan(self) -> WingPlan {
        WingPlan::Soteria(Box::new(self))
    }
    fn of(wing: &WingPlan) -> Option<&Self> {
        let WingPlan::Soteria(p) = wing else {
            return None;
        };
        Some(p)
    }
}

impl WingPart for shuffle::wing::ShuffleWingPlan {
    fn into_wing_plan(self) -> WingPlan {
        WingPlan::Shuffle(Box::new(self))
    }
    fn of(wing: &WingPlan) -> Option<&Self> {
        let WingPlan::Shuffle(p) = wing else {
            return None;
        };
        Some(p)
    }
}

impl WingPart for normfedavg::plan::NormFedAvgPlan {
    fn into_wing_plan(self) -> WingPlan {
        WingPlan::NormFedAvg(Box::new(self))
    }
    fn of(wing: &WingPlan) -> Option<&Self> {
        let WingPlan::NormFedAvg(p) = wing else {
            return None;
        };
        Some(p)
    }
}

/// Each config back into the serde enum (a grid point, [`AlgorithmSpec::tuned`]).
macro_rules! from_config {
    ($($variant:ident($config:ty)),* $(,)?) => {
        $(impl From<$config> for AlgorithmSpec {
            fn from(c: $config) -> Self {
                AlgorithmSpec::$variant(c)
            }
        })*
    };
}

from_config!(
    MbSgd(lowy::wing::MbSgdSpec),
    LocalSgd(lowy::wing::LocalSgdSpec),
    AcceleratedMbSgd(lowy::acsa::AcceleratedSpec),
    NoisyMbSgd(lowy::mbsgd::NoisyMbSgdSpec),
    SdpMbSgd(shuffle::SdpMbSgdSpec),
    SdpAcceleratedMbSgd(shuffle::SdpAcceleratedSpec),
    Psgd(shuffle::PsgdSpec),
    Pgd(shuffle::PgdSpec),
    Pagd(shuffle::PagdSpec),
    PanPrivateAcsa(shuffle::PanPrivateSpec),
    NormFedAvg(normfedavg::NormFedAvgSpec),
    Custom(CustomSpec),
);

impl From<soteria::wing::SoteriaWing> for AlgorithmSpec {
    fn from(w: soteria::wing::SoteriaWing) -> Self {
        use soteria::Method;
        match w.method {
            Method::SoteriaFl => AlgorithmSpec::SoteriaFl(w.spec),
            Method::CdpSgd => AlgorithmSpec::CdpSgd(w.spec),
            Method::LdpSgd => AlgorithmSpec::LdpSgd(w.spec),
            Method::LdpSvrg => AlgorithmSpec::LdpSvrg(w.spec),
            Method::QDpsgd1 => AlgorithmSpec::QDpsgd1(w.spec),
        }
    }
}

/// The resolved, calibrated parameters of one algorithm, per wing: everything its halves are
/// built from beyond the public [`BuildContext`]. Serialisable, so a run plans once and
/// hands the plan to every process (`dpfl federate`); building a half from it calibrates
/// nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WingPlan {
    /// Lowy & Razaviyayn's algorithms.
    Lowy(LowyPlan),
    /// The SoteriaFL wing's algorithms.
    Soteria(Box<soteria::plan::SoteriaPlan>),
    /// The shuffle model's algorithms: the spec (its server half follows by closed forms)
    /// and the wing's plan.
    Shuffle(Box<shuffle::wing::ShuffleWingPlan>),
    /// The DP-NormFedAvg family.
    NormFedAvg(Box<normfedavg::plan::NormFedAvgPlan>),
    /// A registered wing's plan (`registry.rs`).
    Custom(CustomPlan),
}

/// The Lowy & Razaviyayn wing's plans.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LowyPlan {
    /// `mb-sgd` and `noisy-mb-sgd`.
    MbSgd(lowy::mbsgd::MbSgdPlan),
    /// `accelerated-mb-sgd`.
    Acsa(lowy::acsa::AcsaPlan),
    /// `local-sgd`.
    LocalSgd(lowy::local_sgd::LocalSgdPlan),
}

impl WingPlan {
    /// The number of silo halves the plan builds.
    pub fn silos(&self) -> usize {
        match self {
            WingPlan::Lowy(LowyPlan::MbSgd(p)) => p.silos.len(),
            WingPlan::Lowy(LowyPlan::Acsa(p)) => p.silos.len(),
            WingPlan::Lowy(LowyPlan::LocalSgd(p)) => p.silos.len(),
            WingPlan::Soteria(p) => p.silos.len(),
            WingPlan::Shuffle(p) => p.plan.silos.len(),
            WingPlan::NormFedAvg(p) => p.silos.len(),
            WingPlan::Custom(p) => p.silos(),
        }
    }

    /// The fewest silos a shuffled batch must hold for the reported honest-shuffler
    /// guarantee when `participants` silos answer (`ShufflePlan::quorum`); `None` for plans
    /// without a shuffle stage's calibration.
    pub fn quorum(&self, participants: usize) -> Option<usize> {
        match self {
            WingPlan::Shuffle(p) => {
                Some(p.plan.quorum(participants, p.algorithm.honest_fraction()))
            }
            WingPlan::Lowy(_) | WingPlan::Soteria(_) | WingPlan::NormFedAvg(_) => None,
            WingPlan::Custom(p) => p.quorum(participants),
        }
    }

    /// The server half.
    pub fn server_half(&self, ctx: &BuildContext) -> crate::Result<Box<dyn ServerHalf>> {
        match self {
            WingPlan::Lowy(LowyPlan::MbSgd(p)) => p.server_half(ctx),
            WingPlan::Lowy(LowyPlan::Acsa(p)) => p.server_half(ctx),
            WingPlan::Lowy(LowyPlan::LocalSgd(p)) => p.server_half(ctx),
            WingPlan::Soteria(p) => p.server_half(ctx),
            // A plan read from a federation file passes the guard before its server is built.
            WingPlan::Shuffle(p) => p.plan.server_half(p.algorithm.check()?.server_inner(ctx)?),
            WingPlan::NormFedAvg(p) => p.server_half(ctx),
            WingPlan::Custom(p) => p.server_half(ctx),
        }
    }

    /// Silo `silo`'s half (index in silo order).
    pub fn silo_half(&self, ctx: &BuildContext, silo: usize) -> crate::Result<Box<dyn SiloHalf>> {
        match self {
            WingPlan::Lowy(LowyPlan::MbSgd(p)) => p.silo_half(ctx, silo),
            WingPlan::Lowy(LowyPlan::Acsa(p)) => p.silo_half(ctx, silo),
            WingPlan::Lowy(LowyPlan::LocalSgd(p)) => p.silo_half(ctx, silo),
            WingPlan::Soteria(p) => p.silo_half(ctx, silo),
            WingPlan::Shuffle(p) => p.plan.silo_half(ctx, silo),
            WingPlan::NormFedAvg(p) => p.silo_half(ctx, silo),
            WingPlan::Custom(p) => p.silo_half(ctx, silo),
        }
    }

    /// Every half (the simulator's whole federation), with the plan's calibration rows.
    pub fn build(
        &self,
        ctx: &BuildContext,
        calibration: Vec<SiloCalibration>,
    ) -> crate::Result<BuiltAlgorithm> {
        let silos = (0..self.silos())
            .map(|i| self.silo_half(ctx, i))
            .collect::<crate::Result<Vec<_>>>()?;
        Ok(BuiltAlgorithm {
            server: self.server_half(ctx)?,
            silos,
            calibration,
        })
    }
}

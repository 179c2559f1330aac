//! The shape every algorithm's config takes (issue 28 item 1): a [`Wing`] says what it is
//! called, whether and how it is private, how it takes a noise multiplier, which knobs a
//! reproduction's grid may turn, what an auditor reads of its messages, what a run of it
//! requires of the runner, and how it plans.
//!
//! `spec::AlgorithmSpec` is only the serde enum of the configs: each of its methods is one
//! exhaustive line per variant that delegates here, so a new algorithm cannot fall into a
//! fallback arm, and the runners (experiment, `dpfl-net`, the CLI) read [`Requirements`]
//! instead of matching kinds.
//!
//! A wing implements [`Wing`] in its own folder (`lowy/wing.rs`, `shuffle/wing.rs`, …); this
//! file is part of the floor and imports no wing.
//!
//! # A wing outside this crate (issue 28 item 6)
//!
//! A crate that depends on `dpfl` cannot add a variant to `AlgorithmSpec` or `WingPlan`, so
//! each of them has one variant for every wing defined elsewhere, `Custom`, and the decision is
//! a **registry** (`registry.rs`), not a kind list: the outside wing's config implements
//! [`Wing`] and `registry::ExternalWing` (its `KIND`), its plan `registry::WingHalves` (build
//! one half each, serialisable), and a program calls `AlgorithmSpec::register::<W>()` once.
//! From then on `kind = "<KIND>"` reads as `AlgorithmSpec::Custom` wherever an
//! `AlgorithmSpec` is read (experiment files, reproduction specs, the plan in a federation
//! file), and its plan as `WingPlan::Custom`; both answer every question through the same
//! exhaustive one-line-per-variant delegation as the built-in wings, so the runners (the
//! simulator's `Simulator::drive`, `dpfl-net`'s server and silos, the lab's grids) run it
//! without knowing it. What a registered wing must do is what a built-in one must: say its
//! [`Privacy`] (no default), take its noise from a mechanism that reports its own event (the
//! round core charges the silo's ledger from `SiloHalf::round_event`), and give its server
//! half public facts only. A registered kind never shadows a built-in one (refused at
//! registration), and a program that did not register it (the `dpfl` binary) refuses the
//! config naming the kind. The testkit's `laplace_mbsgd/` folder is the proof: a new wing in
//! one folder plus one `mod` line.

use serde::{Deserialize, Serialize};

use super::checked::ParamGuard;
use super::context::{BuildContext, BuiltAlgorithm, SiloCalibration};

/// Whether and how an algorithm is private. Every wing says so: the trait has no default,
/// so a new private algorithm cannot run without a ledger by omission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Privacy {
    /// No noise: spends no budget, needs no `[privacy]` section, and no ledger is kept.
    NonPrivate,
    /// Each silo randomizes its own message before it leaves (ISRL-DP, Lowy & Razaviyayn
    /// Def. 2.2; the LDP of SoteriaFL §2; DP-NormFedAvg's discrete noise); its ledger charges
    /// the plan's event.
    SiloNoise,
    /// Shuffle-model DP (Lowy & Razaviyayn §5, Cheu et al. 2022): what each silo's ledger
    /// charges depends on the shuffler's trust (`shuffle::trust`).
    Shuffled,
    /// Pan-private (Cheu et al. 2022 Algorithm 6, Thm C.3): the silo's state is noised too.
    PanPrivate,
}

impl Privacy {
    /// Whether the algorithm adds noise (and so spends a privacy budget).
    pub fn is_private(self) -> bool {
        match self {
            Privacy::NonPrivate => false,
            Privacy::SiloNoise | Privacy::Shuffled | Privacy::PanPrivate => true,
        }
    }
}

/// How an algorithm treats `privacy.noise_multiplier` (σ = z·Δ set directly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoiseMultiplier {
    /// A Gaussian whose message has one L2 sensitivity Δ: the multiplier fixes σ.
    Accepts,
    /// Refused, with the reason (shown to the user).
    Refuses(&'static str),
}

/// The knobs a reproduction's grid reads (its writes go through [`Wing::tuned`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Knobs {
    /// The configured step size; `None` where the wing computes it (theory rules, presets).
    pub step_size: Option<f64>,
    /// Whether the noise follows Lowy & Razaviyayn App. I's rule, which certifies ISRL-DP
    /// only for K ≥ ⌊n_i√ε/(2√R)⌋ (a grid raises a smaller K to it).
    pub app_i_batch_floor: bool,
}

/// How an auditor decodes a round's released messages (`audit::score::View`). Serialisable:
/// a registered wing's plan carries the view its wing gave (`registry::CustomPlan`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum AuditView {
    /// Gradient-like updates (dense, sparse, compressed, packed).
    Gradient {
        /// Sum over every silo's messages (trusted shuffler) instead of silo 0's.
        all_silos: bool,
    },
    /// A model; the auditor reads broadcast point − model.
    Model,
    /// SoteriaFL's shifted compression with shift step γ.
    Shifted {
        /// γ of the plan.
        gamma: f64,
    },
    /// PVEC's per-coordinate counts of ones.
    PvecCounts {
        /// Sum over every silo's messages (trusted shuffler) instead of silo 0's.
        all_silos: bool,
    },
}

/// How a silo's messages travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// One message per silo and round, to the server (or through the shuffler as is).
    Messages,
    /// PVEC's additive shares of per-label counts (Cheu et al. 2022 §5): the shuffler's
    /// share goes through the shuffler.
    PvecCompact,
    /// PVEC's one-bit messages, every one shuffled: the simulator only (d·(g + s)·K messages
    /// per silo and round are beyond a network reply).
    PvecExplicit,
}

impl Transport {
    /// Whether the messages are PVEC's (whose ledgers charge the honest-shuffler guarantee
    /// only under `shuffler = "trusted"`).
    pub fn is_pvec(self) -> bool {
        match self {
            Transport::Messages => false,
            Transport::PvecCompact | Transport::PvecExplicit => true,
        }
    }
}

/// What a run of an algorithm requires of its runner (simulator, network, CLI).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Requirements {
    /// A shuffle stage between the silos and the server: the privacy against the server
    /// rests on it.
    pub shuffler: bool,
    /// Every silo must answer every round (SoteriaFL: the server's shift stays the silos'
    /// mean only if no round is short; its server half refuses one).
    pub every_silo: bool,
    /// A fixed number of answering silos per round (`all` or `fixed` participation): the
    /// shuffle model's theorems assume M_r = M (Lowy & Razaviyayn §5).
    pub fixed_participation: bool,
    /// How the messages travel.
    pub transport: Transport,
    /// The fewest silos a shuffled batch must hold for the reported honest-shuffler
    /// guarantee; known once planned (`crate::plan::Plan::requirements`), `None` before and
    /// for algorithms without a shuffler.
    pub quorum: Option<usize>,
}

impl Requirements {
    /// An algorithm that needs nothing of its runner beyond the round core.
    pub const PLAIN: Requirements = Requirements {
        shuffler: false,
        every_silo: false,
        fixed_participation: false,
        transport: Transport::Messages,
        quorum: None,
    };
}

/// A wing's plan of one run: each silo's calibration row, the wing's own plan (what its
/// halves are built from), and the whole federation where planning already built it (the
/// shuffle wing calibrates by building).
pub struct Planned<P> {
    /// Per silo: K_i, σ_i, the formula and the run event.
    pub calibration: Vec<SiloCalibration>,
    /// The wing's plan.
    pub plan: P,
    /// Every half, if planning built them.
    pub built: Option<BuiltAlgorithm>,
}

impl<P> Planned<P> {
    /// A plan whose halves are built later (from the plan).
    pub fn new(plan: P, calibration: Vec<SiloCalibration>) -> Self {
        Planned {
            calibration,
            plan,
            built: None,
        }
    }
}

/// One algorithm's config, as a wing sees it. Every method is required: a new wing says
/// what it is, whether it is private, and what it needs, or does not compile. Its
/// parameters are checked once ([`ParamGuard::check`], issue 28 item 4) into the checked type
/// that [`Wing::plan`] takes.
pub trait Wing: ParamGuard {
    /// The wing's calibrated plan (one variant of `spec::WingPlan`).
    type Plan;

    /// The label used when a config gives none.
    fn label(&self) -> String;

    /// Whether and how the algorithm is private.
    fn privacy(&self) -> Privacy;

    /// Whether it takes `privacy.noise_multiplier`.
    fn noise_multiplier(&self) -> NoiseMultiplier;

    /// What a reproduction's grid reads.
    fn knobs(&self) -> Knobs;

    /// The same config with step size `step_size` and, where the wing has one, K = `batch`
    /// (a grid point); a knob the wing computes itself is left alone.
    fn tuned(&self, step_size: f64, batch: Option<usize>) -> Self
    where
        Self: Sized;

    /// What a run requires of its runner (without the quorum, which needs the plan).
    fn requirements(&self) -> Requirements;

    /// Whether a run tracks ‖∇f‖² and the bits sent by default (its paper's axes).
    fn extended_metrics(&self) -> bool;

    /// How an auditor reads its messages, as planned in `plan`.
    fn audit_view(&self, plan: &Self::Plan) -> AuditView;

    /// Calibrates every silo once from the checked parameters, checking what needs the
    /// federation (`ctx` holds only public information and the gradient oracle; see the
    /// module doc of [`crate::algo`]).
    fn plan(params: &Self::Checked, ctx: &BuildContext) -> crate::Result<Planned<Self::Plan>>;
}

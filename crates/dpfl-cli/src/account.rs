//! `dpfl account` and `dpfl calibrate`: the privacy accountant from the command line. Each
//! prints one JSON object on standard output.

use clap::{Args, ValueEnum};
use serde_json::json;

use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::accountant::pld::PldAccountant;
use dpfl_privacy::accountant::sampled_pld::PoissonPair;
use dpfl_privacy::calibration::{
    analytic_gaussian_noise_multiplier, calibrate_noise_multiplier_with_progress,
};
use dpfl_privacy::release::{
    Release, ReleaseError, ReleaseMechanism, SamplingKind, check_noise_multiplier,
};
use dpfl_privacy::{Delta, Epsilon, Neighbouring, PrivacyError};

#[derive(Clone, Copy, ValueEnum)]
pub enum Mechanism {
    Gaussian,
    Laplace,
    /// A scalar integer query at unit sensitivity (noise multiplier = σ on ℤ).
    DiscreteGaussian,
    DiscreteLaplace,
}

#[derive(Clone, Copy, PartialEq, ValueEnum)]
pub enum SamplingArg {
    Poisson,
    WithReplacement,
    WithoutReplacement,
    None,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum AccountantArg {
    Rdp,
    Pld,
    Zcdp,
    Basic,
    Advanced,
    Optimal,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum NeighbouringArg {
    AddRemove,
    ReplaceOne,
}

/// What is released, how often, and how records are sampled.
#[derive(Args)]
pub struct ReleaseArgs {
    /// The noise mechanism.
    #[arg(long, value_enum, default_value = "gaussian")]
    mechanism: Mechanism,
    /// How each step's records are drawn.
    #[arg(long, value_enum, default_value = "none")]
    sampling: SamplingArg,
    /// Sampling rate q (Poisson), or batch size / dataset size (fixed-size sampling).
    #[arg(long)]
    rate: Option<f64>,
    /// Number of steps (releases) composed.
    #[arg(long, default_value_t = 1)]
    steps: u64,
    /// Neighbouring relation (default: add-remove for Poisson or no sampling, replace-one for
    /// fixed-size sampling).
    #[arg(long, value_enum)]
    neighbouring: Option<NeighbouringArg>,
    /// Records in the (silo's) dataset; needed for fixed-size sampling.
    #[arg(long)]
    dataset_size: Option<u64>,
    /// Accountant.
    #[arg(long, value_enum, default_value = "rdp")]
    accountant: AccountantArg,
}

/// The neighbouring pair of Poisson sampling under replace-one.
#[derive(Clone, Copy, ValueEnum)]
pub enum PoissonPairArg {
    /// Clipped contributions (every dpfl mechanism): (1-q)N(0)+qN(1/2) vs (1-q)N(0)+qN(-1/2),
    /// dp-accounting's REPLACE_ONE.
    Ball,
    /// A record one sensitivity from its absent value: (1-q)N(0)+qN(1) vs N(0) (looser).
    Generic,
}

#[derive(Args)]
pub struct AccountArgs {
    /// Noise multiplier: noise standard deviation (Laplace: scale) over the sensitivity.
    #[arg(long)]
    noise_multiplier: f64,
    /// The pair Poisson sampling under replace-one is accounted with (PLD and lower bound).
    #[arg(long, value_enum, default_value = "ball")]
    poisson_pair: PoissonPairArg,
    /// δ at which ε is reported.
    #[arg(long)]
    delta: f64,
    #[command(flatten)]
    release: ReleaseArgs,
}

#[derive(Args)]
pub struct CalibrateArgs {
    /// Target ε.
    #[arg(long)]
    epsilon: f64,
    /// Target δ.
    #[arg(long)]
    delta: f64,
    #[command(flatten)]
    release: ReleaseArgs,
}

fn config(field: &str, reason: impl Into<String>) -> anyhow::Error {
    dpfl::Error::config(field, reason).into()
}

/// Parameter and support errors are usage errors (exit code 2); numerical failures are not.
fn privacy(field: &str, e: PrivacyError) -> anyhow::Error {
    match e {
        PrivacyError::InvalidParameter { .. }
        | PrivacyError::Unsupported { .. }
        | PrivacyError::OutsideValidity { .. } => config(field, e.to_string()),
        other => other.into(),
    }
}

impl ReleaseArgs {
    fn accountant(&self) -> AccountantKind {
        match self.accountant {
            AccountantArg::Rdp => AccountantKind::Rdp,
            AccountantArg::Pld => AccountantKind::Pld,
            AccountantArg::Zcdp => AccountantKind::Zcdp,
            AccountantArg::Basic => AccountantKind::Basic,
            AccountantArg::Advanced => AccountantKind::Advanced,
            AccountantArg::Optimal => AccountantKind::Optimal,
        }
    }

    /// The release these flags describe; its checks are shared with the Python package.
    fn release(&self) -> Release {
        Release {
            mechanism: match self.mechanism {
                Mechanism::Gaussian => ReleaseMechanism::Gaussian,
                Mechanism::Laplace => ReleaseMechanism::Laplace,
                Mechanism::DiscreteGaussian => ReleaseMechanism::DiscreteGaussian,
                Mechanism::DiscreteLaplace => ReleaseMechanism::DiscreteLaplace,
            },
            sampling: match self.sampling {
                SamplingArg::Poisson => SamplingKind::Poisson,
                SamplingArg::WithReplacement => SamplingKind::WithReplacement,
                SamplingArg::WithoutReplacement => SamplingKind::WithoutReplacement,
                SamplingArg::None => SamplingKind::None,
            },
            rate: self.rate,
            steps: self.steps,
            neighbouring: self.neighbouring.map(|n| match n {
                NeighbouringArg::AddRemove => Neighbouring::AddRemove,
                NeighbouringArg::ReplaceOne => Neighbouring::ReplaceOne,
            }),
            dataset_size: self.dataset_size,
        }
    }
}

fn refused(e: ReleaseError) -> anyhow::Error {
    config(e.field, e.reason)
}

/// How long `account` waits for the best-effort lower bound before printing without it.
const LOWER_BOUND_SECONDS: u64 = 20;

/// ε of `event` by `kind`, or null and the reason (a best-effort figure never fails the call).
fn best_effort(
    kind: AccountantKind,
    nb: Neighbouring,
    event: &dpfl_privacy::PrivacyEvent,
    delta: Delta,
    pair: PoissonPair,
) -> (Option<f64>, Option<String>) {
    match epsilon_of(kind, nb, event, delta, pair) {
        Ok(e) => (Some(e), None),
        Err(e) => (None, Some(e.to_string())),
    }
}

/// ε of `event` by `kind`, the PLD with `pair` for Poisson under replace-one.
fn epsilon_of(
    kind: AccountantKind,
    nb: Neighbouring,
    event: &dpfl_privacy::PrivacyEvent,
    delta: Delta,
    pair: PoissonPair,
) -> Result<f64, PrivacyError> {
    match kind {
        AccountantKind::Pld => PldAccountant::new(nb)
            .with_poisson_pair(pair)
            .epsilon(event, delta),
        other => other.epsilon(nb, event, delta),
    }
}

/// The lower bound of a concrete neighbouring pair, computed on a worker thread started
/// before the upper bounds (issue 27 finding 5: it took up to 45 s and could fail the whole
/// call). [`LowerBound::wait`] gives up [`LOWER_BOUND_SECONDS`] after the start.
struct LowerBound {
    rx: std::sync::mpsc::Receiver<Result<Option<f64>, PrivacyError>>,
    start: std::time::Instant,
}

impl LowerBound {
    fn start(
        event: &dpfl_privacy::PrivacyEvent,
        nb: Neighbouring,
        delta: Delta,
        pair: PoissonPair,
    ) -> Self {
        use dpfl_privacy::accountant::lower_bound::{
            LOWER_DISCRETIZATION, epsilon_lower_bound_with,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let ev = event.clone();
        std::thread::spawn(move || {
            let _ = tx.send(epsilon_lower_bound_with(
                &ev,
                nb,
                delta,
                LOWER_DISCRETIZATION,
                pair,
            ));
        });
        LowerBound {
            rx,
            start: std::time::Instant::now(),
        }
    }

    /// The bound, or null and the reason when it failed, timed out or has no pair.
    fn wait(self) -> (Option<f64>, Option<String>) {
        let left = std::time::Duration::from_secs(LOWER_BOUND_SECONDS)
            .saturating_sub(self.start.elapsed());
        match self.rx.recv_timeout(left) {
            Ok(Ok(Some(l))) => (Some(l), None),
            Ok(Ok(None)) => (
                None,
                Some("dpfl has no concrete neighbouring pair for this event".into()),
            ),
            Ok(Err(e)) => (None, Some(e.to_string())),
            Err(_) => (
                None,
                Some(format!(
                    "not computed within {LOWER_BOUND_SECONDS} s (best effort)"
                )),
            ),
        }
    }
}

pub fn account(args: &AccountArgs) -> anyhow::Result<()> {
    let acc = args.release.accountant();
    let r = &args.release.release();
    let delta = Delta::new(args.delta).map_err(|e| privacy("--delta", e))?;
    check_noise_multiplier(args.noise_multiplier).map_err(refused)?;
    let sampling = r.sampling().map_err(refused)?;
    let event = r.event(args.noise_multiplier, &sampling);
    let nb = r.neighbouring();
    let pair = match args.poisson_pair {
        PoissonPairArg::Ball => PoissonPair::Ball,
        PoissonPairArg::Generic => PoissonPair::Generic,
    };
    let lower = LowerBound::start(&event, nb, delta, pair);
    let asked = epsilon_of(acc, nb, &event, delta, pair).map_err(|e| privacy("--accountant", e))?;
    // RDP and the PLD are both sound upper bounds: with either asked for, the other is
    // computed too (best effort) and the tighter one is the answer, both shown (issue 27:
    // the PLD's BBG profile for sampling with replacement printed 2.82 where RDP gives 2.35).
    let other = match acc {
        AccountantKind::Rdp => Some(AccountantKind::Pld),
        AccountantKind::Pld => Some(AccountantKind::Rdp),
        _ => None,
    };
    let mut notes = serde_json::Map::new();
    let (mut eps, mut used) = (asked, acc);
    let mut uppers = vec![asked];
    let mut both = serde_json::Map::new();
    both.insert(format!("{}_epsilon", acc.name()), json!(asked));
    if let Some(o) = other {
        let (e, why) = best_effort(o, nb, &event, delta, pair);
        both.insert(format!("{}_epsilon", o.name()), json!(e));
        if let Some(why) = why {
            notes.insert(format!("{}_epsilon", o.name()), json!(why));
        }
        if let Some(e) = e {
            uppers.push(e);
            if e < eps {
                (eps, used) = (e, o);
            }
        }
    }
    // How tight is it: a lower bound on the true ε from a concrete neighbouring pair. Best
    // effort, and never above an upper bound computed here.
    let (mut lower, why) = lower.wait();
    if let Some(why) = why {
        notes.insert("epsilon_lower_bound".into(), json!(why));
    }
    if let Some(l) = lower
        && let Some(u) = uppers.iter().copied().reduce(f64::min)
        && l > u
    {
        lower = None;
        notes.insert(
            "epsilon_lower_bound".into(),
            json!(format!(
                "the computed bound {l} exceeds the upper bound {u} (numerical round-off); withheld"
            )),
        );
    }
    let mut out = json!({
        "epsilon": eps,
        "epsilon_accountant": used.name(),
        "epsilon_lower_bound": lower,
        "delta": delta.get(),
        "accountant": acc.name(),
        "neighbouring": nb,
        "noise_multiplier": args.noise_multiplier,
        "steps": r.steps,
        "event": event,
    });
    for (k, v) in both {
        out[k] = v;
    }
    if matches!(
        sampling,
        Some(dpfl_privacy::event::Sampling::Poisson { .. })
    ) && nb == Neighbouring::ReplaceOne
    {
        out["poisson_pair"] = json!(pair.describe());
    }
    if !notes.is_empty() {
        out["notes"] = serde_json::Value::Object(notes);
    }
    println!("{out}");
    Ok(())
}

pub fn calibrate(args: &CalibrateArgs) -> anyhow::Result<()> {
    let acc = args.release.accountant();
    let r = &args.release.release();
    let eps = Epsilon::new(args.epsilon).map_err(|e| privacy("--epsilon", e))?;
    let delta = Delta::new(args.delta).map_err(|e| privacy("--delta", e))?;
    let sampling = r.sampling().map_err(refused)?;
    let nb = r.neighbouring();
    // A PLD search can take a while (issue 12: it ran minutes silently): a spinner on a
    // terminal, a line every 10 s off one, naming the evaluations so far.
    let bar = crate::progress::Progress::new(0, false, "{spinner} {msg} ({elapsed})", "steps");
    bar.set_message(format!("calibrating with the {} accountant", acc.name()));
    let mut evals = 0u64;
    let progress = |z: f64, e: f64| {
        evals += 1;
        bar.set_message(format!(
            "calibrating with the {} accountant: {evals} evaluations; epsilon {e:.6} at z = {z:.6}",
            acc.name()
        ));
    };
    let z = calibrate_noise_multiplier_with_progress(
        |z| r.event(z, &sampling),
        acc,
        nb,
        eps,
        delta,
        progress,
    )
    .map_err(|e| privacy("--accountant", e))?;
    bar.finish();
    let achieved = acc
        .epsilon(nb, &r.event(z, &sampling), delta)
        .map_err(|e| privacy("--accountant", e))?;
    let mut out = json!({
        "noise_multiplier": z,
        "epsilon": eps.get(),
        "epsilon_achieved": achieved,
        "delta": delta.get(),
        "accountant": acc.name(),
        "neighbouring": nb,
        "steps": r.steps,
        "event": r.event(z, &sampling),
    });
    // One Gaussian release: the analytic Gaussian mechanism is exact (Balle & Wang 2018).
    if sampling.is_none() && r.steps == 1 && r.mechanism == ReleaseMechanism::Gaussian {
        let a =
            analytic_gaussian_noise_multiplier(eps, delta).map_err(|e| privacy("--epsilon", e))?;
        out["analytic_gaussian_noise_multiplier"] = json!(a);
    }
    println!("{out}");
    Ok(())
}

//! `dpfl account` and `dpfl calibrate`: the privacy accountant from the command line. Each
//! prints one JSON object on standard output.

use clap::{Args, ValueEnum};

use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::accountant::sampled_pld::PoissonPair;
use dpfl_privacy::release::{
    LOWER_BOUND_SECONDS, Release, ReleaseError, ReleaseMechanism, ReportError, SamplingKind,
    account_report, calibrate_report,
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

fn report_error(e: ReportError) -> anyhow::Error {
    match e {
        ReportError::Release(e) => refused(e),
        ReportError::Privacy { field, error } => privacy(field, error),
        other => anyhow::anyhow!("{other}"),
    }
}

pub fn account(args: &AccountArgs) -> anyhow::Result<()> {
    let delta = Delta::new(args.delta).map_err(|e| privacy("--delta", e))?;
    let pair = match args.poisson_pair {
        PoissonPairArg::Ball => PoissonPair::Ball,
        PoissonPairArg::Generic => PoissonPair::Generic,
    };
    let out = account_report(
        &args.release.release(),
        args.noise_multiplier,
        delta,
        args.release.accountant(),
        pair,
        std::time::Duration::from_secs(LOWER_BOUND_SECONDS),
    )
    .map_err(report_error)?;
    println!("{out}");
    Ok(())
}

pub fn calibrate(args: &CalibrateArgs) -> anyhow::Result<()> {
    let acc = args.release.accountant();
    let r = &args.release.release();
    let eps = Epsilon::new(args.epsilon).map_err(|e| privacy("--epsilon", e))?;
    let delta = Delta::new(args.delta).map_err(|e| privacy("--delta", e))?;
    // Refused before the spinner shows.
    r.sampling().map_err(refused)?;
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
    let out = calibrate_report(r, eps, delta, acc, progress).map_err(report_error)?;
    bar.finish();
    println!("{out}");
    Ok(())
}

//! `dpfl account` and `dpfl calibrate`: the privacy accountant from the command line. Each
//! prints one JSON object on standard output.

use clap::{Args, ValueEnum};
use serde_json::json;

use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::calibration::{
    analytic_gaussian_noise_multiplier, calibrate_noise_multiplier_with_progress,
};
use dpfl_privacy::event::Sampling;
use dpfl_privacy::{Delta, Epsilon, Neighbouring, PrivacyError, PrivacyEvent};

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

#[derive(Args)]
pub struct AccountArgs {
    /// Noise multiplier: noise standard deviation (Laplace: scale) over the sensitivity.
    #[arg(long)]
    noise_multiplier: f64,
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

    fn neighbouring(&self) -> Neighbouring {
        match (self.neighbouring, self.sampling) {
            (Some(NeighbouringArg::AddRemove), _) => Neighbouring::AddRemove,
            (Some(NeighbouringArg::ReplaceOne), _) => Neighbouring::ReplaceOne,
            (None, SamplingArg::WithReplacement | SamplingArg::WithoutReplacement) => {
                Neighbouring::ReplaceOne
            }
            (None, _) => Neighbouring::AddRemove,
        }
    }

    fn sampling(&self) -> anyhow::Result<Option<Sampling>> {
        if self.steps == 0 {
            return Err(config("--steps", "must be at least 1"));
        }
        let rate = || -> anyhow::Result<f64> {
            match self.rate {
                Some(q) if q > 0.0 && q <= 1.0 => Ok(q),
                Some(q) => Err(config("--rate", format!("{q} must lie in (0, 1]"))),
                None => Err(config("--rate", "required with this --sampling")),
            }
        };
        let batch = |q: f64| -> anyhow::Result<(u64, u64)> {
            let n = match self.dataset_size {
                Some(n) if n > 0 => n,
                Some(_) => return Err(config("--dataset-size", "must be at least 1")),
                None => {
                    return Err(config(
                        "--dataset-size",
                        "required for with-replacement and without-replacement sampling",
                    ));
                }
            };
            let k = q * n as f64;
            let kr = k.round();
            if (k - kr).abs() > 1e-6 * k.max(1.0) || kr < 1.0 {
                return Err(config(
                    "--rate",
                    format!("rate x dataset-size = {k} is not a whole batch size >= 1"),
                ));
            }
            Ok((n, kr as u64))
        };
        Ok(match self.sampling {
            SamplingArg::None => {
                if self.rate.is_some() {
                    return Err(config("--rate", "given, but --sampling is none"));
                }
                None
            }
            SamplingArg::Poisson => Some(Sampling::Poisson { rate: rate()? }),
            SamplingArg::WithReplacement => {
                let (population, draws) = batch(rate()?)?;
                Some(Sampling::WithReplacement { population, draws })
            }
            SamplingArg::WithoutReplacement => {
                let (population, size) = batch(rate()?)?;
                Some(Sampling::WithoutReplacement { population, size })
            }
        })
    }

    fn event(&self, z: f64, sampling: &Option<Sampling>) -> PrivacyEvent {
        let base = match self.mechanism {
            Mechanism::Gaussian => PrivacyEvent::Gaussian {
                noise_multiplier: z,
            },
            Mechanism::Laplace => PrivacyEvent::Laplace {
                noise_multiplier: z,
            },
            Mechanism::DiscreteGaussian => PrivacyEvent::discrete_gaussian_scalar(z),
            Mechanism::DiscreteLaplace => PrivacyEvent::DiscreteLaplace {
                noise_multiplier: z,
            },
        };
        let step = match sampling {
            Some(s) => base.sampled(s.clone()),
            None => base,
        };
        if self.steps == 1 {
            step
        } else {
            step.repeated(self.steps)
        }
    }
}

pub fn account(args: &AccountArgs) -> anyhow::Result<()> {
    let r = &args.release;
    let delta = Delta::new(args.delta).map_err(|e| privacy("--delta", e))?;
    if !(args.noise_multiplier.is_finite() && args.noise_multiplier > 0.0) {
        return Err(config(
            "--noise-multiplier",
            format!("{} must be finite and > 0", args.noise_multiplier),
        ));
    }
    let sampling = r.sampling()?;
    let event = r.event(args.noise_multiplier, &sampling);
    let acc = r.accountant();
    let eps = acc
        .epsilon(r.neighbouring(), &event, delta)
        .map_err(|e| privacy("--accountant", e))?;
    // How tight is it: a lower bound on the true ε from a concrete neighbouring pair (null
    // where dpfl has no pair for the event).
    let lower =
        dpfl_privacy::accountant::lower_bound::epsilon_lower_bound(&event, r.neighbouring(), delta)
            .map_err(|e| privacy("--noise-multiplier", e))?;
    let out = json!({
        "epsilon": eps,
        "epsilon_lower_bound": lower,
        "delta": delta.get(),
        "accountant": acc.name(),
        "neighbouring": r.neighbouring(),
        "noise_multiplier": args.noise_multiplier,
        "steps": r.steps,
        "event": event,
    });
    println!("{out}");
    Ok(())
}

pub fn calibrate(args: &CalibrateArgs) -> anyhow::Result<()> {
    let r = &args.release;
    let eps = Epsilon::new(args.epsilon).map_err(|e| privacy("--epsilon", e))?;
    let delta = Delta::new(args.delta).map_err(|e| privacy("--delta", e))?;
    let sampling = r.sampling()?;
    let acc = r.accountant();
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
    if sampling.is_none() && r.steps == 1 && matches!(r.mechanism, Mechanism::Gaussian) {
        let a =
            analytic_gaussian_noise_multiplier(eps, delta).map_err(|e| privacy("--epsilon", e))?;
        out["analytic_gaussian_noise_multiplier"] = json!(a);
    }
    println!("{out}");
    Ok(())
}

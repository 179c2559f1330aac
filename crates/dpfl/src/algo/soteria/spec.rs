//! What a config names for the SoteriaFL wing and how it is built into halves.
//!
//! ```toml
//! [[algorithms]]
//! kind = "soteria-fl"            # or "cdp-sgd", "ldp-sgd", "ldp-svrg"
//! estimator = "svrg"             # gd | sgd | svrg | saga (soteria-fl only)
//! step_size = 0.6
//! calibration = "paper-code"     # accountant (default) | closed-form | paper-code | none
//! compressor = { kind = "random-k", fraction = 0.05, indices = "seed" }
//! sampling = "with-replacement"  # the default (the code's); or without-replacement, poisson
//! ```

use serde::{Deserialize, Serialize};

use dpfl_privacy::mechanism::GaussianMechanism;
use dpfl_privacy::sampler::{BatchSampler, RecordSampling};

use super::calibration::{
    CODE_DIRECT_FACTOR, CODE_SHIFTED_CONSTANT, Estimator, accountant_sigma, closed_form_sigma,
    default_batch, round_event, shift_step, split_sigma,
};
use super::server::SoteriaServer;
use super::silo::{SiloNoise, SoteriaSilo};
use crate::algo::context::{BuildContext, BuiltAlgorithm, SiloCalibration};
use crate::algo::half::SiloHalf;
use crate::compress::{CompressorSpec, IndexEncoding};

/// Which algorithm of the paper (digest §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Algorithm 2 + 3: shifted compression with a local estimator.
    SoteriaFl,
    /// Algorithm 1: perturb, then compress directly.
    CdpSgd,
    /// CDP-SGD with the identity compressor (digest §3.4).
    LdpSgd,
    /// SoteriaFL-SVRG with the identity compressor (digest §3.4).
    LdpSvrg,
}

/// How σ is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum NoiseCalibration {
    /// The smallest σ dpfl's accountant certifies for (ε, δ) over T rounds of the sampling
    /// actually used (replace-one).
    #[default]
    Accountant,
    /// Theorem 2: σ² = c(G_A²/4+G_B²)G²T ln(1/δ)/(m²ε²) with c = `noise_constant`
    /// (default 48); its constant is unstated in the paper, so no guarantee is implied.
    ClosedForm,
    /// The official code's presets: c = 48 for SoteriaFL and LDP-SVRG, 8G² for CDP/LDP-SGD.
    PaperCode,
    /// No noise (non-private; for tests and baselines).
    None,
}

/// Where the gradients are clipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Clipping {
    /// Every per-record gradient at G (the paper's Assumption 2; SVRG/SAGA clip both terms).
    #[default]
    PerRecord,
    /// The official code's clipping of each silo's whole estimator at G. NO FORMAL GUARANTEE
    /// at the target ε: the only sound bound is sensitivity 2G per round, which is what the
    /// run's reported ε is computed from. A reproduction option, never a default.
    AggregateNoGuarantee,
}

/// x⁰ ~ N(0, std²) from `seed` (the official code's randn(d)/5 has std 0.2).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InitSpec {
    pub std: f64,
    #[serde(default)]
    pub seed: u64,
}

/// The configuration shared by the wing's algorithms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoteriaSpec {
    pub step_size: f64,
    /// SoteriaFL's local estimator (default sgd); only `kind = "soteria-fl"` takes one.
    #[serde(default)]
    pub estimator: Option<Estimator>,
    /// b; default the paper's rule per estimator (calibration module).
    #[serde(default)]
    pub batch_size: Option<usize>,
    /// SVRG's p; default b/m.
    #[serde(default)]
    pub snapshot_probability: Option<f64>,
    /// Default random-k with k = max(1, ⌊d/20⌋) (indices by seed); LDP-* use the identity.
    #[serde(default)]
    pub compressor: Option<CompressorSpec>,
    /// γ; default sqrt((1+2ω)/(2(1+ω)³)).
    #[serde(default)]
    pub shift_step: Option<f64>,
    #[serde(default)]
    pub calibration: NoiseCalibration,
    /// c of the closed form (calibration = "closed-form"); default 48.
    #[serde(default)]
    pub noise_constant: Option<f64>,
    #[serde(default)]
    pub clipping: Clipping,
    /// Record sampling: `with-replacement` (the official code's, default), `without-replacement`
    /// or `poisson` (the analysis's, 1/b normalisation; dpfl's accountants account Poisson
    /// only under add/remove-one, so it needs a closed-form calibration).
    #[serde(default)]
    pub sampling: RecordSampling,
    /// Seed of the server's SVRG coin stream (public randomness).
    #[serde(default)]
    pub coin_seed: u64,
    /// x⁰; default the model's own initial parameters.
    #[serde(default)]
    pub init: Option<InitSpec>,
}

impl SoteriaSpec {
    pub fn label(&self, method: Method) -> String {
        match method {
            Method::SoteriaFl => {
                let e = match self.estimator.unwrap_or_default() {
                    Estimator::Gd => "GD",
                    Estimator::Sgd => "SGD",
                    Estimator::Svrg => "SVRG",
                    Estimator::Saga => "SAGA",
                };
                format!("SoteriaFL-{e}")
            }
            Method::CdpSgd => "CDP-SGD".into(),
            Method::LdpSgd => "LDP-SGD".into(),
            Method::LdpSvrg => "LDP-SVRG".into(),
        }
    }
    pub fn is_private(&self) -> bool {
        self.calibration != NoiseCalibration::None
    }
}

fn bad(field: &str, reason: impl Into<String>) -> crate::Error {
    crate::Error::config(format!("algorithm.{field}"), reason)
}

/// Builds the halves of `method` (module doc of [`super`] for the decisions).
pub fn build(
    ctx: &BuildContext,
    method: Method,
    spec: &SoteriaSpec,
) -> crate::Result<BuiltAlgorithm> {
    let n = ctx.silos.len();
    let d = ctx.federation.dim;
    let t = ctx.federation.rounds;
    if ctx.federation.expected_participants < n as f64 {
        return Err(crate::Error::config(
            "participation",
            format!(
                "SoteriaFL needs every silo every round (expected M = {} < N = {n}); use participation = \"all\"",
                ctx.federation.expected_participants
            ),
        ));
    }
    let est = match (method, spec.estimator) {
        (Method::SoteriaFl, e) => e.unwrap_or_default(),
        (Method::LdpSvrg, None | Some(Estimator::Svrg)) => Estimator::Svrg,
        (Method::CdpSgd | Method::LdpSgd, None | Some(Estimator::Sgd)) => Estimator::Sgd,
        (_, Some(e)) => {
            return Err(bad(
                "estimator",
                format!("{e:?} is fixed by this kind; only soteria-fl takes an estimator"),
            ));
        }
    };
    let identity = CompressorSpec::Identity {};
    let comp_spec = match (method, &spec.compressor) {
        (Method::LdpSgd | Method::LdpSvrg, None) => identity,
        (Method::LdpSgd | Method::LdpSvrg, Some(c)) if *c == identity => identity,
        (Method::LdpSgd | Method::LdpSvrg, Some(_)) => {
            return Err(bad(
                "compressor",
                "LDP-SGD/LDP-SVRG are uncompressed; use cdp-sgd or soteria-fl",
            ));
        }
        (_, Some(c)) => c.clone(),
        // k = ⌊d/20⌋ (the experiments' 5%), at least one coordinate.
        (_, None) => CompressorSpec::RandomK {
            k: Some((d / 20).max(1)),
            fraction: None,
            indices: IndexEncoding::Seed,
        },
    };
    let omega = comp_spec.build(d)?.omega();
    // LDP-SVRG is SoteriaFL-SVRG with ω = 0, where v = (1/n)Σ g_i exactly: run unshifted.
    let shifted = method == Method::SoteriaFl;
    let gamma = match spec.shift_step {
        Some(g) if !(g.is_finite() && g > 0.0 && g <= 1.0) => {
            return Err(bad("shift_step", format!("must be in (0, 1], got {g}")));
        }
        Some(g) => g,
        None => shift_step(omega),
    };
    let g_clip = ctx.lipschitz;
    let aggregate = spec.clipping == Clipping::AggregateNoGuarantee;
    let oracle = if aggregate {
        crate::model::GradientOracle::new(ctx.oracle.model_arc(), None)?
    } else {
        ctx.enforcing_oracle()?
    };
    if let Some(c) = spec.noise_constant
        && !(c.is_finite() && c > 0.0)
    {
        return Err(bad(
            "noise_constant",
            format!("must be finite and > 0, got {c}"),
        ));
    }
    if ctx.noise != dpfl_privacy::GaussianNoise::default() && spec.is_private() {
        // The events below are computed from the continuous σ; the discrete variant inflates σ.
        return Err(crate::Error::config(
            "privacy.mechanism",
            "the SoteriaFL wing adds the continuous Gaussian only",
        ));
    }
    let mut silos: Vec<Box<dyn SiloHalf>> = Vec::with_capacity(n);
    let mut report = Vec::with_capacity(n);
    let mut coin_p = None;
    for info in &ctx.silos {
        let m = info.records;
        let (eps, delta) = match info.budget {
            Some(b) => b,
            None if !spec.is_private() => (1.0, 0.5),
            None => {
                return Err(bad(
                    "calibration",
                    format!("silo {} has no privacy budget", info.id),
                ));
            }
        };
        let b = match (est, spec.batch_size) {
            (Estimator::Gd, Some(b)) if b != m => {
                return Err(bad("batch_size", "GD uses every record (b = m)"));
            }
            (_, Some(0)) => return Err(bad("batch_size", "must be at least 1")),
            (_, Some(b)) if b > m => {
                return Err(bad(
                    "batch_size",
                    format!("{b} exceeds silo {}'s {m} records", info.id),
                ));
            }
            (_, Some(b)) => b,
            (e, None) => default_batch(e, m, n, d, omega, g_clip, eps, delta),
        };
        let sampler = match est {
            Estimator::Gd => None,
            _ => Some(BatchSampler::new(spec.sampling, m, b)?),
        };
        let sampling = sampler.map_or(dpfl_privacy::event::Sampling::Poisson { rate: 1.0 }, |s| {
            s.sampling()
        });
        if est == Estimator::Svrg {
            let p = spec.snapshot_probability.unwrap_or(b as f64 / m as f64);
            if !(p > 0.0 && p <= 1.0) {
                return Err(bad(
                    "snapshot_probability",
                    format!("must be in (0, 1], got {p}"),
                ));
            }
            coin_p = Some(p);
        }
        let (sigma, formula) = match spec.calibration {
            NoiseCalibration::None => (0.0, "non-private".to_string()),
            NoiseCalibration::Accountant => {
                let (s, acc) = accountant_sigma(
                    est,
                    g_clip,
                    b,
                    m,
                    &sampling,
                    aggregate,
                    t,
                    dpfl_privacy::Epsilon::new(eps)?,
                    dpfl_privacy::Delta::new(delta)?,
                )?;
                (
                    s,
                    format!(
                        "sigma = smallest certified by the {acc} accountant for ({eps}, {delta}) over T = {t} rounds"
                    ),
                )
            }
            NoiseCalibration::ClosedForm => {
                let c = spec.noise_constant.unwrap_or(CODE_SHIFTED_CONSTANT);
                (
                    closed_form_sigma(c, est.noise_factor(), g_clip, t, m, eps, delta),
                    format!(
                        "sigma^2 = {c} (G_A^2/4+G_B^2) T ln(1/delta)/(m^2 eps^2) (SoteriaFL Thm 2/4; constant unstated by the paper)"
                    ),
                )
            }
            NoiseCalibration::PaperCode => {
                let (c, f) = match method {
                    Method::CdpSgd | Method::LdpSgd => (CODE_DIRECT_FACTOR, 1.0),
                    _ => (CODE_SHIFTED_CONSTANT, est.noise_factor()),
                };
                (
                    closed_form_sigma(c, f, g_clip, t, m, eps, delta),
                    format!(
                        "sigma^2 = {} G^2 T ln(1/delta)/(m^2 eps^2) (official SoteriaFL code preset)",
                        c * f
                    ),
                )
            }
        };
        let formula = if aggregate {
            format!(
                "{formula}; aggregate clipping: NO FORMAL GUARANTEE at the target, reported epsilon from sensitivity 2G"
            )
        } else {
            formula
        };
        let noise = if spec.is_private() {
            let event = round_event(est, sigma, g_clip, b, m, &sampling, aggregate);
            let parts = if est.has_full_term() && !aggregate {
                let (sa, sb) = split_sigma(sigma);
                vec![
                    GaussianMechanism::new(sa, 4.0 * g_clip / b as f64)?,
                    GaussianMechanism::new(sb, 2.0 * g_clip / m as f64)?,
                ]
            } else {
                let unit = match (aggregate, est) {
                    (true, _) => 2.0 * g_clip,
                    (false, Estimator::Gd) => 2.0 * g_clip / m as f64,
                    _ => 2.0 * g_clip / b as f64,
                };
                vec![GaussianMechanism::new(sigma, unit)?]
            };
            Some(SiloNoise {
                parts,
                event,
                sigma,
            })
        } else {
            None
        };
        let run_event = noise.as_ref().map(|n| n.event.clone().repeated(t as u64));
        let silo = SoteriaSilo::new(
            est,
            oracle.clone(),
            aggregate.then_some(g_clip),
            sampler,
            m,
            b,
            noise,
            comp_spec.build(d)?,
            shifted.then_some(gamma),
        );
        report.push(SiloCalibration {
            silo: info.id,
            sigma,
            batch_size: b,
            formula: format!(
                "{formula}; omega = {omega:.4}{}",
                if shifted {
                    format!(", gamma = {gamma:.5}")
                } else {
                    String::new()
                }
            ),
            run_event,
        });
        silos.push(Box::new(silo));
    }
    let init = match spec.init {
        None => ctx.oracle.model().initial_params(),
        Some(InitSpec { std, seed }) => {
            if !(std.is_finite() && std >= 0.0) {
                return Err(bad(
                    "init.std",
                    format!("must be finite and >= 0, got {std}"),
                ));
            }
            let mut x = vec![0.0; d];
            if std > 0.0 {
                use dpfl_privacy::VectorMechanism;
                let mut rng = dpfl_privacy::DpRng::from_seed(
                    seed,
                    dpfl_privacy::rng::Purpose::Server,
                    u32::MAX,
                );
                GaussianMechanism::new(std, 1.0)?.privatize(&mut x, &mut rng);
            }
            x
        }
    };
    let server = SoteriaServer::new(
        init,
        spec.step_size,
        shifted.then_some(gamma),
        coin_p.map(|p| (p, spec.coin_seed)),
        n,
    );
    Ok(BuiltAlgorithm {
        server: Box::new(server),
        silos,
        calibration: report,
    })
}

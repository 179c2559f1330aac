//! SoteriaFL's parameter rules (Li, Zhao, Li & Chi 2022; digest `soteriafl.md` §1.2, §3.2–3.3,
//! §5.2): the shift step γ, the default batch sizes and snapshot probability, the closed-form
//! noise of Theorems 2 and 4 with its constant exposed and the official code's presets, and
//! dpfl's accountant calibration for the sampling actually used.
//!
//! Privacy split (Lemma 3, Assumption 3a): a silo's estimator is A + B with A a subsampled
//! mean of per-record terms ‖φ‖ ≤ G_A and B a full-batch mean of ‖ψ‖ ≤ G_B. Under replace-one
//! one record moves A by 2G_A/b (per occurrence) and B by 2G_B/m. For SVRG and SAGA the noise
//! N(0, σ²I) is added as two independent draws N(0, (2/3)σ²I) on A and N(0, (1/3)σ²I) on B
//! (the proof's split; the sum has exactly the paper's law), so the round's event is the
//! composition of a sampled Gaussian and a plain one, which dpfl's accountant composes soundly.

use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::calibration::{
    calibrate_noise_multiplier, calibrate_rdp_then_pld, calibrate_sampled_gaussian,
};
use dpfl_privacy::event::Sampling;
use dpfl_privacy::{Delta, Epsilon, Neighbouring, PrivacyEvent};

/// The shift step size of Theorem 3 / Lemma 7: γ = sqrt((1+2ω) / (2(1+ω)³)).
pub(crate) fn shift_step(omega: f64) -> f64 {
    ((1.0 + 2.0 * omega) / (2.0 * (1.0 + omega).powi(3))).sqrt()
}

/// The local estimator of a silo (Algorithm 3's options; GD is Option I with b = m).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    Default,
    schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Estimator {
    /// Full-batch gradient (Option I with b = m).
    Gd,
    /// Minibatch gradient of b records (Option I).
    #[default]
    Sgd,
    /// Loopless SVRG with a shared snapshot coin (Option II).
    Svrg,
    /// SAGA with a per-record gradient table (Option III). Non-private runs only: the table
    /// is hidden state that Lemma 3's per-round split does not cover.
    Saga,
}

impl Estimator {
    /// (G_A, G_B) in units of G (Lemma 1): SGD/GD (1, 0), SVRG/SAGA (2, 1).
    pub fn bounds(self) -> (f64, f64) {
        match self {
            Estimator::Gd | Estimator::Sgd => (1.0, 0.0),
            Estimator::Svrg | Estimator::Saga => (2.0, 1.0),
        }
    }
    /// G_A²/4 + G_B² in units of G²: 1/4 for SGD/GD, 2 for SVRG/SAGA.
    pub fn noise_factor(self) -> f64 {
        let (a, b) = self.bounds();
        a * a / 4.0 + b * b
    }
    /// Whether the estimator has Lemma 3's full-batch B term (SVRG, SAGA).
    pub fn has_full_term(self) -> bool {
        matches!(self, Estimator::Svrg | Estimator::Saga)
    }
}

/// Default batch size of one silo with m records (digest §5.2 [code], Corollaries 1–3):
/// SGD b = min(⌊mεG·sqrt(sqrt((1+ω)/n)/2) / sqrt((1+ω)d ln(1/δ))⌋, m) (Cor. 1 with L = 1, as
/// the official code), SVRG ⌊m^{2/3}/4⌋ (Cor. 2), SAGA ⌊3m^{2/3}⌋ (Cor. 3), GD m; at least 1.
#[allow(clippy::too_many_arguments)]
pub(crate) fn default_batch(
    est: Estimator,
    m: usize,
    silos: usize,
    dim: usize,
    omega: f64,
    g: f64,
    eps: f64,
    delta: f64,
) -> usize {
    let mf = m as f64;
    let b = match est {
        Estimator::Gd => mf,
        Estimator::Sgd => {
            let beta = ((1.0 + omega) / silos as f64).sqrt() / 2.0;
            let den = ((1.0 + omega) * dim as f64 * (1.0 / delta).ln()).sqrt();
            (mf * eps * g * beta.sqrt() / den).floor()
        }
        Estimator::Svrg => (mf.powf(2.0 / 3.0) / 4.0).floor(),
        Estimator::Saga => (3.0 * mf.powf(2.0 / 3.0)).floor(),
    };
    (b as usize).clamp(1, m.max(1))
}

/// Theorem 2's closed form (Theorem 4's for direct compression):
/// σ_p = sqrt(c·(G_A²/4 + G_B²)·G²·T·ln(1/δ) / (m²ε²)), a standard deviation (the official
/// code's `perturbation_variance` holds this std; digest ambiguity 5).
pub(crate) fn closed_form_sigma(
    c: f64,
    factor: f64,
    g: f64,
    rounds: usize,
    m: usize,
    eps: f64,
    delta: f64,
) -> f64 {
    (c * factor * g * g * rounds as f64 * (1.0 / delta).ln() / ((m * m) as f64 * eps * eps)).sqrt()
}

/// The official code's constant for CDP-SGD and LDP-SGD: σ_p² = 8G²T ln(1/δ)/(m²ε²)
/// (Theorem 4's form with c·G²/4 = 8G², i.e. not the c = 48 rule; digest §1.2).
pub(crate) const CODE_DIRECT_FACTOR: f64 = 8.0;
/// The official code's c = 48 for SoteriaFL (σ² = 48·(G_A²/4+G_B²)·G²T ln(1/δ)/(m²ε²)).
pub(crate) const CODE_SHIFTED_CONSTANT: f64 = 48.0;

/// Q-DPSGD-1's noise in the official code (digest §3.5): sqrt(16T(2 ln(1/δ)/ε + 1)/(m²ε)).
pub(crate) fn qdpsgd_code_sigma(rounds: usize, m: usize, eps: f64, delta: f64) -> f64 {
    (16.0 * rounds as f64 * (2.0 * (1.0 / delta).ln() / eps + 1.0) / ((m * m) as f64 * eps)).sqrt()
}

/// One round's privacy event of a silo adding N(0, σ²I) to its estimator: SGD b of m
/// records by `sampling` (A only, sensitivity 2G/b); GD (B-like full mean, 2G/m, no
/// sampling); SVRG/SAGA the split of Lemma 3 (A: (2/3)σ², 4G/b, sampled; B: (1/3)σ², 2G/m).
/// `aggregate_clip`: the official code's clipping of the whole estimator to G, whose only
/// sound bound is sensitivity 2G per round without amplification.
pub(crate) fn round_event(
    est: Estimator,
    sigma: f64,
    g: f64,
    b: usize,
    m: usize,
    sampling: &Sampling,
    aggregate_clip: bool,
) -> PrivacyEvent {
    let gauss = |z: f64| PrivacyEvent::Gaussian {
        noise_multiplier: z,
    };
    if aggregate_clip {
        return gauss(sigma / (2.0 * g));
    }
    match est {
        Estimator::Gd => gauss(sigma / (2.0 * g / m as f64)),
        Estimator::Sgd => gauss(sigma / (2.0 * g / b as f64)).sampled(sampling.clone()),
        Estimator::Svrg | Estimator::Saga => {
            let (sa, sb) = split_sigma(sigma);
            PrivacyEvent::Composed(vec![
                gauss(sa / (4.0 * g / b as f64)).sampled(sampling.clone()),
                gauss(sb / (2.0 * g / m as f64)),
            ])
        }
    }
}

/// (σ_A, σ_B) = (σ·sqrt(2/3), σ/sqrt(3)): Lemma 3's split, σ_A² + σ_B² = σ².
pub(crate) fn split_sigma(sigma: f64) -> (f64, f64) {
    (sigma * (2.0f64 / 3.0).sqrt(), sigma / 3.0f64.sqrt())
}

/// The smallest σ dpfl's accountant certifies for `rounds` rounds of [`round_event`]
/// (replace-one): the sampled Gaussian's PLD/RDP calibration for SGD; for SVRG/SAGA the
/// tighter of RDP and the PLD over the composed event (the sampled part's PLD for the sampling
/// actually used, `accountant::sampled_pld`, composed with the full-batch Gaussian; RDP alone
/// where that PLD has no rule); RDP for GD and aggregate clipping.
#[allow(clippy::too_many_arguments)]
pub(crate) fn accountant_sigma(
    est: Estimator,
    g: f64,
    b: usize,
    m: usize,
    sampling: &Sampling,
    aggregate_clip: bool,
    rounds: usize,
    eps: Epsilon,
    delta: Delta,
) -> crate::Result<(f64, String)> {
    let t = rounds as u64;
    if !aggregate_clip && est == Estimator::Sgd {
        let (z, name) =
            calibrate_sampled_gaussian(sampling.clone(), t, Neighbouring::ReplaceOne, eps, delta)?;
        return Ok((z * 2.0 * g / b as f64, name.to_string()));
    }
    // Parametrise by σ = z·unit so that the search runs on multipliers of order 1.
    let unit = if aggregate_clip {
        2.0 * g
    } else if est == Estimator::Gd {
        2.0 * g / m as f64
    } else {
        4.0 * g / b as f64
    };
    let event = |z: f64| round_event(est, z * unit, g, b, m, sampling, aggregate_clip).repeated(t);
    if !aggregate_clip
        && est.has_full_term()
        && dpfl_privacy::accountant::sampled_pld::supported(sampling, Neighbouring::ReplaceOne)
    {
        let (z, name) = calibrate_rdp_then_pld(event, Neighbouring::ReplaceOne, eps, delta, "pld")?;
        return Ok((z * unit, name.to_string()));
    }
    let z = calibrate_noise_multiplier(
        event,
        AccountantKind::Rdp,
        Neighbouring::ReplaceOne,
        eps,
        delta,
    )?;
    Ok((z * unit, "rdp".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gamma_matches_the_formula_and_the_digest_values() {
        // ω = 0: sqrt(1/2); a9a ω = 124/6 − 1: sqrt(40.333/(2·20.667³)) = 0.04780.
        assert!((shift_step(0.0) - 0.5f64.sqrt()).abs() < 1e-15);
        let a9a = shift_step(124.0 / 6.0 - 1.0);
        assert!((a9a - 0.04780).abs() < 5e-6, "{a9a}");
        let mnist = shift_step(51675.0 / 2583.0 - 1.0);
        assert!((mnist - 0.04936).abs() < 5e-6, "{mnist}");
    }

    #[test]
    fn the_code_presets_reproduce_the_digest_table() {
        // a9a ε = 1, T = 25, m = 3256, G = 0.5, δ = 1e-3 (digest §5.2 table).
        let s = |c: f64, f: f64, t, e| closed_form_sigma(c, f, 0.5, t, 3256, e, 1e-3);
        let close = |a: f64, b: f64| (a - b).abs() < 5e-4 * b;
        assert!(close(s(CODE_DIRECT_FACTOR, 1.0, 25, 1.0), 5.708e-3));
        assert!(close(
            s(48.0, Estimator::Sgd.noise_factor(), 25, 1.0),
            6.991e-3
        ));
        assert!(close(
            s(48.0, Estimator::Svrg.noise_factor(), 25, 1.0),
            1.977e-2
        ));
        assert!(close(
            s(48.0, Estimator::Svrg.noise_factor(), 150, 10.0),
            4.843e-3
        ));
        // MNIST ε = 16, T = 1000, m = 6000, G = 1.
        let mn = closed_form_sigma(48.0, 2.0, 1.0, 1000, 6000, 16.0, 1e-3);
        assert!(close(mn, 8.483e-3), "{mn}");
    }

    #[test]
    fn default_batches_match_the_official_code() {
        let omega = 124.0 / 6.0 - 1.0;
        let b = |e, eps| default_batch(e, 3256, 10, 124, omega, 0.5, eps, 1e-3);
        assert_eq!(b(Estimator::Sgd, 1.0), 10);
        assert_eq!(b(Estimator::Sgd, 5.0), 51);
        assert_eq!(b(Estimator::Sgd, 10.0), 103);
        assert_eq!(b(Estimator::Svrg, 1.0), 54);
        assert_eq!(b(Estimator::Gd, 1.0), 3256);
        // ⌊3·3256^{2/3}⌋ = ⌊3·219.71⌋ = 659.
        assert_eq!(b(Estimator::Saga, 1.0), 659);
        assert_eq!(
            default_batch(Estimator::Svrg, 6000, 10, 51675, 19.0, 1.0, 1.0, 1e-3),
            82
        );
    }

    #[test]
    fn svrg_events_split_the_noise_as_lemma_3() {
        // σ = 0.3, G = 0.5, b = 10, m = 100: A multiplier 0.3·sqrt(2/3)/(2/10) = 1.2247,
        // B multiplier 0.3/sqrt(3)/(1/100) = 17.3205.
        let s = Sampling::Poisson { rate: 0.1 };
        let PrivacyEvent::Composed(parts) =
            round_event(Estimator::Svrg, 0.3, 0.5, 10, 100, &s, false)
        else {
            panic!("composed")
        };
        let PrivacyEvent::Sampled { event, .. } = &parts[0] else {
            panic!()
        };
        let PrivacyEvent::Gaussian {
            noise_multiplier: za,
        } = **event
        else {
            panic!()
        };
        let PrivacyEvent::Gaussian {
            noise_multiplier: zb,
        } = parts[1]
        else {
            panic!()
        };
        assert!((za - 1.224_744_871).abs() < 1e-8, "{za}");
        assert!((zb - 17.320_508_08).abs() < 1e-7, "{zb}");
        assert_eq!(
            round_event(Estimator::Sgd, 0.3, 0.5, 10, 100, &s, true),
            PrivacyEvent::Gaussian {
                noise_multiplier: 0.3
            }
        );
    }

    #[test]
    fn accountant_sigma_meets_the_target_and_orders_sensibly() {
        let eps = Epsilon::new(1.0).unwrap();
        let delta = Delta::new(1e-3).unwrap();
        let s = Sampling::WithReplacement {
            population: 1000,
            draws: 10,
        };
        let (sgd, _) =
            accountant_sigma(Estimator::Sgd, 0.5, 10, 1000, &s, false, 25, eps, delta).unwrap();
        let (svrg, _) =
            accountant_sigma(Estimator::Svrg, 0.5, 10, 1000, &s, false, 25, eps, delta).unwrap();
        let (agg, _) =
            accountant_sigma(Estimator::Sgd, 0.5, 10, 1000, &s, true, 25, eps, delta).unwrap();
        assert!(sgd > 0.0 && svrg > sgd && agg > svrg, "{sgd} {svrg} {agg}");
        // Certified by the PLD on the calibration's grid (the rule the silo ledger falls back
        // to when RDP alone would refuse).
        let e = dpfl_privacy::accountant::pld::PldAccountant::with_discretization(
            Neighbouring::ReplaceOne,
            dpfl_privacy::calibration::CALIBRATION_PLD_DISCRETIZATION,
        )
        .unwrap()
        .epsilon(
            &round_event(Estimator::Svrg, svrg, 0.5, 10, 1000, &s, false).repeated(25),
            delta,
        )
        .unwrap();
        assert!(e <= 1.0 + 1e-9, "{e}");
    }

    #[test]
    fn svrg_and_saga_calibrate_with_the_pld_below_rdp_and_never_under_report() {
        // a9a's SVRG silo at ε = 1 (digest §5.2): G = 0.5, m = 3256, b = 54 draws with
        // replacement, T = 25, δ = 1e−3.
        let (g, m, b, t) = (0.5, 3256usize, 54usize, 25usize);
        let eps = Epsilon::new(1.0).unwrap();
        let delta = Delta::new(1e-3).unwrap();
        let s = Sampling::WithReplacement {
            population: m as u64,
            draws: b as u64,
        };
        let (sigma, name) =
            accountant_sigma(Estimator::Svrg, g, b, m, &s, false, t, eps, delta).unwrap();
        assert_eq!(name, "pld");
        let event = round_event(Estimator::Svrg, sigma, g, b, m, &s, false).repeated(t as u64);
        let acc = |k: AccountantKind| k.epsilon(Neighbouring::ReplaceOne, &event, delta).unwrap();
        let (pld, rdp) = (acc(AccountantKind::Pld), acc(AccountantKind::Rdp));
        // The PLD certifies the target at its σ (default grid, finer than the calibration's),
        // and at the same σ it is below RDP, which alone would need more noise.
        assert!(pld <= 1.0 + 1e-9, "pld {pld}");
        assert!(pld < rdp, "pld {pld} rdp {rdp}");
        let z_rdp = calibrate_noise_multiplier(
            |z| round_event(Estimator::Svrg, z, g, b, m, &s, false).repeated(t as u64),
            AccountantKind::Rdp,
            Neighbouring::ReplaceOne,
            eps,
            delta,
        )
        .unwrap();
        assert!(sigma < z_rdp, "{sigma} vs rdp's {z_rdp}");
        // Hand-checkable sandwich at this σ: z_A = σ√(2/3)/(4G/b), z_B = (σ/√3)/(2G/m).
        // Lower bound: the full-batch part alone, T Gaussians = one of z_B/√T. Upper bound:
        // no amplification, T rounds of the pair = one Gaussian of (T(1/z_A² + 1/z_B²))^{−½}.
        let (sa, sb) = split_sigma(sigma);
        let (za, zb) = (sa / (4.0 * g / b as f64), sb / (2.0 * g / m as f64));
        let tf = t as f64;
        let lower = dpfl_privacy::calibration::gaussian_epsilon(zb / tf.sqrt(), delta).unwrap();
        let upper = dpfl_privacy::calibration::gaussian_epsilon(
            1.0 / (tf * (1.0 / (za * za) + 1.0 / (zb * zb))).sqrt(),
            delta,
        )
        .unwrap();
        assert!(lower < pld && pld < upper, "{lower} < {pld} < {upper}");
        // SAGA has SVRG's event (Lemma 3), so the same σ; Poisson is accounted too.
        let (saga, _) =
            accountant_sigma(Estimator::Saga, g, b, m, &s, false, t, eps, delta).unwrap();
        assert_eq!(saga, sigma);
        // Aggregate clipping has no sampled part: RDP, as before.
        let (_, agg) = accountant_sigma(Estimator::Svrg, g, b, m, &s, true, t, eps, delta).unwrap();
        assert_eq!(agg, "rdp");
    }
}

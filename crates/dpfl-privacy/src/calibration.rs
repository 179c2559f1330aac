//! Noise calibration.
//!
//! * [`calibrate_noise_multiplier`]: the smallest noise multiplier whose accounted ε at δ
//!   meets a target, by bracketing and bisection over any accountant (as
//!   `dp_accounting.mechanism_calibration`); the returned value always meets the target.
//! * [`analytic_gaussian_noise_multiplier`]: the analytic Gaussian mechanism (Balle & Wang
//!   2018, Thm. 8 and Alg. 1) for one release, exact up to the bisection tolerance (rounded up).
//! * Closed-form noise calibrations of the ISRL-DP paper (Lowy & Razaviyayn, ICLR 2023;
//!   digest `shared/spec/isrl-dp-fl.md` §2 and §5.1 item 6). Each function cites its theorem,
//!   checks the theorem's validity range and refuses parameters outside it.
//!
//! All formulas use replace-one adjacency, so a minibatch mean of L-Lipschitz gradients has
//! L2 sensitivity 2L/K (per record occurrence).
//!
//! Decisions (digest §5.2):
//! * The experiments' formula (`isrl_experiment_sigma`) rests on Abadi et al. (2016) Thm 1,
//!   whose constants are unstated. We keep it because the paper's figures use it, but every
//!   run also reports the accountant's ε for the noise actually used, so a user sees whether
//!   the promise holds.
//! * For the experiments' rule we require K ≥ ⌊n√ε/(2√R)⌋: the Abadi condition ε < c₁q²T
//!   holds with c₁ = 4 at that K and only gets easier with larger K.

use crate::accountant::AccountantKind;
// The analytic Gaussian's exact curve lives below the accountants (which use it) and is
// re-exported here, so that calibration depends on accountant/ and never the reverse.
pub use crate::accountant::gaussian::{gaussian_delta, gaussian_epsilon};
use crate::error::{PrivacyError, Result};
use crate::event::{Neighbouring, PrivacyEvent};
use crate::params::{Delta, Epsilon, positive};

mod estimate;
mod search;
use estimate::coarse_pld_guess;
use search::Search;

/// Relative width at which the calibration bisections stop.
pub const CALIBRATION_TOLERANCE: f64 = 1e-6;

/// The smallest noise multiplier z (to a relative [`CALIBRATION_TOLERANCE`], rounded up) such
/// that `accountant` reports ε ≤ `target` at `delta` for `make_event(z)`.
///
/// ε is non-increasing in z for every event family dpfl builds (more noise is a
/// post-processing of less: add independent noise). The search brackets z in
/// [1e-3, 1e4] by doubling and then bisects, always returning the upper end, whose ε was
/// verified to meet the target. A numerical failure at some z counts as "target not met";
/// other errors (an unsupported event) are returned.
pub fn calibrate_noise_multiplier(
    make_event: impl Fn(f64) -> PrivacyEvent,
    accountant: AccountantKind,
    neighbouring: Neighbouring,
    target: Epsilon,
    delta: Delta,
) -> Result<f64> {
    calibrate_noise_multiplier_with_progress(
        make_event,
        accountant,
        neighbouring,
        target,
        delta,
        |_, _| {},
    )
}

/// [`calibrate_noise_multiplier`], calling `progress(z, ε)` after every accountant
/// evaluation (ε = ∞ for a numerical failure) so that a caller can show a slow calibration
/// moving.
///
/// For the PLD accountant the bracket starts at the RDP accountant's answer (milliseconds)
/// instead of z = 1: small z are the PLD's most expensive evaluations (wide loss ranges over
/// many steps), and the PLD's z is within a small factor of RDP's.
pub fn calibrate_noise_multiplier_with_progress(
    make_event: impl Fn(f64) -> PrivacyEvent,
    accountant: AccountantKind,
    neighbouring: Neighbouring,
    target: Epsilon,
    delta: Delta,
    mut progress: impl FnMut(f64, f64),
) -> Result<f64> {
    calibrate_core(
        &make_event,
        accountant,
        neighbouring,
        target,
        delta,
        &mut progress,
    )
}

fn calibrate_core(
    make_event: &dyn Fn(f64) -> PrivacyEvent,
    accountant: AccountantKind,
    neighbouring: Neighbouring,
    target: Epsilon,
    delta: Delta,
    progress: &mut dyn FnMut(f64, f64),
) -> Result<f64> {
    if accountant == AccountantKind::Pld {
        // Bracket from RDP's answer (see above); RDP may not support the event.
        let rdp = calibrate_core(
            make_event,
            AccountantKind::Rdp,
            neighbouring,
            target,
            delta,
            &mut |_, _| {},
        );
        if let Ok(z) = rdp {
            // Where the PLD on the default grid probably crosses the target, from cheaper
            // grids (issue 30), and the slope there: the fine search's first two points. Only
            // a hint: the fine grid's own evaluations decide.
            let start = match coarse_pld_guess(make_event, neighbouring, target, delta, z) {
                (Some(r), slope) => Start::Crossing(z, r, slope),
                (None, slope) => Start::Point(z, z, slope),
            };
            return bisect(
                make_event,
                accountant,
                neighbouring,
                target,
                delta,
                progress,
                start,
            );
        }
    }
    bisect(
        make_event,
        accountant,
        neighbouring,
        target,
        delta,
        progress,
        Start::Point(1.0, 1.0, None),
    )
}

/// Where a calibration search starts: (bracket from, first point to evaluate, slope
/// d log ε / d log z if known), or (bracket from, estimated crossing, slope).
#[derive(Debug, Clone, Copy)]
enum Start {
    Point(f64, f64, Option<f64>),
    Crossing(f64, f64, Option<f64>),
}

/// The calibration search: bracket from `start.0` by doubling, then halve and bisect to
/// [`CALIBRATION_TOLERANCE`] ([`bisection`]), with guesses from `start.1` (and the slope
/// `start.2`, if known) so that most of its points are decided without an evaluation
/// ([`Search`]; the answer is the same).
fn bisect(
    make_event: &dyn Fn(f64) -> PrivacyEvent,
    accountant: AccountantKind,
    neighbouring: Neighbouring,
    target: Epsilon,
    delta: Delta,
    progress: &mut dyn FnMut(f64, f64),
    start: Start,
) -> Result<f64> {
    let account = |event: &PrivacyEvent| -> Result<f64> {
        match accountant.epsilon(neighbouring, event, delta) {
            Ok(e) => Ok(e),
            Err(PrivacyError::Numerical { .. }) => Ok(f64::INFINITY),
            Err(e) => Err(e),
        }
    };
    // Points asked together (two or three: a bisection's answer and its last failing point)
    // are accounted on threads of their own; each answer is computed alone, so the same bits.
    let mut eval = |zs: &[f64]| -> Result<Vec<f64>> {
        let events: Vec<PrivacyEvent> = zs.iter().map(|&z| make_event(z)).collect();
        let es = crate::accountant::par::map_each(&events, &account)
            .into_iter()
            .collect::<Result<Vec<f64>>>()?;
        for (&z, &e) in zs.iter().zip(&es) {
            progress(z, e);
        }
        Ok(es)
    };
    let mut s = Search::batched(&mut eval, target.get());
    search_smallest(&mut s, start, CALIBRATION_TOLERANCE)?.ok_or_else(|| PrivacyError::Numerical {
        context: "noise calibration",
        reason: format!(
            "no noise multiplier up to {Z_MAX} reaches epsilon {} at delta {}",
            target.get(),
            delta.get()
        ),
    })
}

/// [`bisection`] from `start.0` to `tolerance`, its points decided by `s` after guesses from
/// `start.1` with slope `start.2`; the answer is evaluated before it is returned, and if it
/// does not meet the target the bisection runs again evaluating every point (see
/// [`search`]). `None` if no z up to [`Z_MAX`] meets the target.
fn search_smallest(s: &mut Search<'_>, start: Start, tolerance: f64) -> Result<Option<f64>> {
    let from = match start {
        Start::Point(from, first, slope) => {
            s.guess((from, first, slope), tolerance)?;
            from
        }
        Start::Crossing(from, r, slope) => {
            s.guess_crossing(from, r, slope, tolerance)?;
            from
        }
    };
    if let Some(z) = bisection(&mut |z| s.decide(z), from, tolerance)?
        && s.verify(z)?
    {
        return Ok(Some(z));
    }
    bisection(&mut |z| s.meets(z), from, tolerance)
}

/// [`bracket`] from `start`, then [`shrink`] to `tolerance`.
fn bisection(
    meets: &mut dyn FnMut(f64) -> Result<bool>,
    start: f64,
    tolerance: f64,
) -> Result<Option<f64>> {
    Ok(bisection_pair(meets, start, tolerance)?.map(|(_, hi)| hi))
}

/// [`bisection`] with the last failing point ([`shrink`]).
fn bisection_pair(
    meets: &mut dyn FnMut(f64) -> Result<bool>,
    start: f64,
    tolerance: f64,
) -> Result<Option<(Option<f64>, f64)>> {
    match bracket(meets, start)? {
        Some(hi) => shrink(meets, hi, tolerance).map(Some),
        None => Ok(None),
    }
}

/// Noise multipliers searched: below `Z_MIN` the smallest one found is returned; above
/// `Z_MAX` no noise suffices.
const Z_MIN: f64 = 1e-3;
const Z_MAX: f64 = 1e4;

/// The first z = start·2^j that `meets`, or `None` past [`Z_MAX`].
fn bracket(meets: &mut dyn FnMut(f64) -> Result<bool>, start: f64) -> Result<Option<f64>> {
    let mut hi = start;
    while !meets(hi)? {
        hi *= 2.0;
        if hi > Z_MAX {
            return Ok(None);
        }
    }
    Ok(Some(hi))
}

/// From `hi`, which meets the target, the smallest z that does (`meets` is monotone in z):
/// halving while it meets (stopping under [`Z_MIN`]), then bisection to a relative
/// `tolerance`, rounded up.
///
/// Returns the answer with the last point found not to meet the target (`None` when the
/// halving stopped under [`Z_MIN`]): every point visited is at most that one (and fails) or
/// at least the answer (and meets).
fn shrink(
    meets: &mut dyn FnMut(f64) -> Result<bool>,
    mut hi: f64,
    tolerance: f64,
) -> Result<(Option<f64>, f64)> {
    let mut lo = hi / 2.0;
    while meets(lo)? {
        hi = lo;
        lo /= 2.0;
        if lo < Z_MIN {
            return Ok((None, hi));
        }
    }
    while hi - lo > tolerance * hi {
        let mid = 0.5 * (lo + hi);
        if meets(mid)? {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok((Some(lo), hi))
}

/// Grid width of the PLD used by [`calibrate_sampled_gaussian`]: 10x coarser than the
/// default, still pessimistic (connect-the-dots is sound at any width) and within ~1e-4 of the
/// fine grid's ε at the demo's shape, at a tenth of the cost per evaluation.
pub const CALIBRATION_PLD_DISCRETIZATION: f64 = 1e-3;

/// The smallest noise multiplier z (relative tolerance 1e-4, rounded up) for which `rounds`
/// rounds of the Gaussian sampled by `sampling` meet (`target`, `delta`) under the tightest
/// sound accountant dpfl has for that sampling, with that accountant's name.
///
/// Under replace-one, with/without replacement and Poisson sampling, both the RDP accountant
/// and the sampled PLD of [`crate::accountant::sampled_pld`] (Balle, Barthe & Gaboardi 2018
/// profile) are sound upper bounds; the smaller certified z of the two is returned (the PLD's
/// except in corner cases). Other shapes use RDP alone.
pub fn calibrate_sampled_gaussian(
    sampling: crate::event::Sampling,
    rounds: u64,
    neighbouring: Neighbouring,
    target: Epsilon,
    delta: Delta,
) -> Result<(f64, &'static str)> {
    let event = |z: f64| {
        PrivacyEvent::Gaussian {
            noise_multiplier: z,
        }
        .sampled(sampling.clone())
        .repeated(rounds)
    };
    if !crate::accountant::sampled_pld::supported(&sampling, neighbouring) {
        let z =
            calibrate_noise_multiplier(event, AccountantKind::Rdp, neighbouring, target, delta)?;
        return Ok((z, "rdp"));
    }
    calibrate_rdp_then_pld(
        event,
        neighbouring,
        target,
        delta,
        "pld (sampled, Balle-Barthe-Gaboardi profile)",
    )
}

/// The smallest noise multiplier z (relative tolerance 1e-4, rounded up) for which
/// `make_event(z)` meets (`target`, `delta`) under the tighter of the RDP accountant and the
/// PLD accountant on the grid [`CALIBRATION_PLD_DISCRETIZATION`], with the name of the one
/// that certified it (`pld_name` for the PLD). Both are sound upper bounds, so either z is
/// certified; the RDP answer is found first and the PLD bisects below it (the PLD is never
/// looser in practice). A PLD that cannot evaluate the event (unsupported, or a numerical
/// failure) leaves the RDP answer. An event that RDP does not account (Poisson sampling under
/// replace-one: dpfl's RDP has only the add/remove curve) is calibrated by the PLD alone,
/// doubling z from 1 until it meets the target, then bisecting; if neither accountant can,
/// RDP's error is returned.
pub fn calibrate_rdp_then_pld(
    make_event: impl Fn(f64) -> PrivacyEvent,
    neighbouring: Neighbouring,
    target: Epsilon,
    delta: Delta,
    pld_name: &'static str,
) -> Result<(f64, &'static str)> {
    let rdp = calibrate_noise_multiplier(
        &make_event,
        AccountantKind::Rdp,
        neighbouring,
        target,
        delta,
    );
    let pld = crate::accountant::pld::PldAccountant::with_discretization(
        neighbouring,
        CALIBRATION_PLD_DISCRETIZATION,
    )?;
    let mut eval = |z: f64| -> Result<f64> {
        match pld.epsilon(&make_event(z), delta) {
            Ok(e) => Ok(e),
            Err(PrivacyError::Numerical { .. } | PrivacyError::Unsupported { .. }) => {
                Ok(f64::INFINITY)
            }
            Err(e) => Err(e),
        }
    };
    let mut s = Search::new(&mut eval, target.get());
    let start = match rdp {
        Ok(z_rdp) if !s.meets(z_rdp)? => return Ok((z_rdp, "rdp")),
        Ok(z_rdp) => z_rdp,
        Err(PrivacyError::Unsupported { .. }) => 1.0,
        Err(e) => return Err(e),
    };
    // From RDP's z (which meets the target) the bracket is that z itself and the search
    // halves and bisects below it; without RDP it doubles from 1 first.
    match search_smallest(&mut s, Start::Point(start, start, None), 1e-4)? {
        Some(z) => Ok((z, pld_name)),
        None => Err(rdp.err().unwrap_or_else(|| PrivacyError::Numerical {
            context: "noise calibration",
            reason: "no noise multiplier reaches the target".into(),
        })),
    }
}

/// The analytic Gaussian mechanism (Balle & Wang 2018, Alg. 1): the smallest noise
/// multiplier σ/Δ₂ for which one Gaussian release is (ε, δ)-DP, by bisection on the exact
/// δ(ε) of [`gaussian_delta`] (decreasing in z), rounded up.
pub fn analytic_gaussian_noise_multiplier(eps: Epsilon, delta: Delta) -> Result<f64> {
    let (e, d) = (eps.get(), delta.get());
    let mut hi = 1.0;
    while gaussian_delta(hi, e)? > d {
        hi *= 2.0;
        if hi > 1e8 {
            return Err(PrivacyError::Numerical {
                context: "analytic Gaussian calibration",
                reason: "no noise multiplier up to 1e8 suffices".into(),
            });
        }
    }
    let mut lo = 0.0;
    while hi - lo > 1e-12 * hi {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if gaussian_delta(mid, e)? <= d {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Ok(hi)
}

fn check_counts(n: usize, r: usize) -> Result<()> {
    if n == 0 {
        return Err(PrivacyError::invalid(
            "n",
            0.0,
            "silo must hold at least one record",
        ));
    }
    if r == 0 {
        return Err(PrivacyError::invalid("rounds", 0.0, "must be at least 1"));
    }
    Ok(())
}

/// Theory noise of Noisy ISRL-DP MB-SGD (Algorithm 2), Thm 2.1 / D.1 (proof of Thm D.1):
///
/// σ² = 256 L² R ln(2.5R/δ₀) ln(2/δ₀) / (n² ε₀²),
///
/// valid for ε₀ ≤ 2 ln(2/δ₀) and K ≥ ε₀ n / (4 √(2R ln(2/δ₀))) (see [`isrl_theory_min_k`]).
/// Returns σ (the standard deviation, not the variance).
pub fn isrl_theory_sigma(
    l: f64,
    r: usize,
    n: usize,
    k: usize,
    eps: Epsilon,
    delta: Delta,
) -> Result<f64> {
    const F: &str = "ISRL-DP theory noise (Lowy & Razaviyayn Thm D.1)";
    positive("L", l)?;
    check_counts(n, r)?;
    let (e, d) = (eps.get(), delta.get());
    if e > 2.0 * (2.0 / d).ln() {
        return Err(PrivacyError::OutsideValidity {
            formula: F,
            reason: format!(
                "needs epsilon <= 2 ln(2/delta) = {:.4}, got {e}",
                2.0 * (2.0 / d).ln()
            ),
        });
    }
    let k_min = isrl_theory_min_k(n, r, eps, delta);
    if (k as f64) < k_min {
        return Err(PrivacyError::OutsideValidity {
            formula: F,
            reason: format!(
                "needs K >= eps n / (4 sqrt(2 R ln(2/delta))) = {k_min:.3} so that the subsampled per-round epsilon stays <= 1; got K = {k}"
            ),
        });
    }
    if k > n {
        return Err(PrivacyError::invalid(
            "K",
            k as f64,
            format!("exceeds n = {n}"),
        ));
    }
    let rf = r as f64;
    let nf = n as f64;
    let var = 256.0 * l * l * rf * (2.5 * rf / d).ln() * (2.0 / d).ln() / (nf * nf * e * e);
    Ok(var.sqrt())
}

/// The smallest K the theory noise allows (Thm D.1): ε₀ n / (4 √(2R ln(2/δ₀))).
pub fn isrl_theory_min_k(n: usize, r: usize, eps: Epsilon, delta: Delta) -> f64 {
    eps.get() * n as f64 / (4.0 * (2.0 * r as f64 * (2.0 / delta.get()).ln()).sqrt())
}

/// The experiments' noise (Lowy & Razaviyayn App. I.3, "Choice of σ² and K"):
///
/// σ² = 8 L² R ln(1/δ) / (n² ε²), to be used with K = n√ε / (2√R) ([`isrl_experiment_k`]).
///
/// Refuses K below ⌊n√ε/(2√R)⌋ (the rule's premise) and K > n.
pub fn isrl_experiment_sigma(
    l: f64,
    r: usize,
    n: usize,
    k: usize,
    eps: Epsilon,
    delta: Delta,
) -> Result<f64> {
    const F: &str = "ISRL-DP experiment noise (Lowy & Razaviyayn App. I)";
    positive("L", l)?;
    check_counts(n, r)?;
    let k_rule = isrl_experiment_k_real(n, r, eps).floor().max(1.0);
    if (k as f64) < k_rule {
        return Err(PrivacyError::OutsideValidity {
            formula: F,
            reason: format!("needs K >= floor(n sqrt(eps) / (2 sqrt(R))) = {k_rule}; got K = {k}"),
        });
    }
    if k > n {
        return Err(PrivacyError::invalid(
            "K",
            k as f64,
            format!("exceeds n = {n}"),
        ));
    }
    let (e, d) = (eps.get(), delta.get());
    let nf = n as f64;
    Ok((8.0 * l * l * r as f64 * (1.0 / d).ln() / (nf * nf * e * e)).sqrt())
}

fn isrl_experiment_k_real(n: usize, r: usize, eps: Epsilon) -> f64 {
    n as f64 * eps.get().sqrt() / (2.0 * (r as f64).sqrt())
}

/// The experiments' batch size K = ⌊n√ε/(2√R)⌋, clamped to [1, n] (App. I.3).
pub fn isrl_experiment_k(n: usize, r: usize, eps: Epsilon) -> usize {
    (isrl_experiment_k_real(n, r, eps).floor() as usize).clamp(1, n.max(1))
}

/// Noise of the ISRL-DP Local SGD baseline (App. I, eq. in "ISRL-DP Local SGD"): each of the
/// K local single-sample steps adds N(0, σ²) with
///
/// σ² = 8 L² R K ln(1/δ) / (n² ε²).
pub fn local_sgd_sigma(
    l: f64,
    r: usize,
    k: usize,
    n: usize,
    eps: Epsilon,
    delta: Delta,
) -> Result<f64> {
    positive("L", l)?;
    check_counts(n, r)?;
    if k == 0 || k > n {
        return Err(PrivacyError::invalid(
            "K",
            k as f64,
            format!("must lie in [1, n = {n}]"),
        ));
    }
    let (e, d) = (eps.get(), delta.get());
    let nf = n as f64;
    Ok((8.0 * l * l * r as f64 * k as f64 * (1.0 / d).ln() / (nf * nf * e * e)).sqrt())
}

/// One-pass accelerated noise (Thm 3.1 / E.1, Algorithm 1 one-pass version):
///
/// σ² = 32 L² ln(1.25/δ₀) / (ε₀² K²),
///
/// the Gaussian mechanism with constant 8Δ² for Δ = 2L/K, valid for ε₀ ≤ 8 ln(1/δ₀). Each
/// disjoint batch gets the whole (ε₀, δ₀); parallel composition covers the run.
pub fn one_pass_sigma(l: f64, k: usize, eps: Epsilon, delta: Delta) -> Result<f64> {
    positive("L", l)?;
    if k == 0 {
        return Err(PrivacyError::invalid("K", 0.0, "must be at least 1"));
    }
    let (e, d) = (eps.get(), delta.get());
    if e > 8.0 * (1.0 / d).ln() {
        return Err(PrivacyError::OutsideValidity {
            formula: "one-pass accelerated noise (Lowy & Razaviyayn Thm E.1)",
            reason: format!(
                "needs epsilon <= 8 ln(1/delta) = {:.4}, got {e}",
                8.0 * (1.0 / d).ln()
            ),
        });
    }
    let kf = k as f64;
    Ok((32.0 * l * l * (1.25 / d).ln() / (e * e * kf * kf)).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn demo_calibration_is_tight_and_certified() {
        // The demo: R = 100 rounds of K = 30 of n = 217 with replacement, (1, 1/n²).
        // Issue 11: the BBG profile certifies ε = 1 at σ ≈ 0.755 (z = σK/(2L) = 7.5σ ≈ 5.66)
        // where RDP needs σ = 1.537 (z ≈ 11.53).
        let d = Delta::new(1.0 / (217.0 * 217.0)).unwrap();
        let s = crate::event::Sampling::WithReplacement {
            population: 217,
            draws: 30,
        };
        let (z, acc) = calibrate_sampled_gaussian(
            s.clone(),
            100,
            Neighbouring::ReplaceOne,
            Epsilon::new(1.0).unwrap(),
            d,
        )
        .unwrap();
        assert!(acc.starts_with("pld"), "{acc}");
        assert!(z > 5.5 && z < 7.5 * 0.76, "z = {z}");
        // Certified by the (default-grid) PLD accountant too.
        let e = PrivacyEvent::Gaussian {
            noise_multiplier: z,
        }
        .sampled(s)
        .repeated(100);
        let eps = AccountantKind::Pld
            .epsilon(Neighbouring::ReplaceOne, &e, d)
            .unwrap();
        assert!(eps <= 1.0, "{eps}");
    }

    #[test]
    fn poisson_under_replace_one_is_calibrated_by_the_pld_alone() {
        // dpfl's RDP has no replace-one Poisson curve (it refuses the event); the calibration
        // used to fail with that refusal. Now the sampled PLD calibrates it on its own.
        let d = Delta::new(1e-5).unwrap();
        let target = Epsilon::new(2.0).unwrap();
        let s = crate::event::Sampling::Poisson { rate: 0.01 };
        let event = |z: f64| {
            PrivacyEvent::Gaussian {
                noise_multiplier: z,
            }
            .sampled(s.clone())
            .repeated(1000)
        };
        assert!(matches!(
            AccountantKind::Rdp.epsilon(Neighbouring::ReplaceOne, &event(1.0), d),
            Err(PrivacyError::Unsupported { .. })
        ));
        let (z, acc) =
            calibrate_sampled_gaussian(s.clone(), 1000, Neighbouring::ReplaceOne, target, d)
                .unwrap();
        assert!(acc.starts_with("pld"), "{acc}");
        // Certified by the default-grid PLD, and tight (within 10% of the target).
        let eps = AccountantKind::Pld
            .epsilon(Neighbouring::ReplaceOne, &event(z), d)
            .unwrap();
        assert!((1.8..=2.0).contains(&eps), "z = {z}: eps = {eps}");
        // Replace-one is the ball pair (issue 27): shifts ±Δ/2 with Δ its sensitivity, the
        // ball's diameter. Replacing a record is never easier to hide than removing one of
        // norm Δ/2, whose add/remove multiplier is σ/(Δ/2) = 2z; and the ball pair is tighter
        // than the generic one, which needed z ≥ the add/remove z.
        let (z_ar, _) =
            calibrate_sampled_gaussian(s, 1000, Neighbouring::AddRemove, target, d).unwrap();
        assert!(
            2.0 * z >= z_ar && z < z_ar,
            "replace-one z = {z}, add/remove z = {z_ar}"
        );
    }

    /// ε of 1000 Poisson(0.01) steps under RDP, counting evaluations.
    fn counted(n: &std::cell::Cell<u32>) -> impl FnMut(f64) -> Result<f64> + '_ {
        let acc = crate::accountant::rdp::RdpAccountant::new(Neighbouring::AddRemove);
        let d = Delta::new(1e-5).unwrap();
        move |z| {
            n.set(n.get() + 1);
            acc.epsilon(
                &PrivacyEvent::Gaussian {
                    noise_multiplier: z,
                }
                .sampled(crate::event::Sampling::Poisson { rate: 0.01 })
                .repeated(1000),
                d,
            )
        }
    }

    #[test]
    fn guided_search_returns_the_plain_bisections_answer_in_fewer_evaluations() {
        // The plain bisection evaluates every point; the guided one (issue 30) decides most
        // of them from a few guesses. Same answer to the bit.
        let (n_plain, n_guided) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
        let mut plain_eval = counted(&n_plain);
        let plain = bisection(
            &mut |z| Ok(plain_eval(z)? <= 2.0),
            1.0,
            CALIBRATION_TOLERANCE,
        )
        .unwrap()
        .unwrap();
        let mut guided_eval = counted(&n_guided);
        let mut s = Search::new(&mut guided_eval, 2.0);
        let guided = search_smallest(&mut s, Start::Point(1.0, 1.0, None), CALIBRATION_TOLERANCE)
            .unwrap()
            .unwrap();
        assert_eq!(plain.to_bits(), guided.to_bits(), "{plain} vs {guided}");
        assert!(n_plain.get() >= 20, "{}", n_plain.get());
        assert!(n_guided.get() <= 8, "{}", n_guided.get());
    }

    #[test]
    fn a_search_from_a_crossing_estimate_returns_the_plain_answer() {
        // From the plain bisection's own answer as the estimate the two deciding points are
        // asked together and nothing more is evaluated; from wrong estimates (far off, or
        // just across the answer) the search needs more points but returns the same z, and
        // still fewer than the plain bisection's (asserted ≥ 20 above).
        let n_plain = std::cell::Cell::new(0);
        let mut plain_eval = counted(&n_plain);
        let plain = bisection(
            &mut |z| Ok(plain_eval(z)? <= 2.0),
            8.0,
            CALIBRATION_TOLERANCE,
        )
        .unwrap()
        .unwrap();
        assert!(n_plain.get() >= 20, "{}", n_plain.get());
        for (r, most) in [
            (plain, 3),
            (plain * (1.0 - 1e-9), 4),
            (plain * 1.5, 14),
            (0.1, 14),
        ] {
            let n = std::cell::Cell::new(0);
            let mut one = counted(&n);
            let batches = std::cell::Cell::new(0);
            let mut many = |zs: &[f64]| -> Result<Vec<f64>> {
                batches.set(batches.get() + 1);
                zs.iter().map(|&z| one(z)).collect()
            };
            let mut s = Search::batched(&mut many, 2.0);
            let got = search_smallest(
                &mut s,
                Start::Crossing(8.0, r, Some(-1.0)),
                CALIBRATION_TOLERANCE,
            )
            .unwrap()
            .unwrap();
            assert_eq!(
                got.to_bits(),
                plain.to_bits(),
                "estimate {r}: {got} vs {plain}"
            );
            assert!(n.get() <= most, "estimate {r}: {} evaluations", n.get());
            if r == plain {
                // The answer and its failing neighbour (and, when the estimate's error
                // straddles a step, the point between), in one batch: nothing after it.
                assert_eq!(batches.get(), 1, "{} evaluations", n.get());
            }
        }
    }

    #[test]
    fn the_fine_crossing_estimate_of_the_demo_is_within_a_bisection_step() {
        // The demo's calibration (K = 30 of 217 with replacement, 100 rounds, δ = 1/217²,
        // ε = 1): the answer, z = 5.656636319530662, is where it was before the estimate
        // (README, BENCHMARKS.md), and the grid-corrected estimate lies within 2e-6 of it.
        let sampling = crate::event::Sampling::WithReplacement {
            population: 217,
            draws: 30,
        };
        let event = |z: f64| {
            PrivacyEvent::Gaussian {
                noise_multiplier: z,
            }
            .sampled(sampling.clone())
            .repeated(100)
        };
        let (e, d) = ed(1.0, 2.123638216993353e-05);
        let nb = Neighbouring::ReplaceOne;
        let z_rdp = calibrate_noise_multiplier(event, AccountantKind::Rdp, nb, e, d).unwrap();
        let (r, slope) = coarse_pld_guess(&event, nb, e, d, z_rdp);
        let r = r.unwrap();
        assert!(slope.unwrap() < 0.0);
        assert!((r / 5.656636319530662 - 1.0).abs() < 2e-6, "{r}");
        let mut evals = 0;
        let z = calibrate_noise_multiplier_with_progress(
            event,
            AccountantKind::Pld,
            nb,
            e,
            d,
            |_, _| evals += 1,
        )
        .unwrap();
        assert_eq!(z.to_bits(), 5.656636319530662f64.to_bits(), "{z}");
        // The deciding points only (before the estimate: 3 evaluated one after another).
        assert!(evals <= 3, "{evals}");
    }

    #[test]
    fn guided_search_returns_only_a_point_it_saw_meet_the_target() {
        // A curve that is not monotone at the guided search's answer (ε jumps above the target
        // there): the search must not return it on monotonicity's word.
        let n = std::cell::Cell::new(0);
        let mut eval = counted(&n);
        let mut s = Search::new(&mut eval, 2.0);
        let answer = search_smallest(&mut s, Start::Point(1.0, 1.0, None), CALIBRATION_TOLERANCE)
            .unwrap()
            .unwrap();
        let seen = std::cell::RefCell::new(Vec::new());
        let mut base = counted(&n);
        let mut holed = |z: f64| -> Result<f64> {
            let e = if z == answer { 3.0 } else { base(z)? };
            seen.borrow_mut().push((z, e));
            Ok(e)
        };
        let mut s = Search::new(&mut holed, 2.0);
        let z = search_smallest(&mut s, Start::Point(1.0, 1.0, None), CALIBRATION_TOLERANCE)
            .unwrap()
            .unwrap();
        assert_ne!(z, answer);
        assert!(
            seen.borrow().iter().any(|&(x, e)| x == z && e <= 2.0),
            "{z} was returned without being seen to meet the target"
        );
    }

    #[test]
    fn analytic_gaussian_by_hand() {
        // z = 1, ε = 1: δ = Φ(−0.5) − e·Φ(−1.5) = 0.3085375387 − 2.718281828·0.0668072013
        // = 0.3085375387 − 0.1816008 = 0.1269367.
        let d = gaussian_delta(1.0, 1.0).unwrap();
        let want = 0.308_537_538_725_986_9 - std::f64::consts::E * 0.066_807_201_268_858_06;
        assert!((d - want).abs() < 1e-12, "{d} vs {want}");
        assert!(d >= want);
        // Round trip: calibrate for (1, 1e-5), then δ at that z is ≤ 1e-5 and just so.
        let (e, dl) = (Epsilon::new(1.0).unwrap(), Delta::new(1e-5).unwrap());
        let z = analytic_gaussian_noise_multiplier(e, dl).unwrap();
        // Balle & Wang Fig. 1 / dp_accounting: σ ≈ 3.73 at ε = 1, δ = 1e-5 (classical 4.84).
        assert!((z - 3.7305).abs() < 1e-3, "{z}");
        let d = gaussian_delta(z, 1.0).unwrap();
        assert!(d <= 1e-5 && d > 0.9999e-5, "{d}");
        let eps = gaussian_epsilon(z, dl).unwrap();
        assert!(eps <= 1.0 + 1e-9 && eps > 0.9999, "{eps}");
    }

    #[test]
    fn search_calibration_round_trips() {
        let (e, d) = (Epsilon::new(2.0).unwrap(), Delta::new(1e-5).unwrap());
        let make = |z: f64| {
            PrivacyEvent::Gaussian {
                noise_multiplier: z,
            }
            .sampled(crate::event::Sampling::Poisson { rate: 0.01 })
            .repeated(1000)
        };
        let z =
            calibrate_noise_multiplier(make, AccountantKind::Rdp, Neighbouring::AddRemove, e, d)
                .unwrap();
        let eps = AccountantKind::Rdp
            .epsilon(Neighbouring::AddRemove, &make(z), d)
            .unwrap();
        assert!(eps <= 2.0, "{eps}");
        let below = AccountantKind::Rdp
            .epsilon(Neighbouring::AddRemove, &make(z * (1.0 - 1e-5)), d)
            .unwrap();
        assert!(below > 2.0 - 1e-3, "{below}");
    }

    fn ed(e: f64, d: f64) -> (Epsilon, Delta) {
        (Epsilon::new(e).unwrap(), Delta::new(d).unwrap())
    }

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs()
    }

    #[test]
    fn theory_sigma_matches_hand_value() {
        // L=1, R=10, n=100, eps=1, delta=1e-3:
        // 256·10·ln(25000)·ln(2000)/10⁴ = 256·10·10.12663·7.60090/10⁴ = 19.70471.
        let (e, d) = ed(1.0, 1e-3);
        let s = isrl_theory_sigma(1.0, 10, 100, 3, e, d).unwrap();
        assert!(close(s * s, 19.704713027617633, 1e-12), "{}", s * s);
        // K_min = 100/(4 sqrt(20 ln 2000)) = 2.02765
        assert!(close(
            isrl_theory_min_k(100, 10, e, d),
            2.0276473815418443,
            1e-12
        ));
        assert!(
            isrl_theory_sigma(1.0, 10, 100, 2, e, d).is_err(),
            "K below the theorem's bound"
        );
        let (e_big, d) = ed(20.0, 1e-3);
        assert!(
            isrl_theory_sigma(1.0, 10, 100, 100, e_big, d).is_err(),
            "eps > 2 ln(2/delta)"
        );
    }

    #[test]
    fn experiment_sigma_matches_hand_value() {
        // Obesity shape: L=20, R=100, n=202, eps=1, delta=1/202²:
        // 8·400·100·ln(40804)/(40804) = 83.25878; K = 202/(2·10) = 10.1 → 10.
        let (e, d) = ed(1.0, 1.0 / (202.0 * 202.0));
        assert_eq!(isrl_experiment_k(202, 100, e), 10);
        let s = isrl_experiment_sigma(20.0, 100, 202, 30, e, d).unwrap();
        assert!(close(s * s, 83.25878164730838, 1e-12), "{}", s * s);
        assert!(isrl_experiment_sigma(20.0, 100, 202, 9, e, d).is_err());
        assert!(isrl_experiment_sigma(20.0, 100, 202, 203, e, d).is_err());
        // MNIST shape (digest §4.1): R=35, n=1238 gives σ² = 0.0026020 L²/ε².
        let (e, d) = ed(1.0, 1.0 / (1238.0f64 * 1238.0));
        let s = isrl_experiment_sigma(1.0, 35, 1238, 443, e, d).unwrap();
        assert!(close(s * s, 0.002601975001250743, 1e-12));
        assert_eq!(
            isrl_experiment_k(1238, 35, Epsilon::new(18.0).unwrap()),
            443
        );
    }

    #[test]
    fn local_sgd_and_one_pass_match_hand_values() {
        // 8·400·100·30·ln(40804)/(40804·9) = 277.52927
        let (e, d) = ed(3.0, 1.0 / (202.0 * 202.0));
        let s = local_sgd_sigma(20.0, 100, 30, 202, e, d).unwrap();
        assert!(close(s * s, 277.5292721576946, 1e-12));
        // 32·ln(125000)/2500 = 0.150222
        let (e, d) = ed(1.0, 1e-5);
        let s = one_pass_sigma(1.0, 50, e, d).unwrap();
        assert!(close(s * s, 0.1502216834084408, 1e-12));
        let (e, d) = ed(100.0, 1e-5);
        assert!(one_pass_sigma(1.0, 50, e, d).is_err());
    }
}

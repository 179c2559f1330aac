//! Lower bounds on the true ε of an event, from one concrete neighbouring pair.
//!
//! Upper bounds (the accountants) say what is certified; a lower bound says how much of that
//! is slack. For a (subsampled) Gaussian round we take the pair where every other record's
//! clipped gradient equals the differing record's replacement and the gradients do not depend
//! on the model (a linear loss): then the round's outputs are exactly
//!
//!   P = Σ_c P(C = c) N(c, z²)   vs   Q = N(0, z²)     (in units of the sensitivity),
//!
//! C the number of times the differing record is drawn ([`OccurrenceLaw`]), and the rounds are
//! independent, so the run's outputs are P^T vs Q^T. Any accountant's (ε, δ) for this event must
//! cover this pair, so ε_true(δ) ≥ the ε at which δ_{P^T‖Q^T} (or the reverse order) falls to δ.
//! This is the "privacy loss of a concrete pair" approach of auditing (e.g. Nasr et al. 2021,
//! "Adversary instantiation", §3) computed exactly instead of estimated.
//!
//! Computation is *optimistic* so that the bound stays a bound: the privacy loss
//! ℓ(x) = log Σ_c P(C=c) e^{(2cx − c²)/(2z²)} is increasing in x, and each x-interval between
//! the points where ℓ crosses the grid i·h is assigned the smallest loss it contains (rounded
//! down; Meiser & Mohammadi 2018 "Tight on budget?", optimistic buckets). Since
//! (1 − e^{ε−s})₊ is increasing in s, the composed δ of rounded-down losses is at most the true
//! one. Mass beyond the window is rounded down too or dropped (also optimistic). Composition is
//! the `pld` module's FFT; its only pessimistic step (tail mass moved to +∞, ≤ 1e-15 per
//! composition) is subtracted back through a margin on δ.
//!
//! Below δ = [`CROSS_CHECK_DELTA`] (1e-9) the FFT's round-off is no longer far below δ, so the
//! bound is cross-checked against RDP's upper bound, and one above it is refused, never printed.

use super::pld::Pmf;
use super::sampled_pld::{OccurrenceLaw, PoissonPair};
use super::special::log_erfc;
use super::{check_multiplier, check_sampling};
use crate::error::Result;
use crate::event::{Neighbouring, PrivacyEvent, Sampling};
use crate::params::Delta;

/// Grid width of the optimistic discretisation.
pub const LOWER_DISCRETIZATION: f64 = 1e-4;
/// Components with P(C = c) below this are dropped from P (dropping mass only lowers δ).
const COMPONENT_FLOOR: f64 = 1e-14;
/// Noise quantiles covered on each side of the components.
const QUANTILE: f64 = 9.0;
const MAX_GRID: usize = 1 << 25;

/// P(a ≤ N(0,1) < b), from the survival function on the side that keeps precision.
fn normal_interval(a: f64, b: f64) -> f64 {
    let sf = |x: f64| 0.5 * (log_erfc(x / std::f64::consts::SQRT_2)).exp();
    if a >= 0.0 {
        (sf(a) - sf(b)).max(0.0)
    } else if b <= 0.0 {
        (sf(-b) - sf(-a)).max(0.0)
    } else {
        (1.0 - sf(-a) - sf(b)).max(0.0)
    }
}

/// The pair of one round: P and Q, each a mixture of N(c, z²) (centres c in units of the
/// sensitivity, with log-weights).
struct Mixture {
    p: Vec<(f64, f64)>, // (c, log weight)
    q: Vec<(f64, f64)>,
    z: f64,
}

impl Mixture {
    /// P = Σ_c P(C = c) N(c, z²) vs Q = N(0, z²): the occurrence-law pair (module doc).
    fn new(law: &OccurrenceLaw, z: f64) -> Self {
        let p = law
            .probs()
            .iter()
            .enumerate()
            .filter(|(c, p)| *c == 0 || **p >= COMPONENT_FLOOR)
            .filter(|(_, p)| **p > 0.0)
            .map(|(c, p)| (c as f64, p.ln()))
            .collect();
        Mixture {
            p,
            q: vec![(0.0, 0.0)],
            z,
        }
    }

    /// The ball pair of Poisson sampling under replace-one for clipped contributions,
    /// (1−q)N(0) + qN(½) vs (1−q)N(0) + qN(−½) (`sampled_pld` module doc): realised by one
    /// record clipped to +L·e₁ or −L·e₁, every other record's gradient 0.
    fn ball(q: f64, z: f64) -> Self {
        let side = |c: f64| {
            [(0.0, (-q).ln_1p()), (c, q.ln())]
                .into_iter()
                .filter(|t| t.1.is_finite())
                .collect()
        };
        Mixture {
            p: side(0.5),
            q: side(-0.5),
            z,
        }
    }

    /// ℓ(−∞): finite when P and Q have the same leftmost centre (the log-ratio of its
    /// weights), else −∞ (P's leftmost centre is to the right of Q's in every pair here).
    fn floor(&self) -> Option<f64> {
        let left = |v: &[(f64, f64)]| {
            v.iter()
                .copied()
                .min_by(|a, b| a.0.total_cmp(&b.0))
                .unwrap_or((0.0, 0.0))
        };
        let (a, b) = (left(&self.p), left(&self.q));
        (a.0 == b.0).then_some(a.1 - b.1)
    }

    /// ℓ(x) = log p(x)/q(x) and ℓ'(x) (the common factor e^{−x²/(2z²)} cancelled).
    fn loss(&self, x: f64) -> (f64, f64) {
        let z2 = self.z * self.z;
        let side = |v: &[(f64, f64)]| {
            let terms = v
                .iter()
                .map(|&(c, lw)| (c, lw + (2.0 * c * x - c * c) / (2.0 * z2)));
            let m = terms.clone().map(|t| t.1).fold(f64::NEG_INFINITY, f64::max);
            let (mut s, mut sc) = (0.0, 0.0);
            for (c, t) in terms {
                let e = (t - m).exp();
                s += e;
                sc += c * e;
            }
            (m + s.ln(), sc / s / z2)
        };
        let (lp, dp) = side(&self.p);
        let (lq, dq) = side(&self.q);
        (lp - lq, dp - dq)
    }

    fn mass(&self, v: &[(f64, f64)], a: f64, b: f64) -> f64 {
        v.iter()
            .map(|&(c, lw)| lw.exp() * normal_interval((a - c) / self.z, (b - c) / self.z))
            .sum()
    }

    /// P(a ≤ X < b) under P.
    fn p_mass(&self, a: f64, b: f64) -> f64 {
        self.mass(&self.p, a, b)
    }

    /// P(a ≤ X < b) under Q.
    fn q_mass(&self, a: f64, b: f64) -> f64 {
        self.mass(&self.q, a, b)
    }
}

/// Optimistic PMFs of one round in both orders: (P‖Q, Q‖P); `None` when the loss window is
/// too wide for the grid (tiny noise multipliers): then dpfl states no lower bound, which is
/// always sound, rather than failing the accounting it accompanies.
fn lower_pmfs(mix: &Mixture, h: f64) -> Result<Option<(Pmf, Pmf)>> {
    let z = mix.z;
    check_multiplier(z)?;
    let centres = mix.p.iter().chain(&mix.q).map(|t| t.0);
    let c_top = centres.clone().fold(0.0, f64::max);
    let c_bottom = centres.fold(0.0, f64::min);
    let (x_min, x_max) = (c_bottom - QUANTILE * z, c_top + QUANTILE * z);
    let (l_min, _) = mix.loss(x_min);
    let (l_max, _) = mix.loss(x_max);
    let (i0, i1) = ((l_min / h).ceil() as i64, (l_max / h).floor() as i64);
    if !(l_min.is_finite() && l_max.is_finite()) || i1 < i0 || (i1 - i0) as usize > MAX_GRID {
        return Ok(None);
    }
    // x_i = ℓ⁻¹(i·h) for i = i0..=i1, by safeguarded Newton from the previous point
    // (ℓ is increasing and convex: a log-sum-exp of linear functions).
    let mut xs = Vec::with_capacity((i1 - i0 + 1) as usize);
    let (mut lo, mut x) = (x_min, x_min);
    for i in i0..=i1 {
        let target = i as f64 * h;
        let mut hi = x_max;
        for _ in 0..60 {
            let (l, d) = mix.loss(x);
            if (l - target).abs() <= 1e-12 * target.abs().max(1.0) {
                break;
            }
            if l < target {
                lo = x;
            } else {
                hi = x;
            }
            let nx = if d > 0.0 {
                x - (l - target) / d
            } else {
                f64::NAN
            };
            x = if nx.is_finite() && nx > lo && nx < hi {
                nx
            } else {
                0.5 * (lo + hi)
            };
        }
        xs.push(x);
        lo = x;
    }
    // Loss bins: P‖Q has losses ℓ(x) > ℓ(−∞) = log P(C = 0) (−∞ without a c = 0 component,
    // whose mass below x_{i0} is then dropped); Q‖P has −ℓ(x).
    let floor = mix.floor();
    let l_floor = floor.map_or(l_min, |f| f.min(l_min));
    let p_lo = (l_floor / h).floor() as i64;
    let mut p = vec![0.0; (i1 - p_lo + 1) as usize];
    let mut q = vec![0.0; (i1 - i0 + 2) as usize]; // bins −(i1+1) ..= −i0
    let q_lo = -(i1 + 1);
    // Below x_{i0}: P‖Q loss ≥ ℓ(−∞); Q‖P loss > −i0·h.
    if floor.is_some() {
        p[0] += mix.p_mass(f64::NEG_INFINITY, xs[0]);
    }
    q[(-i0 - q_lo) as usize] += mix.q_mass(f64::NEG_INFINITY, xs[0]);
    // The masses of the windows are independent (special functions each): computed on all
    // cores, then added in the sequential order (the same bits).
    let windows = xs.len() - 1;
    let pm = super::par::map_indices(windows, &|j| mix.p_mass(xs[j], xs[j + 1]));
    let qm = super::par::map_indices(windows, &|j| mix.q_mass(xs[j], xs[j + 1]));
    for j in 0..windows {
        let i = i0 + j as i64;
        p[(i - p_lo) as usize] += pm[j];
        q[(-(i + 1) - q_lo) as usize] += qm[j];
    }
    // Above x_{i1}: P‖Q loss ≥ i1·h; Q‖P losses below −i1·h are dropped.
    p[(i1 - p_lo) as usize] += mix.p_mass(xs[xs.len() - 1], f64::INFINITY);
    let scale = |v: &mut Vec<f64>| {
        let t: f64 = v.iter().sum();
        if t > 1.0 {
            v.iter_mut().for_each(|x| *x /= t);
        }
    };
    scale(&mut p);
    scale(&mut q);
    Ok(Some((
        Pmf::from_masses(h, p_lo, p, 0.0)?,
        Pmf::from_masses(h, q_lo, q, 0.0)?,
    )))
}

/// The pair of a leaf this module can bound (`pair`: Poisson under replace-one).
fn leaf_pair(event: &PrivacyEvent, nb: Neighbouring, pair: PoissonPair) -> Result<Option<Mixture>> {
    match event {
        PrivacyEvent::Gaussian { noise_multiplier } => {
            check_multiplier(*noise_multiplier)?;
            Ok(Some(Mixture::new(
                &OccurrenceLaw::bernoulli(1.0),
                *noise_multiplier,
            )))
        }
        PrivacyEvent::Sampled { sampling, event } => {
            check_sampling(sampling)?;
            let PrivacyEvent::Gaussian { noise_multiplier } = **event else {
                return Ok(None);
            };
            check_multiplier(noise_multiplier)?;
            let law = match (sampling, nb) {
                (Sampling::Poisson { rate }, Neighbouring::ReplaceOne)
                    if pair == PoissonPair::Ball =>
                {
                    return Ok(Some(Mixture::ball(*rate, noise_multiplier)));
                }
                (Sampling::Poisson { rate }, _) => OccurrenceLaw::bernoulli(*rate),
                (
                    Sampling::WithReplacement { .. } | Sampling::WithoutReplacement { .. },
                    Neighbouring::ReplaceOne,
                ) => OccurrenceLaw::replace_one(sampling)?,
                _ => return Ok(None),
            };
            Ok(Some(Mixture::new(&law, noise_multiplier)))
        }
        _ => Ok(None),
    }
}

fn collect(event: &PrivacyEvent, mult: u64, out: &mut Vec<(PrivacyEvent, u64)>) -> bool {
    match event {
        PrivacyEvent::SelfComposed { event, count } => match mult.checked_mul(*count) {
            Some(m) => collect(event, m, out),
            None => false,
        },
        PrivacyEvent::Composed(v) => v.iter().all(|e| collect(e, mult, out)),
        e => {
            if mult > 0 {
                match out.iter_mut().find(|(x, _)| x == e) {
                    Some(l) => l.1 = l.1.saturating_add(mult),
                    None => out.push((e.clone(), mult)),
                }
            }
            true
        }
    }
}

/// A lower bound on the ε at `delta` of any accountant for `event` under `neighbouring`, from
/// the concrete pair of the module doc; `None` if the event contains a part this module has no
/// pair for (Laplace, disjoint batches, …).
pub fn epsilon_lower_bound(
    event: &PrivacyEvent,
    neighbouring: Neighbouring,
    delta: Delta,
) -> Result<Option<f64>> {
    epsilon_lower_bound_at(event, neighbouring, delta, LOWER_DISCRETIZATION)
}

/// [`epsilon_lower_bound`] on an optimistic grid of width `h` (finite, > 0). A coarser grid
/// rounds more losses down, so the bound is looser but still a bound; reproduction grids use
/// it to report a lower bound for thousands of runs at a fraction of the cost.
pub fn epsilon_lower_bound_at(
    event: &PrivacyEvent,
    neighbouring: Neighbouring,
    delta: Delta,
    h: f64,
) -> Result<Option<f64>> {
    epsilon_lower_bound_with(event, neighbouring, delta, h, PoissonPair::Ball)
}

/// [`epsilon_lower_bound_at`] with `pair` for Poisson sampling under replace-one (the ball
/// pair of clipped contributions by default; the generic pair for `dpfl account`).
pub fn epsilon_lower_bound_with(
    event: &PrivacyEvent,
    neighbouring: Neighbouring,
    delta: Delta,
    h: f64,
    pair: PoissonPair,
) -> Result<Option<f64>> {
    if !(h.is_finite() && h > 0.0) {
        return Err(crate::error::PrivacyError::invalid(
            "discretization",
            h,
            "must be finite and > 0",
        ));
    }
    // Unsampled Gaussians compose to one Gaussian of 1/z² = Σ T_i/z_i², whose pair N(1, z²)
    // vs N(0, z²) is exact (Balle & Wang 2018 Thm 8): no grid, no FFT (issue 27: the FFT path
    // took up to 45 s for `account` of 48 441 steps). The bisection's answer is rounded up,
    // so it is stepped down by more than its tolerance.
    if let Some(z) = super::effective_gaussian(event)? {
        let exact = super::gaussian::gaussian_epsilon(z, delta)?;
        return Ok(Some((exact * (1.0 - 1e-6) - 1e-9).max(0.0)));
    }
    let mut leaves = Vec::new();
    if !collect(event, 1, &mut leaves) {
        return Ok(None);
    }
    let (mut fwd, mut rev): (Option<Pmf>, Option<Pmf>) = (None, None);
    let mut compositions = 0u32;
    for (e, count) in leaves {
        let Some(mix) = leaf_pair(&e, neighbouring, pair)? else {
            return Ok(None);
        };
        let Some((p, q)) = lower_pmfs(&mix, h)? else {
            return Ok(None);
        };
        let (p, q) = (p.self_compose(count)?, q.self_compose(count)?);
        compositions += 1;
        fwd = Some(match fwd {
            Some(f) => f.compose(&p)?,
            None => p,
        });
        rev = Some(match rev {
            Some(r) => r.compose(&q)?,
            None => q,
        });
    }
    let (Some(fwd), Some(rev)) = (fwd, rev) else {
        return Ok(Some(0.0));
    };
    // Self-composition moves ≤ 1e-15 to +∞ each time; FFT round-off is far below 1e-12.
    let margin = 1e-15 * compositions as f64 + 1e-12 + 1e-9 * delta.get();
    let target = delta.get() + margin;
    let at = |pmf: &Pmf| -> Result<f64> {
        if pmf.infinity_mass() > target {
            return Ok(0.0);
        }
        pmf.epsilon_for_delta(target)
    };
    let eps = at(&fwd)?.max(at(&rev)?);
    // Step down one part in 1e9 so that rounding in the solve can only lower the bound.
    let eps = (eps * (1.0 - 1e-9) - 1e-12).max(0.0);
    // Below δ ≈ 1e-9 the FFT's round-off (relative to the largest bin, accumulated over the
    // compositions) is no longer far below δ, and the "bound" can land above the truth
    // (issue 27: 23.31 over an RDP upper bound of 20.59 at δ ≈ 1e-12, T = 1e5). Cross-check
    // against RDP there: a lower bound above a sound upper bound is refused, not printed.
    if delta.get() < CROSS_CHECK_DELTA
        && let Ok(upper) = super::AccountantKind::Rdp.epsilon(neighbouring, event, delta)
        && eps > upper
    {
        return Err(crate::error::PrivacyError::Numerical {
            context: "epsilon lower bound",
            reason: format!(
                "the FFT's round-off at delta = {:e} put the bound ({eps}) above RDP's upper bound ({upper}); no lower bound is stated",
                delta.get()
            ),
        });
    }
    Ok(Some(eps))
}

/// Below this δ the lower bound is cross-checked against RDP's upper bound.
pub const CROSS_CHECK_DELTA: f64 = 1e-9;

/// A lower bound as shown beside an upper bound of the same events: withheld, with the
/// reason, when round-off put it above the upper bound (issue 27 finding 3: a printed lower
/// bound is never above a computed upper bound). `dpfl account` and the run summaries use it.
pub fn shown_beside(lower: Option<f64>, upper: Option<f64>) -> (Option<f64>, Option<String>) {
    match (lower, upper) {
        (Some(l), Some(u)) if l > u => (
            None,
            Some(format!(
                "the computed bound {l} exceeds the upper bound {u} (numerical round-off); withheld"
            )),
        ),
        (l, _) => (l, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lower_bound_above_the_upper_bound_is_withheld_with_the_reason() {
        assert_eq!(shown_beside(Some(0.9), Some(1.0)), (Some(0.9), None));
        assert_eq!(shown_beside(Some(1.0), Some(1.0)), (Some(1.0), None));
        assert_eq!(shown_beside(Some(0.9), None), (Some(0.9), None));
        assert_eq!(shown_beside(None, Some(1.0)), (None, None));
        let (l, why) = shown_beside(Some(23.31), Some(20.59));
        assert_eq!(l, None);
        assert!(why.unwrap().contains("exceeds the upper bound 20.59"));
    }
    use crate::accountant::sampled_pld::upper_profile;

    #[test]
    fn a_loss_window_too_wide_for_the_grid_gives_no_bound_not_an_error() {
        // z = 0.02: the privacy loss spans ±(1/(2z²) + 8/z) ≈ ±1650, wider than the grid; the
        // accounting it accompanies must not fail for it (it did: "does not fit the grid").
        // (A sampled event, half the records: at z = 0.005 the loss reaches ≈ 2·10⁴, 2·10⁸
        // bins. Unsampled Gaussians take the exact analytic path, below.)
        let d = Delta::new(1e-5).unwrap();
        for z in [1e-3, 0.005] {
            let lb = epsilon_lower_bound(
                &PrivacyEvent::Gaussian {
                    noise_multiplier: z,
                }
                .sampled(Sampling::WithoutReplacement {
                    population: 10,
                    size: 5,
                }),
                Neighbouring::ReplaceOne,
                d,
            )
            .unwrap();
            assert_eq!(lb, None, "z = {z}");
        }
        // Unsampled: the exact ε of one Gaussian of 1/z² = Σ T/z², stepped down (issue 27:
        // `account` of 48 441 steps at z = 0.527 computed this by FFT for up to 45 s).
        let e = PrivacyEvent::Gaussian {
            noise_multiplier: 0.527,
        }
        .repeated(48_441);
        let d = Delta::new(4e-5).unwrap();
        let lb = epsilon_lower_bound(&e, Neighbouring::AddRemove, d)
            .unwrap()
            .unwrap();
        let exact =
            crate::accountant::gaussian::gaussian_epsilon(0.527 / 48_441f64.sqrt(), d).unwrap();
        assert!(lb < exact && lb > exact * (1.0 - 2e-6), "{lb} vs {exact}");
    }

    #[test]
    fn plain_gaussian_lower_bound_meets_the_exact_value() {
        // One Gaussian: the pair N(1, z²) vs N(0, z²) is the worst case, so the lower bound is
        // the exact ε (Balle & Wang Thm 8) less at most the grid width.
        let d = Delta::new(1e-5).unwrap();
        let lb = epsilon_lower_bound(
            &PrivacyEvent::Gaussian {
                noise_multiplier: 2.0,
            },
            Neighbouring::ReplaceOne,
            d,
        )
        .unwrap()
        .unwrap();
        let exact = crate::accountant::gaussian::gaussian_epsilon(2.0, d).unwrap();
        assert!(lb <= exact && lb >= exact - 2e-4, "{lb} vs {exact}");
    }

    /// δ of P = Σ π_c N(c, z²) vs N(0, z²) at ε by direct quadrature (midpoint rule on a fine
    /// grid over ±12 z), the "exact mixture computation".
    fn mixture_delta(pi: &[f64], z: f64, eps: f64) -> f64 {
        let pdf = |x: f64, m: f64| {
            (-(x - m) * (x - m) / (2.0 * z * z)).exp() / (z * (2.0 * std::f64::consts::PI).sqrt())
        };
        let (a, b) = (-12.0 * z, pi.len() as f64 + 12.0 * z);
        let n = 400_000;
        let dx = (b - a) / n as f64;
        let mut s = 0.0;
        for i in 0..n {
            let x = a + (i as f64 + 0.5) * dx;
            let p: f64 = pi
                .iter()
                .enumerate()
                .map(|(c, w)| w * pdf(x, c as f64))
                .sum();
            s += (p - eps.exp() * pdf(x, 0.0)).max(0.0) * dx;
        }
        s
    }

    #[test]
    fn exact_mixture_lies_between_lower_pmf_and_upper_profile() {
        // K = 3 draws of n = 3, z = 0.7: the concrete pair's exact δ must sit between the
        // optimistic PMF's and the BBG profile's at every ε.
        let law = OccurrenceLaw::binomial(3, 1.0 / 3.0);
        let (p, _) = lower_pmfs(&Mixture::new(&law, 0.7), 1e-3).unwrap().unwrap();
        for &e in &[0.0, 0.3, 1.0, 2.0, 3.0] {
            let exact = mixture_delta(law.probs(), 0.7, e);
            let lower = p.delta_for_epsilon(e);
            let upper = upper_profile(&law, 0.7, e);
            assert!(
                lower <= exact + 1e-9,
                "ε {e}: lower {lower} > exact {exact}"
            );
            assert!(
                exact <= upper + 1e-9,
                "ε {e}: exact {exact} > upper {upper}"
            );
            assert!(
                lower >= exact - 5e-3,
                "ε {e}: lower {lower} far below {exact}"
            );
        }
    }

    #[test]
    fn issue_11_one_round_figures() {
        // One round of K = 26 of n = 240 with replacement at z = 1.64, δ = 1/240²: issue 11
        // reports RDP 16.5, the sound profile 1.79 and a best lower bound 0.71.
        use crate::accountant::AccountantKind;
        let e = PrivacyEvent::Gaussian {
            noise_multiplier: 1.64,
        }
        .sampled(Sampling::WithReplacement {
            population: 240,
            draws: 26,
        });
        let d = Delta::new(1.0 / (240.0 * 240.0)).unwrap();
        let nb = Neighbouring::ReplaceOne;
        let up = AccountantKind::Pld.epsilon(nb, &e, d).unwrap();
        let lo = epsilon_lower_bound(&e, nb, d).unwrap().unwrap();
        let rdp = AccountantKind::Rdp.epsilon(nb, &e, d).unwrap();
        assert!((up - 1.785).abs() < 0.01, "upper {up}");
        assert!((lo - 0.707).abs() < 0.01, "lower {lo}");
        assert!((rdp - 16.55).abs() < 0.05, "rdp {rdp}");
    }

    #[test]
    fn the_coarse_grids_still_bracket_the_fine_ones() {
        // What reproduction grids use (1e-3): the optimistic lower bound may only fall and the
        // pessimistic PLD may only rise against the 1e-4 grids; a bad width is refused.
        use crate::accountant::pld::PldAccountant;
        let e = PrivacyEvent::Gaussian {
            noise_multiplier: 1.64,
        }
        .sampled(Sampling::WithReplacement {
            population: 240,
            draws: 26,
        })
        .repeated(20);
        let d = Delta::new(1.0 / (240.0 * 240.0)).unwrap();
        let nb = Neighbouring::ReplaceOne;
        let lo_fine = epsilon_lower_bound(&e, nb, d).unwrap().unwrap();
        let lo_coarse = epsilon_lower_bound_at(&e, nb, d, 1e-3).unwrap().unwrap();
        let up_fine = PldAccountant::new(nb).epsilon(&e, d).unwrap();
        let up_coarse = PldAccountant::with_discretization(nb, 1e-3)
            .unwrap()
            .epsilon(&e, d)
            .unwrap();
        assert!(lo_coarse <= lo_fine + 1e-9, "{lo_coarse} > {lo_fine}");
        assert!(up_coarse >= up_fine - 1e-9, "{up_coarse} < {up_fine}");
        assert!(
            lo_coarse > 0.0 && up_coarse < 2.0 * up_fine,
            "{lo_coarse} {up_coarse}"
        );
        for h in [0.0, -1e-3, f64::NAN, f64::INFINITY] {
            assert!(epsilon_lower_bound_at(&e, nb, d, h).is_err(), "{h}");
        }
    }

    #[test]
    fn events_without_a_pair_give_none() {
        let d = Delta::new(1e-5).unwrap();
        let e = PrivacyEvent::Laplace {
            noise_multiplier: 1.0,
        };
        assert_eq!(
            epsilon_lower_bound(&e, Neighbouring::ReplaceOne, d).unwrap(),
            None
        );
    }
}

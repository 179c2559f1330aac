//! Composition of discretised PLDs by FFT (`realfft`): T-fold self-composition on a Chernoff
//! window with the tail mass moved to +∞, and composition of two PMFs; plus the "too many
//! bins" signal the accountant answers by coarsening the grid.

use std::sync::Arc;

use realfft::num_complex::Complex;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};

use super::{MAX_BINS, Pmf, TAIL_MASS_TRUNCATION};
use crate::accountant::memo::Memo;
use crate::accountant::par;
use crate::error::{PrivacyError, Result};

impl Pmf {
    /// T-fold composition by FFT on the Chernoff window (`dp_accounting`'s `self_convolve`).
    pub fn self_compose(&self, t: u64) -> Result<Pmf> {
        self.self_compose_within(t, MAX_BINS)
            .map_err(Grow::into_error)
    }

    pub(super) fn self_compose_within(&self, t: u64, max_bins: usize) -> Sized<Pmf> {
        if t == 0 {
            return Err(Grow::Fail(PrivacyError::invalid(
                "count",
                0.0,
                "composition count must be >= 1",
            )));
        }
        if t == 1 {
            return Ok(self.clone());
        }
        let n = self.probs.len();
        let tf = t as f64;
        let (lo_b, hi_b) = chernoff_bounds(&self.probs, t, TAIL_MASS_TRUNCATION);
        let out_len = (hi_b - lo_b + 1) as usize;
        let fft_len = next_fast_len(out_len.max(n));
        if fft_len > max_bins {
            return Err(Grow::Bins(fft_len));
        }
        let (fwd, inv) = plans(fft_len);
        let mut buf = vec![0.0; fft_len];
        buf[..n].copy_from_slice(&self.probs);
        let mut spec = fwd.make_output_vec();
        fwd.process(&mut buf, &mut spec).map_err(fft_err)?;
        // Polar power: |c|^T e^{iT·arg c}, stable for large T (each bin by itself, on both
        // cores).
        par::update_each(&mut spec, &|c: &mut Complex<f64>| {
            let (r, th) = c.to_polar();
            *c = Complex::from_polar(r.powf(tf), th * tf);
        });
        // The imaginary parts of the DC and Nyquist bins must be zero for a real inverse.
        if let Some(c) = spec.first_mut() {
            c.im = 0.0;
        }
        if fft_len.is_multiple_of(2)
            && let Some(c) = spec.last_mut()
        {
            c.im = 0.0;
        }
        let mut out = inv.make_output_vec();
        inv.process(&mut spec, &mut out).map_err(fft_err)?;
        let scale = 1.0 / fft_len as f64;
        let mut probs = Vec::with_capacity(out_len);
        for k in 0..out_len {
            let idx = ((lo_b as usize) + k) % fft_len;
            probs.push((out[idx] * scale).max(0.0));
        }
        let infinity = (TAIL_MASS_TRUNCATION - (tf * (-self.infinity).ln_1p()).exp_m1()).min(1.0);
        let lower = (self.lower as i128 * t as i128 + lo_b as i128)
            .try_into()
            .map_err(|_| {
                Grow::Fail(PrivacyError::Numerical {
                    context: "PLD composition",
                    reason: "grid index overflows i64".into(),
                })
            })?;
        let out = Pmf {
            h: self.h,
            lower,
            probs,
            infinity,
        };
        out.check("PLD composition")?;
        Ok(out)
    }

    /// Composition of two PMFs on the same grid (full linear convolution by FFT).
    pub fn compose(&self, other: &Pmf) -> Result<Pmf> {
        self.compose_within(other, MAX_BINS)
            .map_err(Grow::into_error)
    }

    pub(super) fn compose_within(&self, other: &Pmf, max_bins: usize) -> Sized<Pmf> {
        if self.h != other.h {
            return Err(Grow::Fail(PrivacyError::invalid(
                "discretization",
                other.h,
                format!(
                    "PMFs on different grids ({} and {}) cannot be composed",
                    self.h, other.h
                ),
            )));
        }
        let len = self.probs.len() + other.probs.len() - 1;
        let fft_len = next_fast_len(len);
        if fft_len > max_bins {
            return Err(Grow::Bins(fft_len));
        }
        let (fwd, inv) = plans(fft_len);
        let mut a = vec![0.0; fft_len];
        a[..self.probs.len()].copy_from_slice(&self.probs);
        let mut b = vec![0.0; fft_len];
        b[..other.probs.len()].copy_from_slice(&other.probs);
        let mut sa = fwd.make_output_vec();
        let mut sb = fwd.make_output_vec();
        fwd.process(&mut a, &mut sa).map_err(fft_err)?;
        fwd.process(&mut b, &mut sb).map_err(fft_err)?;
        for (x, y) in sa.iter_mut().zip(&sb) {
            *x *= *y;
        }
        if let Some(c) = sa.first_mut() {
            c.im = 0.0;
        }
        if fft_len.is_multiple_of(2)
            && let Some(c) = sa.last_mut()
        {
            c.im = 0.0;
        }
        let mut out = inv.make_output_vec();
        inv.process(&mut sa, &mut out).map_err(fft_err)?;
        let scale = 1.0 / fft_len as f64;
        let probs = out[..len].iter().map(|x| (x * scale).max(0.0)).collect();
        let infinity = (self.infinity + other.infinity - self.infinity * other.infinity).min(1.0);
        let out = Pmf {
            h: self.h,
            lower: self.lower + other.lower,
            probs,
            infinity,
        };
        out.check("PLD composition")?;
        Ok(out)
    }
}

/// Why a computation on a grid did not produce a PMF: the grid needs more bins than allowed
/// (the caller may retry on a coarser grid, which stays pessimistic), or a real failure.
#[derive(Debug, Clone)]
pub(super) enum Grow {
    Bins(usize),
    Fail(PrivacyError),
}

pub(super) type Sized<T> = std::result::Result<T, Grow>;

impl From<PrivacyError> for Grow {
    fn from(e: PrivacyError) -> Self {
        Grow::Fail(e)
    }
}

impl Grow {
    pub(super) fn into_error(self) -> PrivacyError {
        match self {
            Grow::Fail(e) => e,
            Grow::Bins(n) => PrivacyError::Numerical {
                context: "PLD composition",
                reason: format!("{n} bins needed; use a coarser grid or the RDP accountant"),
            },
        }
    }
}

pub(super) fn fft_err(e: realfft::FftError) -> PrivacyError {
    PrivacyError::Numerical {
        context: "PLD FFT",
        reason: e.to_string(),
    }
}

type Plans = (Arc<dyn RealToComplex<f64>>, Arc<dyn ComplexToReal<f64>>);

/// Plans by length, each made by a planner of its own (see [`plans`]); only lengths up to
/// [`PLAN_MAX_LEN`] are kept (a forward and inverse plan hold about 2·len complex twiddles,
/// 32 bytes per unit of length: 8 plans of 2^19 are 128 MB at most; longer FFTs cost far more
/// than their planning).
static PLANS: Memo<Plans> = Memo::new(8);
const PLAN_MAX_LEN: usize = 1 << 19;

/// The forward and inverse real FFTs of length `len`, as a fresh planner makes them. A planner
/// kept per thread (issue 30) made the result depend on the lengths planned before: the same
/// PLD, evaluated inside a calibration search and alone, differed in the 11th digit (the golden
/// `account-grid.txt` caught it). So every length is planned by a new planner, and that plan
/// is kept for the length's next use (planning — twiddle factors, the recipe — was 8% of a
/// calibration): the same plan object, so the same bits whatever ran before.
fn plans(len: usize) -> Plans {
    PLANS.get_or_keep(
        len.to_string(),
        || {
            let mut p = RealFftPlanner::<f64>::new();
            (p.plan_fft_forward(len), p.plan_fft_inverse(len))
        },
        |_| len <= PLAN_MAX_LEN,
    )
}

/// Smallest 2^a 3^b ≥ n (fast sizes for `rustfft`).
pub(super) fn next_fast_len(n: usize) -> usize {
    let mut best = n.next_power_of_two();
    let mut p3 = 1usize;
    while p3 < best {
        let mut m = p3;
        while m < n {
            m *= 2;
        }
        best = best.min(m);
        p3 *= 3;
    }
    best
}

/// Index window [lo, hi] of the T-fold convolution of `probs` outside which at most
/// `tail` mass lies, by the Chernoff bound at orders ±k/len, k = 1..20 (`dp_accounting`'s
/// `compute_self_convolve_bounds`, eq. (5) of its supplementary notes) and ±2^j/(len·√T).
pub(super) fn chernoff_bounds(probs: &[f64], t: u64, tail: f64) -> (i64, i64) {
    let n = probs.len();
    let upper = ((n - 1) as u128 * t as u128).min(i64::MAX as u128) as i64;
    let lower = 0i64;
    let tf = t as f64;
    // dp_accounting's orders ±k/len, k = 1..20, plus smaller ones near the optimum
    // ≈ c/(len·√T) for long compositions: any order gives a valid bound, and without them a
    // T = 10^6 composition of a 7-bin PMF got a window 25x wider than needed.
    let small = (1..=7)
        .map(|j| f64::from(1u32 << j) / (n as f64 * tf.sqrt()))
        .filter(|&o| o < 1.0 / n as f64);
    let orders: Vec<f64> = (1..=20)
        .map(|k| k as f64 / n as f64)
        .chain(small)
        .flat_map(|o| [o, -o])
        .collect();
    // log p_i of the positive masses, taken once rather than twice per order (the same
    // values, so the same window to the bit).
    let logs: Vec<(f64, f64)> = probs
        .iter()
        .enumerate()
        .filter(|(_, p)| **p > 0.0)
        .map(|(i, p)| (i as f64, p.ln()))
        .collect();
    let log_2_tail = (2.0 / tail).ln();
    // The upper end depends on the positive orders only and the lower end on the negative
    // ones: each side on its own core, its orders in the same sequence as before (the same
    // window to the bit).
    let (pos, neg): (Vec<f64>, Vec<f64>) = orders.iter().partition(|&&o| o > 0.0);
    let side = |orders: &[f64]| window_side(&logs, orders, tf, log_2_tail, (lower, upper));
    let ((_, upper), (lower, _)) = par::join(logs.len() >= 4096, || side(&pos), || side(&neg));
    (lower, upper.max(lower))
}

/// [`chernoff_bounds`]' window `(lower, upper)` narrowed by `orders`.
fn window_side(
    logs: &[(f64, f64)],
    orders: &[f64],
    tf: f64,
    log_2_tail: f64,
    (mut lower, mut upper): (i64, i64),
) -> (i64, i64) {
    for &order in orders {
        // log Σ p_i e^{order·i}, stably: the largest exponent m, then the sum relative to it.
        let m = logs
            .iter()
            .map(|&(i, lp)| lp + order * i)
            .fold(f64::NEG_INFINITY, f64::max);
        if !m.is_finite() {
            continue;
        }
        // The sum is ≥ 1 (its largest term is e^0), so log_mgf ≥ m and the bound from m
        // alone is a bound on this order's bound, on the side that matters: when it cannot
        // beat the window found so far, neither can the order (skipped without its n
        // exponentials; the window is the same).
        let floor = (tf * m + log_2_tail) / order;
        if order > 0.0 && floor.ceil() as i64 >= upper
            || order < 0.0 && floor.floor() as i64 <= lower
        {
            continue;
        }
        let s: f64 = logs.iter().map(|&(i, lp)| (lp + order * i - m).exp()).sum();
        let log_mgf = m + s.ln();
        let bound = (tf * log_mgf + log_2_tail) / order;
        if !bound.is_finite() {
            continue;
        }
        if order > 0.0 {
            upper = upper.min(bound.ceil() as i64);
        } else {
            lower = lower.max(bound.floor() as i64);
        }
    }
    (lower, upper)
}

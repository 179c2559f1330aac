//! The Rényi DP (moments) accountant.
//!
//! A mechanism is (α, ε(α))-RDP if D_α(M(D) ‖ M(D')) ≤ ε(α) for all neighbours (Mironov 2017,
//! Def. 4). RDP composes additively at each order (Mironov 2017, Prop. 1), so the accountant
//! keeps one value per order and converts to (ε, δ) at the end.
//!
//! Per-event RDP (each function below cites its source and has a hand-worked test):
//! * Gaussian, α/(2z²): Mironov 2017, Prop. 7. Discrete Gaussian: the same bound, Canonne,
//!   Kamath & Steinke 2020, Prop. 5 (½(Δ/σ)²-zCDP for integer sensitivity).
//! * Laplace: Mironov 2017, Prop. 6 (exact). Pure ε-DP events (discrete Laplace, (ε, 0)):
//!   min(ε, αε²/2), Bun & Steinke 2016, Prop. 3.3 and the definition of max-divergence.
//! * Poisson-sampled Gaussian under add/remove-one: the exact RDP of Mironov, Talwar & Zhang
//!   2019 (arXiv:1908.10530), §3.2 (integer α, eq. of A_α) and §3.3 (fractional α), as
//!   computed by `dp_accounting` 0.6.0.
//! * Sampling without replacement (fixed size m of n) under replace-one: Wang, Balle &
//!   Kasiviswanathan 2019 (AISTATS), Thm. 27 of arXiv:1808.00087 for integer α and Cor. 10
//!   (interpolation of the CGF) for fractional α, as computed by `dp_accounting` 0.6.0.
//! * Sampling with replacement (K i.i.d. uniform draws of n, replace-one) — not covered by
//!   `dp_accounting`. We use the minimum of two sound bounds (see [`wr_gaussian_rdp`]).
//!
//! Conversion to (ε, δ): Balle, Barthe, Gaboardi, Hsu & Sato 2020 (arXiv:2004.00010) Prop. 12
//! / Canonne, Kamath & Steinke 2020 eq. (20):
//! ε = r(α) + log((α−1)/α) − (log δ + log α)/(α−1), minimised over the orders.

use std::sync::Arc;

use super::memo::Memo;
pub use super::rdp_wr::wr_gaussian_rdp;
use super::rdp_wr::wr_gaussian_rdp_curve;
use super::sampled_discrete::sampled_discrete_gaussian_rdp;
use super::special::{log_add, log_comb, log_erfc, log_sub_sign, not_nan, round_up};
use super::{Leaf, effective_gaussian, leaves, unsupported};
use crate::error::{PrivacyError, Result};
use crate::event::{Neighbouring, PrivacyEvent, Sampling};
use crate::params::Delta;

const NAME: &str = "rdp";

/// `dp_accounting`'s default orders: 1.1, 1.2, …, 10.9, 11, 12, …, 63, 128, 256, 512, 1024.
pub fn default_orders() -> Vec<f64> {
    let mut o: Vec<f64> = (1..100).map(|x| 1.0 + x as f64 / 10.0).collect();
    o.extend((11..64).map(|x| x as f64));
    o.extend([128.0, 256.0, 512.0, 1024.0]);
    o
}

/// The RDP accountant over a fixed set of orders.
#[derive(Debug, Clone)]
pub struct RdpAccountant {
    orders: Vec<f64>,
    neighbouring: Neighbouring,
}

impl RdpAccountant {
    /// With [`default_orders`].
    pub fn new(neighbouring: Neighbouring) -> Self {
        RdpAccountant {
            orders: default_orders(),
            neighbouring,
        }
    }

    /// With the given orders (each finite and > 1).
    pub fn with_orders(orders: Vec<f64>, neighbouring: Neighbouring) -> Result<Self> {
        if orders.is_empty() {
            return Err(PrivacyError::invalid(
                "orders",
                0.0,
                "need at least one order",
            ));
        }
        for &a in &orders {
            if !(a.is_finite() && a > 1.0) {
                return Err(PrivacyError::invalid(
                    "orders",
                    a,
                    "each order must be finite and > 1",
                ));
            }
        }
        Ok(RdpAccountant {
            orders,
            neighbouring,
        })
    }

    /// The Rényi orders α > 1 at which RDP is tracked; ε is the minimum of the conversion over
    /// them.
    pub fn orders(&self) -> &[f64] {
        &self.orders
    }

    /// The RDP curve of `event` at [`RdpAccountant::orders`].
    pub fn rdp(&self, event: &PrivacyEvent) -> Result<Vec<f64>> {
        let mut total = vec![0.0; self.orders.len()];
        for Leaf { event, count } in leaves(event)? {
            let r = self.memo_leaf_rdp(&event)?;
            for (t, x) in total.iter_mut().zip(r.iter()) {
                *t += count as f64 * x;
            }
        }
        for &t in &total {
            not_nan("RDP composition", t)?;
        }
        Ok(total)
    }

    /// ε at `delta` (Balle et al. 2020, Prop. 12).
    pub fn epsilon(&self, event: &PrivacyEvent, delta: Delta) -> Result<f64> {
        let r = self.rdp(event)?;
        epsilon_from_rdp(&self.orders, &r, delta.get()).map(|(e, _)| e)
    }

    /// δ at `epsilon` (Canonne, Kamath & Steinke 2020, Prop. 12, min with the KL bound
    /// δ ≤ √(1 − e^{−KL}), as `dp_accounting::rdp.compute_delta`).
    pub fn delta(&self, event: &PrivacyEvent, epsilon: f64) -> Result<f64> {
        if !(epsilon.is_finite() && epsilon >= 0.0) {
            return Err(PrivacyError::invalid(
                "epsilon",
                epsilon,
                "must be finite and >= 0",
            ));
        }
        let r = self.rdp(event)?;
        Ok(delta_from_rdp(&self.orders, &r, epsilon))
    }

    /// [`Self::leaf_rdp`], remembered for sampled leaves (issue 30): their curves cost
    /// milliseconds (a series per order), and a ledger asks for the same leaf at every round.
    fn memo_leaf_rdp(&self, event: &PrivacyEvent) -> Result<Arc<Vec<f64>>> {
        static SAMPLED: Memo<Result<Arc<Vec<f64>>>> = Memo::new(1024);
        if !matches!(event, PrivacyEvent::Sampled { .. }) {
            return self.leaf_rdp(event).map(Arc::new);
        }
        let key = format!("{:?}|{:?}|{event:?}", self.neighbouring, self.orders);
        SAMPLED.get_or(key, || self.leaf_rdp(event).map(Arc::new))
    }

    fn leaf_rdp(&self, event: &PrivacyEvent) -> Result<Vec<f64>> {
        let o = &self.orders;
        match event {
            // The discrete Gaussian at σ/Δ₂ has the continuous Gaussian's RDP curve in every
            // dimension (CKS20 Thm 14); its ℓ2 sensitivity is already in σ/Δ₂.
            PrivacyEvent::Gaussian { noise_multiplier }
            | PrivacyEvent::DiscreteGaussian {
                noise_multiplier, ..
            } => {
                let z = *noise_multiplier;
                Ok(o.iter().map(|a| a / (2.0 * z * z)).collect())
            }
            PrivacyEvent::Laplace { noise_multiplier } => o
                .iter()
                .map(|&a| laplace_rdp(1.0 / noise_multiplier, a))
                .collect(),
            PrivacyEvent::DiscreteLaplace { noise_multiplier } => Ok(o
                .iter()
                .map(|&a| pure_dp_rdp(1.0 / noise_multiplier, a))
                .collect()),
            PrivacyEvent::EpsilonDelta { epsilon, delta }
            | PrivacyEvent::TruncatedDiscreteLaplace { epsilon, delta } => {
                if *delta > 0.0 {
                    return Err(unsupported(
                        NAME,
                        event,
                        "an (epsilon, delta) guarantee with delta > 0 has no RDP bound",
                    ));
                }
                Ok(o.iter().map(|&a| pure_dp_rdp(*epsilon, a)).collect())
            }
            PrivacyEvent::Sampled {
                sampling,
                event: inner,
            } => {
                if let PrivacyEvent::DiscreteGaussian {
                    noise_multiplier, ..
                } = inner.as_ref()
                {
                    return o
                        .iter()
                        .map(|&a| {
                            sampled_discrete_gaussian_rdp(sampling, self.neighbouring, *noise_multiplier, a)
                                .unwrap_or_else(|| {
                                    Err(unsupported(
                                        NAME,
                                        event,
                                        "this sampling and neighbouring relation have no sampled discrete Gaussian bound",
                                    ))
                                })
                        })
                        .collect();
                }
                let Some(z) = effective_gaussian(inner)? else {
                    return Err(unsupported(
                        NAME,
                        event,
                        "only Gaussian events can be sampled",
                    ));
                };
                match (sampling, self.neighbouring) {
                    (Sampling::Poisson { rate }, Neighbouring::AddRemove) => o
                        .iter()
                        .map(|&a| poisson_gaussian_rdp(*rate, z, a))
                        .collect(),
                    (
                        Sampling::WithoutReplacement { population, size },
                        Neighbouring::ReplaceOne,
                    ) => {
                        let q = *size as f64 / *population as f64;
                        wor_gaussian_rdp_curve(q, z, o)
                    }
                    (Sampling::WithReplacement { population, draws }, Neighbouring::ReplaceOne) => {
                        wr_gaussian_rdp_curve(*population, *draws, z, o)
                    }
                    (Sampling::Poisson { .. }, Neighbouring::ReplaceOne) => Err(unsupported(
                        NAME,
                        event,
                        "RDP accounts Poisson sampling under add/remove-one neighbouring only; \
                         the pld accountant has its replace-one curve",
                    )),
                    (
                        Sampling::WithoutReplacement { .. } | Sampling::WithReplacement { .. },
                        Neighbouring::AddRemove,
                    ) => Err(unsupported(
                        NAME,
                        event,
                        "fixed-size sampling is accounted under replace-one neighbouring only",
                    )),
                    // Flattened into plain events by `leaves`; reaching here is a bug we
                    // report rather than cost at zero.
                    (Sampling::Disjoint { .. }, _) => Err(unsupported(
                        NAME,
                        event,
                        "disjoint batches must be accounted through composition",
                    )),
                }
            }
            PrivacyEvent::SelfComposed { .. }
            | PrivacyEvent::Composed(_)
            | PrivacyEvent::ShuffledLocal { .. }
            | PrivacyEvent::PvecSum { .. } => Err(unsupported(
                NAME,
                event,
                "composite event reached a leaf rule",
            )),
        }
    }
}

/// Pure ε-DP as RDP: min(ε, αε²/2) (Bun & Steinke 2016, Prop. 3.3; D_α ≤ D_∞ = ε).
pub(crate) fn pure_dp_rdp(eps: f64, a: f64) -> f64 {
    eps.min(a * eps * eps / 2.0)
}

/// The Laplace mechanism with ε = Δ/b, Mironov 2017 Prop. 6 (exact):
/// ε(α) = ε + log(1 + (α−1)(e^{(1−2α)ε} − 1)/(2α−1)) / (α−1), with `dp_accounting`'s Taylor
/// series for α ≤ 1.1.
pub fn laplace_rdp(eps: f64, a: f64) -> Result<f64> {
    let r = if a < 1.1 {
        let c = (eps * (1.0 - 2.0 * a)).exp_m1() / (2.0 * a - 1.0);
        let v = -c * (a - 1.0);
        let mut s = 0.0;
        let mut p = 1.0;
        for k in 1..100 {
            s += p / k as f64;
            p *= v;
        }
        eps + c * s
    } else {
        eps + ((a - 1.0) * (eps * (1.0 - 2.0 * a)).exp_m1() / (2.0 * a - 1.0)).ln_1p() / (a - 1.0)
    };
    not_nan("Laplace RDP", r)
}

/// RDP of the Poisson-sampled Gaussian (rate q, noise multiplier z) at order α under
/// add/remove-one: log(A_α)/(α−1) (Mironov, Talwar & Zhang 2019, §3).
pub fn poisson_gaussian_rdp(q: f64, z: f64, a: f64) -> Result<f64> {
    if q == 0.0 {
        return Ok(0.0);
    }
    if q == 1.0 {
        return Ok(a / (2.0 * z * z));
    }
    let log_a = if a.fract() == 0.0 && a <= 1e6 {
        log_a_int(q, z, a as u64)
    } else {
        log_a_frac(q, z, a)?
    };
    not_nan("Poisson-sampled Gaussian RDP", log_a / (a - 1.0))
}

/// MTZ19 §3.2: A_α = Σ_{i=0}^{α} C(α,i) q^i (1−q)^{α−i} exp((i²−i)/(2σ²)).
fn log_a_int(q: f64, z: f64, a: u64) -> f64 {
    let log1mq = (-q).ln_1p();
    let lq = q.ln();
    let af = a as f64;
    let mut log_a = f64::NEG_INFINITY;
    for i in 0..=a {
        let i_f = i as f64;
        let s =
            log_comb(af, i_f) + i_f * lq + (af - i_f) * log1mq + (i_f * i_f - i_f) / (2.0 * z * z);
        log_a = log_add(log_a, s);
    }
    log_a
}

const MAX_STEPS_LOG_A_FRAC: usize = 1000;

/// MTZ19 §3.3, fractional α: A_α = A₀ + A₁, the integrals over (−∞, z₀] and [z₀, ∞) with
/// z₀ = σ² log(1/q − 1) + ½, each a binomial series with erfc factors. Coefficients enter
/// with their absolute value, which can only increase A_α (as `dp_accounting` 0.6.0 does).
/// Non-convergence is an error.
fn log_a_frac(q: f64, z: f64, a: f64) -> Result<f64> {
    let (mut log_a0, mut log_a1) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
    let s2 = z * z;
    let z0 = s2 * (1.0 / q - 1.0).ln() + 0.5;
    let log1mq = (-q).ln_1p();
    let lq = q.ln();
    let (mut last0, mut last1) = (f64::NEG_INFINITY, f64::NEG_INFINITY);
    let half_ln = 0.5f64.ln();
    for i in 0..MAX_STEPS_LOG_A_FRAC {
        let i_f = i as f64;
        let log_coef = log_comb(a, i_f);
        let j = a - i_f;
        let log_t0 = log_coef + i_f * lq + j * log1mq;
        let log_t1 = log_coef + j * lq + i_f * log1mq;
        let log_e0 = half_ln + log_erfc((i_f - z0) / (std::f64::consts::SQRT_2 * z));
        let log_e1 = half_ln + log_erfc((z0 - j) / (std::f64::consts::SQRT_2 * z));
        let log_s0 = log_t0 + (i_f * i_f - i_f) / (2.0 * s2) + log_e0;
        let log_s1 = log_t1 + (j * j - j) / (2.0 * s2) + log_e1;
        log_a0 = log_add(log_a0, log_s0);
        log_a1 = log_add(log_a1, log_s1);
        let total = log_add(log_a0, log_a1);
        not_nan("Poisson-sampled Gaussian RDP (fractional order)", total)?;
        if log_s0 < last0 && log_s1 < last1 && log_s0.max(log_s1) < total - 30.0 {
            return Ok(total);
        }
        last0 = log_s0;
        last1 = log_s1;
    }
    // Not converged: +∞ is a sound (useless) bound at this order; other orders still count.
    Ok(f64::INFINITY)
}

/// RDP of sampling m of n without replacement (q = m/n) followed by the Gaussian with
/// noise multiplier z, under replace-one (WBK19 Thm 27; Cor. 10 interpolation for
/// fractional α).
pub fn wor_gaussian_rdp(q: f64, z: f64, a: f64) -> Result<f64> {
    wor_gaussian_rdp_with(q, z, a, &WorDiffs::new(z, a))
}

/// The forward differences [`wor_log_a_int`] reads, once per curve (issue 30: O(α²) per order,
/// from z alone). Entry i depends only on the first i + 2 values of the cgf, so the largest
/// order's differences are, bit for bit, those each smaller order computed for itself.
pub(super) struct WorDiffs(Vec<f64>);

impl WorDiffs {
    /// The differences for every order up to `max_order` (only orders ≤ 256 use them).
    pub(super) fn new(z: f64, max_order: f64) -> Self {
        let n = max_order.ceil().clamp(0.0, WOR_MAX_ALPHA as f64) as usize;
        WorDiffs(forward_diffs(|x| x * (x + 1.0) / (2.0 * z * z), n))
    }
}

/// [`wor_gaussian_rdp`] at each of `orders`, the forward differences computed once.
fn wor_gaussian_rdp_curve(q: f64, z: f64, orders: &[f64]) -> Result<Vec<f64>> {
    let diffs = WorDiffs::new(z, orders.iter().copied().fold(0.0, f64::max));
    orders
        .iter()
        .map(|&a| wor_gaussian_rdp_with(q, z, a, &diffs))
        .collect()
}

pub(super) fn wor_gaussian_rdp_with(q: f64, z: f64, a: f64, diffs: &WorDiffs) -> Result<f64> {
    if q == 0.0 {
        return Ok(0.0);
    }
    if q == 1.0 {
        return Ok(a / (2.0 * z * z));
    }
    let r = if a.fract() == 0.0 {
        wor_log_a_int(q, z, a as u64, diffs) / (a - 1.0)
    } else {
        let (f, c) = (a.floor(), a.ceil());
        let x = wor_log_a_int(q, z, f as u64, diffs);
        let y = wor_log_a_int(q, z, c as u64, diffs);
        let t = a - f;
        ((1.0 - t) * x + t * y) / (a - 1.0)
    };
    not_nan("sampled-without-replacement Gaussian RDP", r)
}

/// Orders up to which [`wor_log_a_int`] sums WBK19's exact series.
const WOR_MAX_ALPHA: u64 = 256;

/// WBK19 Thm 27 bound on log E[(p/q)^α] for integer α, ported from `dp_accounting`'s
/// `_compute_rdp_sample_wor_gaussian_int` (exact sum up to α = 256, the simpler
/// 2·e^{(j−1)ε(j)} term beyond). `diffs` must cover α (entries 0..=α) when α ≤ 256.
fn wor_log_a_int(q: f64, z: f64, a: u64, diffs: &WorDiffs) -> f64 {
    if a <= 1 {
        return 0.0;
    }
    let cgf = |x: f64| x * (x + 1.0) / (2.0 * z * z);
    let func = |x: f64| x / (2.0 * z * z);
    let af = a as f64;
    let lq = q.ln();
    let mut log_a = 0.0;
    let log_f2m1 = func(2.0) + (-(-func(2.0)).exp()).ln_1p();
    let first = 2.0 * lq + log_comb(af, 2.0) + (4f64.ln() + log_f2m1).min(func(2.0) + 2f64.ln());
    if a <= WOR_MAX_ALPHA {
        let deltas = &diffs.0;
        for i in 2..=a {
            let s = if i == 2 {
                first
            } else {
                let fi = i as f64;
                let lo = deltas[(2.0 * (fi / 2.0).floor()) as usize - 1];
                let hi = deltas[(2.0 * (fi / 2.0).ceil()) as usize - 1];
                let s = (4f64.ln() + 0.5 * (lo + hi)).min(2f64.ln() + cgf(fi - 1.0));
                s + fi * lq + log_comb(af, fi)
            };
            log_a = log_add(log_a, s);
        }
    } else {
        for i in 2..=a {
            let fi = i as f64;
            let s = if i == 2 {
                first
            } else {
                2f64.ln() + cgf(fi - 1.0) + fi * lq + log_comb(af, fi)
            };
            log_a = log_add(log_a, s);
        }
    }
    log_a
}

/// Log-magnitudes of the forward differences of exp(cgf) (WBK19 Thm 27), a port of
/// `dp_accounting`'s `_get_forward_diffs` with its sign bookkeeping.
fn forward_diffs(cgf: impl Fn(f64) -> f64, n: usize) -> Vec<f64> {
    let mut v = vec![0.0; n + 3];
    let mut sg = vec![true; n + 3];
    let mut deltas = vec![0.0; n + 2];
    for (i, x) in v.iter_mut().enumerate().skip(1) {
        *x = cgf((i - 1) as f64);
    }
    for (i, d) in deltas.iter_mut().enumerate() {
        let m = n + 2 - i;
        for j in 0..m {
            if sg[j] == sg[j + 1] {
                let (s, mag) = log_sub_sign(v[j + 1], v[j]);
                sg[j] = s;
                v[j] = mag;
                if !sg[j + 1] {
                    sg[j] = !sg[j];
                }
            } else {
                v[j] = log_add(v[j], v[j + 1]);
                sg[j] = sg[j + 1];
            }
        }
        *d = v[0];
    }
    deltas
}

/// ε at δ from an RDP curve (Balle et al. 2020 Prop. 12; `dp_accounting.rdp.compute_epsilon`),
/// with the best order. Refuses a non-finite result (no order gave a usable bound).
pub fn epsilon_from_rdp(orders: &[f64], rdp: &[f64], delta: f64) -> Result<(f64, f64)> {
    if !(delta > 0.0 && delta < 1.0) {
        return Err(PrivacyError::invalid("delta", delta, "must lie in (0, 1)"));
    }
    let mut best = (f64::INFINITY, f64::NAN);
    for (&a, &r) in orders.iter().zip(rdp) {
        not_nan("RDP to (epsilon, delta) conversion", r)?;
        if r < 0.0 {
            return Err(PrivacyError::Numerical {
                context: "RDP to (epsilon, delta) conversion",
                reason: format!("negative RDP {r} at order {a}"),
            });
        }
        let e = if delta * delta + (-r).exp_m1() > 0.0 {
            // δ ≤ √(1 − e^{−KL}) already (Pinsker-type bound used by dp_accounting).
            0.0
        } else if a > 1.01 {
            r + (-1.0 / a).ln_1p() - (delta * a).ln() / (a - 1.0)
        } else {
            f64::INFINITY
        };
        if e < best.0 {
            best = (e, a);
        }
    }
    if !best.0.is_finite() {
        return Err(PrivacyError::Numerical {
            context: "RDP to (epsilon, delta) conversion",
            reason: "no order gives a finite epsilon".into(),
        });
    }
    Ok((round_up(best.0.max(0.0)), best.1))
}

/// δ at ε from an RDP curve (`dp_accounting.rdp.compute_delta`), rounded up.
pub fn delta_from_rdp(orders: &[f64], rdp: &[f64], eps: f64) -> f64 {
    let mut best = f64::INFINITY;
    for (&a, &r) in orders.iter().zip(rdp) {
        let mut ld = if r == 0.0 {
            f64::NEG_INFINITY
        } else {
            0.5 * (-(-r).exp()).ln_1p()
        };
        if a > 1.01 {
            let b = (a - 1.0) * (r - eps + (-1.0 / a).ln_1p()) - a.ln();
            ld = ld.min(b);
        }
        best = best.min(ld);
    }
    if best.is_nan() {
        return 1.0;
    }
    round_up(best.exp()).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-300)
    }

    #[test]
    fn gaussian_rdp_and_conversion_by_hand() {
        // z = 1, one release, order 2: ε(2) = 2/2 = 1.
        let acc = RdpAccountant::with_orders(vec![2.0], Neighbouring::AddRemove).unwrap();
        let e = PrivacyEvent::Gaussian {
            noise_multiplier: 1.0,
        };
        assert_eq!(acc.rdp(&e).unwrap(), vec![1.0]);
        // δ = 1e-5: ε = 1 + ln(1/2) − ln(2e-5)/1 = 1 − 0.693147 + 10.819778 = 11.126631
        let eps = acc.epsilon(&e, Delta::new(1e-5).unwrap()).unwrap();
        assert!(
            close(eps, 1.0 + 0.5f64.ln() - (2e-5f64).ln(), 1e-11),
            "{eps}"
        );
        // 10 compositions at order 2: 10 + ln(1/2) − ln(2e-5).
        let eps = acc
            .epsilon(&e.clone().repeated(10), Delta::new(1e-5).unwrap())
            .unwrap();
        assert!(close(eps, 10.0 + 0.5f64.ln() - (2e-5f64).ln(), 1e-11));
    }

    #[test]
    fn poisson_sampled_gaussian_integer_order_by_hand() {
        // MTZ19 A_2 = (1−q)² + 2q(1−q) + q² e^{1/σ²}; q = 0.1, σ = 1:
        // 0.81 + 0.18 + 0.01·e = 1.017182818 → ε(2) = ln(1.017182818) = 0.017036963
        let r = poisson_gaussian_rdp(0.1, 1.0, 2.0).unwrap();
        assert!(
            close(r, (0.99 + 0.01 * std::f64::consts::E).ln(), 1e-13),
            "{r}"
        );
        // A_3 = (1−q)³ + 3q(1−q)² + 3q²(1−q)e^{1/σ²} + q³e^{3/σ²}
        let (q, e1, e3) = (0.1f64, 1f64.exp(), 3f64.exp());
        let a3 = 0.9f64.powi(3) + 3.0 * q * 0.81 + 3.0 * q * q * 0.9 * e1 + q.powi(3) * e3;
        let r = poisson_gaussian_rdp(0.1, 1.0, 3.0).unwrap();
        assert!(close(r, a3.ln() / 2.0, 1e-13));
    }

    #[test]
    fn fractional_orders_lie_between_neighbours() {
        // RDP is non-decreasing in α (Mironov 2017 Prop. 9).
        let lo = poisson_gaussian_rdp(0.01, 1.1, 2.0).unwrap();
        let mid = poisson_gaussian_rdp(0.01, 1.1, 2.5).unwrap();
        let hi = poisson_gaussian_rdp(0.01, 1.1, 3.0).unwrap();
        assert!(lo <= mid && mid <= hi, "{lo} {mid} {hi}");
    }

    #[test]
    fn wor_order_two_by_hand() {
        // WBK19 Thm 27 at α = 2: log(1 + q² C(2,2) min(4(e^{1/σ²}−1), 2e^{1/σ²})) / 1.
        // q = 0.1, σ = 2: e^{0.25} = 1.284025417; min(4·0.284025, 2·1.284025) = 1.1361017
        let r = wor_gaussian_rdp(0.1, 2.0, 2.0).unwrap();
        let want = (1.0 + 0.01 * 4.0 * (0.25f64.exp() - 1.0)).ln();
        assert!(close(r, want, 1e-13), "{r} vs {want}");
    }

    #[test]
    fn curves_share_their_terms_without_changing_a_bit() {
        // Issue 30: the curve functions compute the forward differences and binomial weights
        // once; each order alone (what the accountant did before) must give the same bits.
        let o = default_orders();
        for (n, k, z) in [
            (217, 30, 5.657),
            (1238, 443, 7.53),
            (10, 1, 0.3),
            (1, 3, 2.0),
        ] {
            let curve = wr_gaussian_rdp_curve(n, k, z, &o).unwrap();
            for (&a, c) in o.iter().zip(&curve) {
                let alone = wr_gaussian_rdp(n, k, z, a).unwrap();
                assert_eq!(
                    alone.to_bits(),
                    c.to_bits(),
                    "wr n {n} k {k} z {z} order {a}"
                );
            }
        }
        for (q, z) in [(0.1, 1.0), (30.0 / 217.0, 0.8), (0.5, 3.0)] {
            let curve = wor_gaussian_rdp_curve(q, z, &o).unwrap();
            for (&a, c) in o.iter().zip(&curve) {
                let alone = wor_gaussian_rdp(q, z, a).unwrap();
                assert_eq!(alone.to_bits(), c.to_bits(), "wor q {q} z {z} order {a}");
            }
        }
    }

    #[test]
    fn with_replacement_bounds_by_hand() {
        // One draw (K = 1) from n = 10 is sampling 1 of 10 without replacement.
        for a in [2.0, 3.0, 7.5] {
            let wr = wr_gaussian_rdp(10, 1, 2.0, a).unwrap();
            let wor = wor_gaussian_rdp(0.1, 2.0, a).unwrap();
            assert!(wr <= wor && wr > 0.0);
        }
        // K = 2 of n = 10, z = 1, α = 2, joint-convexity bound:
        // Σ_j Bin(2, 0.1)(j) e^{j²} = 0.81 + 0.18e + 0.01e⁴ = 1.83527...
        let e = std::f64::consts::E;
        let convex = (0.81 + 0.18 * e + 0.01 * e.powi(4)).ln();
        // noise splitting: 2 · ln(1 + 0.01·min(4(e²−1), 2e²)) = 2 ln(1 + 0.01·14.778)
        let split = 2.0 * (1.0 + 0.01 * (2.0 * e * e).min(4.0 * (e * e - 1.0))).ln();
        let r = wr_gaussian_rdp(10, 2, 1.0, 2.0).unwrap();
        assert!(close(r, split.min(convex), 1e-12), "{r} {split} {convex}");
        assert!(close(split, 0.275_661_238_844_028, 1e-12));
        // n = 1: every draw is the record, so sensitivity 2Δ: α·4/(2z²) = 2·4/2 = 4.
        assert!(close(wr_gaussian_rdp(1, 2, 1.0, 2.0).unwrap(), 4.0, 1e-12));
        // Never below the Poisson bound at the same expected rate (sanity, not a theorem
        // we rely on): q = K/n = 0.2.
        assert!(r >= poisson_gaussian_rdp(0.2, 1.0, 2.0).unwrap());
    }

    #[test]
    fn laplace_rdp_by_hand() {
        // Mironov Prop. 6, ε = 1, α = 2: 1 + ln(1 + (e^{−3} − 1)/3) = 1 + ln(0.683262) = 0.619071
        let r = laplace_rdp(1.0, 2.0).unwrap();
        assert!(close(
            r,
            1.0 + (1.0 + ((-3.0f64).exp() - 1.0) / 3.0).ln(),
            1e-14
        ));
    }

    #[test]
    fn unsupported_events_are_refused_by_name() {
        let acc = RdpAccountant::new(Neighbouring::ReplaceOne);
        let e = PrivacyEvent::Gaussian {
            noise_multiplier: 1.0,
        }
        .sampled(Sampling::Poisson { rate: 0.1 });
        let err = acc.epsilon(&e, Delta::new(1e-5).unwrap()).unwrap_err();
        assert!(matches!(
            err,
            PrivacyError::Unsupported {
                accountant: "rdp",
                ..
            }
        ));
        assert!(err.to_string().contains("poisson"), "{err}");
        let e = PrivacyEvent::EpsilonDelta {
            epsilon: 1.0,
            delta: 1e-6,
        };
        assert!(acc.epsilon(&e, Delta::new(1e-5).unwrap()).is_err());
        let e = PrivacyEvent::Laplace {
            noise_multiplier: 1.0,
        }
        .sampled(Sampling::Poisson { rate: 0.1 });
        assert!(
            RdpAccountant::new(Neighbouring::AddRemove)
                .epsilon(&e, Delta::new(1e-5).unwrap())
                .is_err()
        );
    }

    #[test]
    fn delta_and_epsilon_are_consistent() {
        let acc = RdpAccountant::new(Neighbouring::AddRemove);
        let e = PrivacyEvent::Gaussian {
            noise_multiplier: 1.0,
        }
        .sampled(Sampling::Poisson { rate: 0.01 })
        .repeated(1000);
        let eps = acc.epsilon(&e, Delta::new(1e-5).unwrap()).unwrap();
        let d = acc.delta(&e, eps).unwrap();
        assert!(d <= 1.0000001e-5 && d > 0.9e-5, "{d}");
    }
}

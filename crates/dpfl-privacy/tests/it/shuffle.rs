//! P1D / PVEC (Cheu, Joseph, Mao & Peng 2022) and their two transports (issue 15 item 1):
//! the Theorem 3.2 calculator against hand-computed values, bad input, unbiasedness and
//! variance by Monte Carlo, explicit = compact in distribution, permutation invariance, and
//! an exact hockey-stick check of the binomial mechanism against Lemma A.1's δ.
//!
//! Two-sample χ² tests use Wilson–Hilferty's approximation of the χ² quantile,
//! k·(1 − 2/(9k) + z√(2/(9k)))³ with z = 4.7534 (the standard normal's 1 − 10⁻⁶ quantile),
//! accurate to a few percent of the quantile for k ≥ 3; seeds are fixed.

use std::collections::BTreeMap;

use dpfl_privacy::rng::{DpRng, Purpose};
use dpfl_privacy::shuffle::ShuffleError;
use dpfl_privacy::shuffle::params::{P1dParams, PvecParams, Scale};
use dpfl_privacy::shuffle::protocol::{
    Message, P1d, Pvec, ShareSum, compact_round, explicit_round, reveal, share_counts,
    shuffle_messages,
};

fn rng(purpose: Purpose, i: u32) -> DpRng {
    DpRng::from_seed(2026, purpose, i)
}

fn user_rngs(seed: u64, n: usize) -> Vec<DpRng> {
    (0..n as u32)
        .map(|i| DpRng::from_seed(seed, Purpose::Silo, i))
        .collect()
}

fn chi2_quantile_1e6(k: f64) -> f64 {
    let z = 4.753_424;
    let h = 2.0 / (9.0 * k);
    k * (1.0 - h + z * h.sqrt()).powi(3)
}

/// Two-sample χ² on equal-size samples of discrete outcomes (cells with fewer than 10
/// observations in total pooled into one).
fn two_sample_chi2_passes(a: &BTreeMap<i64, u64>, b: &BTreeMap<i64, u64>) -> (f64, f64) {
    let keys: std::collections::BTreeSet<i64> = a.keys().chain(b.keys()).copied().collect();
    let (mut x2, mut cells) = (0.0, 0usize);
    let (mut pa, mut pb) = (0.0, 0.0);
    for k in keys {
        let (ca, cb) = (
            *a.get(&k).unwrap_or(&0) as f64,
            *b.get(&k).unwrap_or(&0) as f64,
        );
        if ca + cb < 10.0 {
            pa += ca;
            pb += cb;
            continue;
        }
        x2 += (ca - cb) * (ca - cb) / (ca + cb);
        cells += 1;
    }
    if pa + pb > 0.0 {
        x2 += (pa - pb) * (pa - pb) / (pa + pb);
        cells += 1;
    }
    (x2, chi2_quantile_1e6((cells - 1) as f64))
}

// ---------------------------------------------------------------- calculator

#[test]
fn theorem_3_2_calculator_matches_hand_values() {
    // n = 1000, d = 10, Δ₂ = 1, ε = 1, δ = 1e-6 (digest §4's example):
    // γ = 1e-6/11 = 9.0909e-8; ε̂ = 1/(18·√ln(1.1e7)) = 1/(18·4.026599) = 0.0137972;
    // g = ⌈max(2√1000, √10, 4)⌉ = ⌈63.25⌉ = 64;
    // 90g²ln(2/γ)/(ε̂²n) = 90·4096·16.9066/(1.90362e-4·1000) = 3.27399e7 → s = 65 479 717,
    // p = 0.49999999; variance bound d·(2/64)²·(n/4 + s n p(1−p)) = 1.598626e8, i.e. a
    // per-coordinate std of 3998 (digest: "≈ 4.0·10³").
    let pv = PvecParams::calibrate(1000, 10, 1.0, 1.0, 1e-6, Scale::Paper).unwrap();
    let c = pv.calibration.unwrap();
    assert!((c.gamma - 9.090_909_090_909e-8).abs() < 1e-18);
    assert!((c.epsilon_hat - 0.013_797_181_2).abs() < 1e-10);
    assert_eq!(pv.p1d.g, 64);
    assert_eq!(pv.p1d.s, 65_479_717);
    assert!((pv.p1d.p - 0.499_999_992_6).abs() < 1e-9);
    let v = pv.variance_bound();
    assert!((v / 1.598_625_927_7e8 - 1.0).abs() < 1e-8, "{v}");
    // Theorem 3.2's closed form: d/4 + 116640·d·ln(2·11/1e-6)·ln(11/1e-6) = 3.197252e8.
    let t = pv.theorem_variance_bound().unwrap();
    assert!((t / 3.197_251_784_5e8 - 1.0).abs() < 1e-8, "{t}");
    assert!(t >= v);
    // Lemma 3.3 worst case: 18ε̂² + 6ε̂√ln(1/γ) = 0.33676 ≤ ε = 1.
    assert!((pv.composed_epsilon().unwrap() - 0.336_759_853).abs() < 1e-8);
    assert_eq!(pv.messages_per_user().unwrap(), 10 * (64 + 65_479_717));

    // Unit scale: g no longer grows with Δ₂ (= 64 at Δ₂ = 1 or 5), the output is scaled by
    // Δ₂, and the variance bound by Δ₂².
    let unit = PvecParams::calibrate(1000, 10, 5.0, 1.0, 1e-6, Scale::Unit).unwrap();
    assert_eq!(unit.p1d.g, 64);
    assert_eq!(unit.p1d.s, pv.p1d.s);
    assert!((unit.variance_bound() / (25.0 * v) - 1.0).abs() < 1e-12);
    let paper5 = PvecParams::calibrate(1000, 10, 5.0, 1.0, 1e-6, Scale::Paper).unwrap();
    assert_eq!(paper5.p1d.g, 317); // ⌈10·√1000⌉ = ⌈316.23⌉
}

#[test]
fn bad_input_is_a_typed_error() {
    use ShuffleError::*;
    let param = |r: Result<PvecParams, ShuffleError>| matches!(r, Err(Parameter(_)));
    assert!(param(PvecParams::calibrate(
        100,
        4,
        1.0,
        15.5,
        1e-6,
        Scale::Unit
    )));
    assert!(param(PvecParams::calibrate(
        100,
        4,
        1.0,
        1.0,
        0.5,
        Scale::Unit
    )));
    assert!(param(PvecParams::calibrate(
        100,
        4,
        1.0,
        0.0,
        1e-6,
        Scale::Unit
    )));
    assert!(param(PvecParams::calibrate(
        100,
        0,
        1.0,
        1.0,
        1e-6,
        Scale::Unit
    )));
    assert!(param(PvecParams::calibrate(
        100,
        4,
        f64::NAN,
        1.0,
        1e-6,
        Scale::Unit
    )));
    assert!(matches!(
        P1dParams::new(10, 1.0, 4, 10, 0.5),
        Err(Parameter(_))
    ));
    assert!(matches!(
        P1dParams::new(10, 1.0, 4, 10, 0.7),
        Err(Parameter(_))
    ));
    assert!(matches!(
        P1dParams::new(10, 1.0, u64::MAX, 1, 0.3),
        Err(Overflow { what: "g + s", .. })
    ));
    assert!(matches!(
        P1dParams::new(1 << 50, 1.0, 1 << 20, 1 << 20, 0.3),
        Err(Overflow { .. })
    ));
    // s beyond u64: ε tiny against a huge g.
    assert!(matches!(
        PvecParams::calibrate(4, 1, 1e12, 1e-6, 1e-6, Scale::Paper),
        Err(Overflow { what: "s", .. })
    ));

    let pv = Pvec::new(PvecParams::with_p1d(2, 3, 1.0, Scale::Paper, 4, 6, 0.3).unwrap()).unwrap();
    let mut r = rng(Purpose::Silo, 0);
    assert!(matches!(
        pv.counts(&[0.1, 0.2], &mut r),
        Err(WrongLength {
            expected: 3,
            got: 2,
            ..
        })
    ));
    assert!(matches!(
        pv.counts(&[0.1, f64::NAN, 0.0], &mut r),
        Err(Parameter(_))
    ));
    let bad_label = vec![Message {
        label: 3,
        bit: true,
    }];
    assert!(matches!(
        pv.analyze_messages(&bad_label),
        Err(LabelOutOfRange { label: 3, d: 3 })
    ));
    // Uneven labels, and a count that is not a multiple of g + s.
    let uneven = vec![Message {
        label: 0,
        bit: true,
    }];
    assert!(matches!(pv.analyze_messages(&uneven), Err(Inconsistent(_))));
    let mut sum = ShareSum::new(3);
    assert!(matches!(
        sum.add(&[1, 2]),
        Err(WrongLength {
            expected: 3,
            got: 2,
            ..
        })
    ));
    assert_eq!(sum.users(), 0);
    assert!(matches!(
        share_counts(&[1, 11, 2], 10, &mut r),
        Err(CountTooLarge {
            label: 1,
            count: 11,
            max: 10,
            ..
        })
    ));
    // 2 users · (4 + 6) = 20 ones at most per label.
    assert!(matches!(
        pv.analyze_counts(&[3, 21, 0], 2),
        Err(CountTooLarge {
            label: 1,
            count: 21,
            max: 20,
            ..
        })
    ));
    let mut other = ShareSum::new(3);
    other.add(&[0, 0, 0]).unwrap();
    assert!(matches!(reveal(&sum, &other), Err(Inconsistent(_))));
}

// ---------------------------------------------------------------- P1D

#[test]
fn p1d_is_unbiased_with_the_stated_variance() {
    // Δ = 2, g = 3, s = 20, p = 0.25. Σx = 4.17; r_i = frac(1.5 x_i) = 0.15, 0.155, 0.95,
    // 0, 0 → Σr(1−r) = 0.305975; s n p(1−p) = 18.75; Var = (2/3)²·19.055975 = 8.469322.
    let params = P1dParams::new(5, 2.0, 3, 20, 0.25).unwrap();
    assert!((params.variance(0.305_975) - 8.469_322_2).abs() < 1e-6);
    let p1d = P1d::new(params).unwrap();
    let xs = [0.1, 0.77, 1.3, 2.0, 0.0];
    let mut rngs = user_rngs(11, 5);
    let trials = 40_000;
    let (mut s1, mut s2) = (0.0, 0.0);
    for _ in 0..trials {
        let ones: u64 = xs
            .iter()
            .zip(rngs.iter_mut())
            .map(|(&x, r)| p1d.count(x, r).unwrap())
            .sum();
        let est = p1d.analyze_count(ones, 5).unwrap();
        s1 += est;
        s2 += est * est;
    }
    let t = trials as f64;
    let mean = s1 / t;
    let var = s2 / t - mean * mean;
    let se = (8.469_322 / t).sqrt();
    assert!((mean - 4.17).abs() < 5.0 * se, "mean {mean}, se {se}");
    assert!((var / 8.469_322 - 1.0).abs() < 0.05, "var {var}");
}

#[test]
fn p1d_explicit_messages_carry_g_plus_s_bits() {
    let p1d = P1d::new(P1dParams::new(3, 1.0, 4, 9, 0.2).unwrap()).unwrap();
    let mut r = rng(Purpose::Silo, 3);
    let mut pool = Vec::new();
    for x in [0.0, 0.5, 1.0] {
        let m = p1d.messages(x, &mut r).unwrap();
        assert_eq!(m.len(), 13);
        pool.extend(m);
    }
    shuffle_messages(&mut pool, &mut rng(Purpose::Shuffle, 0));
    let ones = pool.iter().filter(|m| m.bit).count() as u64;
    let est = p1d.analyze_messages(&pool).unwrap();
    assert_eq!(est, p1d.analyze_count(ones, 3).unwrap());
}

// ---------------------------------------------------------------- PVEC

fn small_pvec() -> Pvec {
    // d = 3, n = 4, Δ₂ = 2 at unit scale (output × 2), g = 5, s = 30, p = 0.2.
    Pvec::new(PvecParams::with_p1d(4, 3, 2.0, Scale::Unit, 5, 30, 0.2).unwrap()).unwrap()
}

fn small_inputs() -> Vec<Vec<f64>> {
    // The last one has norm 5 > Δ₂ = 2 and is clipped to (1.2, −1.6, 0).
    vec![
        vec![0.5, -0.3, 1.0],
        vec![-1.0, 1.0, 0.2],
        vec![0.0, 0.0, 0.0],
        vec![3.0, -4.0, 0.0],
    ]
}

#[test]
fn pvec_compact_is_unbiased_with_the_stated_variance() {
    let pv = small_pvec();
    let inputs = small_inputs();
    let clipped: Vec<Vec<f64>> = inputs
        .iter()
        .map(|x| {
            let n = x.iter().map(|v| v * v).sum::<f64>().sqrt();
            let c = if n > 2.0 { 2.0 / n } else { 1.0 };
            x.iter().map(|v| v * c).collect()
        })
        .collect();
    let want: Vec<f64> = (0..3).map(|j| clipped.iter().map(|x| x[j]).sum()).collect();
    // Per coordinate: u = (x/2 + 1)·g/Δ with Δ = 2 (unit scale), Var = 2²·(Δ/g)²·
    // (Σr(1−r) + s n p(1−p)).
    let var: Vec<f64> = (0..3)
        .map(|j| {
            let rounding: f64 = clipped
                .iter()
                .map(|x| {
                    let u = (x[j] / 2.0 + 1.0) * 5.0 / 2.0;
                    let r = u - u.floor();
                    r * (1.0 - r)
                })
                .sum();
            4.0 * pv.params().p1d.variance(rounding)
        })
        .collect();
    let bound = pv.params().variance_bound();
    assert!(var.iter().sum::<f64>() <= bound && bound < 1.1 * var.iter().sum::<f64>());
    let mut rngs = user_rngs(21, 4);
    let trials = 30_000;
    let mut s1 = [0.0; 3];
    let mut s2 = [0.0; 3];
    for _ in 0..trials {
        let o = compact_round(&pv, &inputs, &mut rngs).unwrap();
        for j in 0..3 {
            s1[j] += o[j];
            s2[j] += o[j] * o[j];
        }
    }
    let t = trials as f64;
    for j in 0..3 {
        let mean = s1[j] / t;
        let v = s2[j] / t - mean * mean;
        let se = (var[j] / t).sqrt();
        assert!(
            (mean - want[j]).abs() < 5.0 * se,
            "coord {j}: {mean} vs {}",
            want[j]
        );
        assert!(
            (v / var[j] - 1.0).abs() < 0.06,
            "coord {j}: var {v} vs {}",
            var[j]
        );
    }
}

#[test]
fn both_transports_give_the_same_output() {
    let pv = small_pvec();
    let inputs = small_inputs();
    // Same user randomness: identical outputs (the shuffler's permutation and the shares
    // cannot change the per-label counts).
    for seed in 0..20 {
        let a = explicit_round(
            &pv,
            &inputs,
            &mut user_rngs(seed, 4),
            &mut DpRng::from_seed(seed, Purpose::Shuffle, 0),
        )
        .unwrap();
        let b = compact_round(&pv, &inputs, &mut user_rngs(seed, 4)).unwrap();
        assert_eq!(a, b);
    }
    // Independent randomness: equal in distribution (two-sample χ² on the joint output of
    // the first two coordinates, which take finitely many values).
    let key = |o: &[f64]| ((o[0] * 1e3).round() as i64) * 1_000_000 + (o[1] * 1e3).round() as i64;
    let (mut ha, mut hb) = (BTreeMap::new(), BTreeMap::new());
    let (mut ra, mut rb) = (user_rngs(101, 4), user_rngs(202, 4));
    let mut sh = DpRng::from_seed(303, Purpose::Shuffle, 0);
    for _ in 0..20_000 {
        let a = explicit_round(&pv, &inputs, &mut ra, &mut sh).unwrap();
        *ha.entry(key(&a)).or_insert(0u64) += 1;
        let b = compact_round(&pv, &inputs, &mut rb).unwrap();
        *hb.entry(key(&b)).or_insert(0u64) += 1;
    }
    let (x2, crit) = two_sample_chi2_passes(&ha, &hb);
    assert!(x2 < crit, "chi2 {x2} >= {crit}");
    // The test can fail: shift one input and the same statistic rejects.
    let mut shifted = inputs.clone();
    shifted[2] = vec![1.5, 1.0, 0.0];
    let mut hc = BTreeMap::new();
    let mut rc = user_rngs(404, 4);
    for _ in 0..20_000 {
        let c = compact_round(&pv, &shifted, &mut rc).unwrap();
        *hc.entry(key(&c)).or_insert(0u64) += 1;
    }
    let (x2, crit) = two_sample_chi2_passes(&ha, &hc);
    assert!(x2 > crit, "shifted input not detected: {x2} < {crit}");
}

#[test]
fn the_analyzer_is_permutation_invariant() {
    let pv = small_pvec();
    let mut rngs = user_rngs(7, 4);
    let mut pool = Vec::new();
    for (x, r) in small_inputs().iter().zip(rngs.iter_mut()) {
        let m = pv.messages(x, r).unwrap();
        assert_eq!(m.len(), 3 * 35);
        for j in 0..3u32 {
            assert_eq!(m.iter().filter(|x| x.label == j).count(), 35);
        }
        pool.extend(m);
    }
    let base = pv.analyze_messages(&pool).unwrap();
    let mut rev = pool.clone();
    rev.reverse();
    assert_eq!(pv.analyze_messages(&rev).unwrap(), base);
    let mut sorted = pool.clone();
    sorted.sort();
    assert_eq!(pv.analyze_messages(&sorted).unwrap(), base);
    for i in 0..5 {
        let mut p = pool.clone();
        shuffle_messages(&mut p, &mut DpRng::from_seed(i, Purpose::Shuffle, 1));
        assert_ne!(p, pool);
        assert_eq!(pv.analyze_messages(&p).unwrap(), base);
    }
}

// ---------------------------------------------------------------- Lemma A.1

fn ln_pmf(m: u64, p: f64, k: i64) -> f64 {
    if k < 0 || k > m as i64 {
        return f64::NEG_INFINITY;
    }
    let (m, k) = (m as f64, k as f64);
    libm::lgamma(m + 1.0) - libm::lgamma(k + 1.0) - libm::lgamma(m - k + 1.0)
        + k * p.ln()
        + (m - k) * (1.0 - p).ln()
}

/// Exact hockey-stick divergence D_{e^ε}(f + Bin(m,p) ‖ f' + Bin(m,p)) with f − f' = shift.
fn hockey_stick(m: u64, p: f64, shift: i64, eps: f64) -> f64 {
    let lo = -shift.abs();
    let hi = m as i64 + shift.abs();
    (lo..=hi)
        .map(|y| {
            let a = ln_pmf(m, p, y - shift).exp();
            let b = ln_pmf(m, p, y).exp();
            (a - eps.exp() * b).max(0.0)
        })
        .sum()
}

#[test]
fn binomial_mechanism_hockey_stick_is_below_lemma_a1_delta() {
    // Lemma A.1: with αmp ≥ 2t and |f − f'| = k ≤ t, D^δ_∞ ≤ k·ln((1+α)/(1−α)) at
    // δ = 2exp(−α²mp/10). Cases (m, p, α, t) with δ_A1 = 9.08e-5, 2.74e-6, 1.99e-5.
    for (m, p, alpha, t) in [
        (2000u64, 0.2, 0.5, 5i64),
        (5000, 0.3, 0.3, 3),
        (400, 0.45, 0.8, 2),
    ] {
        let mp = m as f64 * p;
        assert!(alpha * mp >= 2.0 * t as f64);
        let delta_a1 = 2.0 * (-alpha * alpha * mp / 10.0).exp();
        for k in 1..=t {
            let eps = k as f64 * ((1.0 + alpha) / (1.0 - alpha)).ln();
            for shift in [k, -k] {
                let d = hockey_stick(m, p, shift, eps);
                assert!(d <= delta_a1, "m {m} p {p} shift {shift}: {d} > {delta_a1}");
            }
        }
        // The check has teeth: at a far smaller ε the exact δ exceeds Lemma A.1's.
        let d_small = hockey_stick(m, p, t, 0.01 * ((1.0 + alpha) / (1.0 - alpha)).ln());
        assert!(d_small > delta_a1, "{d_small}");
    }
}

#[test]
fn a_round_split_over_threads_equals_the_explicit_transport() {
    // n·d = 65 536 reaches the threaded path of `compact_round`; the explicit transport is
    // sequential, so equal outputs show the split does not change the result.
    let (n, d) = (64usize, 1024usize);
    let pv = Pvec::new(PvecParams::with_p1d(n as u64, d, 1.0, Scale::Unit, 5, 30, 0.2).unwrap())
        .unwrap();
    let inputs: Vec<Vec<f64>> = (0..n)
        .map(|i| {
            (0..d)
                .map(|j| (((i * 31 + j * 17) % 13) as f64 - 6.0) / 400.0)
                .collect()
        })
        .collect();
    let a = compact_round(&pv, &inputs, &mut user_rngs(5, n)).unwrap();
    let b = explicit_round(
        &pv,
        &inputs,
        &mut user_rngs(5, n),
        &mut DpRng::from_seed(5, Purpose::Shuffle, 0),
    )
    .unwrap();
    assert_eq!(a, b);
}

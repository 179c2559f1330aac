//! Goodness-of-fit tests of every sampler, in the manner of OpenDP: each sampler's draws on a
//! fixed seed pass a one-sample Kolmogorov–Smirnov test (continuous) or Pearson's χ² test
//! (discrete) at significance α = 1e-6 against its exact distribution. The seeds are fixed,
//! so a pass is reproducible; `a_wrong_distribution_is_rejected` shows the tests can fail.
//!
//! Critical values:
//! * KS: P(√n·D_n > x) → 2 Σ_{k≥1} (−1)^{k−1} e^{−2k²x²} (Kolmogorov 1933); at α = 1e-6 the
//!   first term alone is exact to ~α⁴, so x_α = √(ln(2/α)/2) = 2.6934, reject if
//!   D_n > x_α/√n (n ≥ 10⁴ here, where the asymptotic form is accurate; Marsaglia, Tsang &
//!   Wang 2003).
//! * χ²: the p-value is the regularized upper incomplete gamma Q(k/2, X²/2) for k = bins − 1
//!   degrees of freedom (Pearson 1900), computed by series / continued fraction (Numerical
//!   Recipes, 3rd ed., §6.2); bins with expected count < 5 are pooled.

use dpfl_privacy::discrete::{DiscreteGaussian, DiscreteLaplace};
use dpfl_privacy::mechanism::{GaussianMechanism, GaussianNoise, VectorMechanism};
use dpfl_privacy::qtdl::{StochasticQuantizer, TruncatedDiscreteLaplace};
use dpfl_privacy::rng::{DpRng, Purpose};
use dpfl_privacy::sampler;

const ALPHA: f64 = 1e-6;

fn rng(seed: u64) -> DpRng {
    DpRng::from_seed(seed, Purpose::Silo, 0)
}

// ---------------------------------------------------------------- statistics

/// Kolmogorov's critical value for √n·D at level α (first term of the series).
fn ks_critical(alpha: f64) -> f64 {
    ((2.0 / alpha).ln() / 2.0).sqrt()
}

/// max_x |F_n(x) − F(x)| over the sample.
fn ks_statistic(mut xs: Vec<f64>, cdf: impl Fn(f64) -> f64) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len() as f64;
    xs.iter()
        .enumerate()
        .map(|(i, &x)| {
            let f = cdf(x);
            (f - i as f64 / n).max((i + 1) as f64 / n - f)
        })
        .fold(0.0, f64::max)
}

fn assert_ks(name: &str, xs: Vec<f64>, cdf: impl Fn(f64) -> f64) {
    let n = xs.len() as f64;
    let d = ks_statistic(xs, cdf);
    let crit = ks_critical(ALPHA) / n.sqrt();
    assert!(
        d <= crit,
        "{name}: KS D = {d:.5} > {crit:.5} (alpha = {ALPHA})"
    );
}

fn normal_cdf(x: f64, sigma: f64) -> f64 {
    0.5 * libm::erfc(-x / (sigma * std::f64::consts::SQRT_2))
}

/// Regularized lower incomplete gamma P(a, x) (NR §6.2: series for x < a + 1, else 1 − CF).
fn gamma_p(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let ln_pre = a * x.ln() - x - libm::lgamma(a);
    if x < a + 1.0 {
        let (mut sum, mut term, mut ap) = (1.0 / a, 1.0 / a, a);
        for _ in 0..10_000 {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * 1e-16 {
                break;
            }
        }
        sum * ln_pre.exp()
    } else {
        1.0 - gamma_q_cf(a, x, ln_pre)
    }
}

/// Q(a, x) by Lentz's continued fraction (NR eq. 6.2.7).
fn gamma_q_cf(a: f64, x: f64, ln_pre: f64) -> f64 {
    let tiny = 1e-300;
    let mut b = x + 1.0 - a;
    let mut c = 1.0 / tiny;
    let mut d = 1.0 / b;
    let mut h = d;
    for i in 1..10_000 {
        let an = -(i as f64) * (i as f64 - a);
        b += 2.0;
        d = an * d + b;
        if d.abs() < tiny {
            d = tiny;
        }
        c = b + an / c;
        if c.abs() < tiny {
            c = tiny;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-16 {
            break;
        }
    }
    ln_pre.exp() * h
}

/// P(χ²_k > x).
fn chi2_sf(k: f64, x: f64) -> f64 {
    let (a, y) = (k / 2.0, x / 2.0);
    if y < a + 1.0 {
        1.0 - gamma_p(a, y)
    } else {
        gamma_q_cf(a, y, a * y.ln() - y - libm::lgamma(a))
    }
}

/// Pearson's χ² p-value of `counts` against probabilities `probs` (which sum to 1 up to the
/// tail mass in the last entry), pooling adjacent bins with expected count < 5.
fn chi2_pvalue(counts: &[u64], probs: &[f64]) -> f64 {
    assert_eq!(counts.len(), probs.len());
    let n: u64 = counts.iter().sum();
    let mut pooled: Vec<(f64, f64)> = Vec::new(); // (observed, expected)
    let (mut o, mut e) = (0.0, 0.0);
    for (&c, &p) in counts.iter().zip(probs) {
        o += c as f64;
        e += p * n as f64;
        if e >= 5.0 {
            pooled.push((o, e));
            (o, e) = (0.0, 0.0);
        }
    }
    if e > 0.0 || o > 0.0 {
        match pooled.last_mut() {
            Some(last) => {
                last.0 += o;
                last.1 += e;
            }
            None => pooled.push((o, e)),
        }
    }
    assert!(pooled.len() >= 2, "too few bins");
    let x2: f64 = pooled.iter().map(|(o, e)| (o - e) * (o - e) / e).sum();
    chi2_sf((pooled.len() - 1) as f64, x2)
}

fn assert_chi2(name: &str, counts: &[u64], probs: &[f64]) {
    let p = chi2_pvalue(counts, probs);
    assert!(p >= ALPHA, "{name}: chi-square p-value {p:.3e} < {ALPHA}");
}

/// Counts of integer draws on [lo, hi], with everything outside pooled into the end bins.
fn int_counts(draws: impl Iterator<Item = i64>, lo: i64, hi: i64) -> Vec<u64> {
    let mut c = vec![0u64; (hi - lo + 1) as usize];
    for y in draws {
        c[(y.clamp(lo, hi) - lo) as usize] += 1;
    }
    c
}

/// Probabilities of a pmf on ℤ (given up to normalisation, summed over |y| ≤ `support`) on
/// [lo, hi], with the tails folded into the end bins as `int_counts` does.
fn int_probs(w: impl Fn(i64) -> f64, lo: i64, hi: i64, support: i64) -> Vec<f64> {
    let z: f64 = (-support..=support).map(&w).sum();
    let mut p: Vec<f64> = (lo..=hi).map(|y| w(y) / z).collect();
    p[0] += (-support..lo).map(&w).sum::<f64>() / z;
    let last = p.len() - 1;
    p[last] += (hi + 1..=support).map(&w).sum::<f64>() / z;
    p
}

// ---------------------------------------------------------------- self-checks of the tools

#[test]
fn statistics_helpers_match_hand_values() {
    // x_α = √(ln(2·10⁶)/2) = √(14.508658/2) = √7.254329 = 2.693386.
    assert!((ks_critical(1e-6) - 2.693_386).abs() < 1e-6);
    // χ²₁ survival at 3.841459 is 0.05; χ²₁₀ at 18.307038 is 0.05; χ²₂ at x is e^{−x/2}.
    assert!((chi2_sf(1.0, 3.841_459) - 0.05).abs() < 1e-6);
    assert!((chi2_sf(10.0, 18.307_038) - 0.05).abs() < 1e-6);
    assert!((chi2_sf(2.0, 7.0) - (-3.5f64).exp()).abs() < 1e-12);
    assert!((chi2_sf(4.0, 1.0) - 1.5 * (-0.5f64).exp()).abs() < 1e-12);
}

// ---------------------------------------------------------------- continuous samplers

#[test]
fn continuous_gaussian_mechanism_noise_passes_ks() {
    let m = GaussianMechanism::new(1.7, 1.0).unwrap();
    let mut v = vec![0.0; 50_000];
    m.privatize(&mut v, &mut rng(11));
    assert_ks("Gaussian mechanism", v, |x| normal_cdf(x, 1.7));
}

#[test]
fn standard_normals_and_uniforms_pass_ks() {
    let mut r = rng(12);
    assert_ks(
        "standard normal",
        sampler::standard_normals(&mut r, 50_000),
        |x| normal_cdf(x, 1.0),
    );
    assert_ks("uniform", sampler::uniforms(&mut r, 50_000), |x| {
        x.clamp(0.0, 1.0)
    });
}

// ---------------------------------------------------------------- exact integer samplers

#[test]
fn discrete_gaussian_passes_chi2() {
    for (seed, sigma) in [(21u64, 0.6), (22, 3.0), (23, 25.5)] {
        let g = DiscreteGaussian::new(sigma).unwrap();
        let mut r = rng(seed);
        let hi = (5.0 * sigma).ceil() as i64 + 1;
        let counts = int_counts((0..60_000).map(|_| g.sample(&mut r)), -hi, hi);
        let probs = int_probs(
            |y| (-(y * y) as f64 / (2.0 * sigma * sigma)).exp(),
            -hi,
            hi,
            40 * hi,
        );
        assert_chi2(
            &format!("discrete Gaussian sigma = {sigma}"),
            &counts,
            &probs,
        );
    }
}

#[test]
fn discrete_gaussian_mechanism_passes_chi2_on_its_grid() {
    // γ = 1/4, σ/γ = 2 before the (tiny, d = 1) sensitivity rescaling: noise/γ ~ N_ℤ(0, σ'²).
    let noise = GaussianNoise::DiscreteGaussian { granularity: 0.25 };
    let m = GaussianMechanism::with_noise(noise, 0.5, 100.0, 1).unwrap();
    let s = m.sigma() / 0.25;
    let mut r = rng(24);
    let draws = (0..60_000).map(|_| {
        let mut v = [0.0];
        m.privatize(&mut v, &mut r);
        (v[0] / 0.25) as i64
    });
    let counts = int_counts(draws, -12, 12);
    let probs = int_probs(|y| (-(y * y) as f64 / (2.0 * s * s)).exp(), -12, 12, 400);
    assert_chi2("discrete Gaussian mechanism", &counts, &probs);
}

#[test]
fn discrete_laplace_passes_chi2() {
    // Scales 2.5 = 5/2 and 0.5 = 1/2: P[y] ∝ e^{−|y|/b}.
    for (seed, t, s) in [(31u64, 5u64, 2u64), (32, 1, 2), (33, 40, 1)] {
        let b = t as f64 / s as f64;
        let l = DiscreteLaplace::new(t, s).unwrap();
        let mut r = rng(seed);
        let hi = (8.0 * b).ceil() as i64 + 1;
        let counts = int_counts((0..60_000).map(|_| l.sample(&mut r)), -hi, hi);
        let probs = int_probs(|y| (-(y.abs() as f64) / b).exp(), -hi, hi, 60 * hi);
        assert_chi2(&format!("discrete Laplace scale {b}"), &counts, &probs);
    }
}

#[test]
fn binomial_and_bernoulli_pass_chi2() {
    let mut r = rng(41);
    let (n, p) = (20u64, 0.3);
    let mut counts = vec![0u64; 21];
    for _ in 0..60_000 {
        counts[sampler::binomial(&mut r, n, p).unwrap() as usize] += 1;
    }
    let mut probs = Vec::new();
    let mut c = 1.0f64; // C(20, k)
    for k in 0..=20 {
        if k > 0 {
            c = c * (n - k + 1) as f64 / k as f64;
        }
        probs.push(c * p.powi(k as i32) * (1.0 - p).powi((n - k) as i32));
    }
    assert_chi2("binomial(20, 0.3)", &counts, &probs);

    let hits = (0..60_000)
        .filter(|_| sampler::bernoulli(&mut r, 0.3))
        .count() as u64;
    assert_chi2("bernoulli(0.3)", &[hits, 60_000 - hits], &[0.3, 0.7]);
}

/// TDL(m, α) draws on their whole support against the exact pmf (DP-NormFedAvg eq. 3): the
/// paper's FMNIST settings (α·m ≈ 1e−4 and 5e−3, uniform-proposal path), a moderate αm = 1,
/// and a steep α = 0.5 (discrete-Laplace-proposal path).
#[test]
fn truncated_discrete_laplace_passes_chi2() {
    for (seed, m, alpha, n) in [
        (71u64, 9u64, 1.512e-5, 40_000usize),
        (72, 413, 1.12e-5, 60_000),
        (73, 100, 0.01, 60_000),
        (74, 30, 0.5, 60_000),
    ] {
        let t = TruncatedDiscreteLaplace::new(m, alpha).unwrap();
        let mut r = rng(seed);
        let hi = m as i64;
        let counts = int_counts((0..n).map(|_| t.sample(&mut r)), -hi, hi);
        let probs: Vec<f64> = (-hi..=hi).map(|y| t.pmf(y)).collect();
        assert_chi2(&format!("TDL({m}, {alpha})"), &counts, &probs);
    }
}

/// The split path of the exact TDL sampler (αm > 1: J = Q·2^l + R, R uniform on [0, 2^l)
/// accepted with e^{−αR}, Q counted by Bernoulli(e^{−α2^l}) trials; `qtdl::tdl` module doc)
/// through `fill`, whose draws share ChaCha20 words: m = 3000, α = 0.002 (αm = 6; l = 5,
/// γ = 0.064, four-bit trials), m = 2000, α = 2^−10 (γ = 1/8 exactly: every field 1 is a
/// tie decided without further bits), and a steep α = 1.3 (l = 0, general trials), each on
/// its whole support against the exact pmf. The same draws are rejected against α·1.05 and
/// against m = 2900, so the test can fail at this sample size.
#[test]
fn truncated_discrete_laplace_split_path_passes_chi2_through_fill() {
    for (seed, m, alpha, n) in [
        (77u64, 3000u64, 0.002, 200_000usize),
        (75, 2000, 1.0 / 1024.0, 400_000),
        (78, 40, 1.3, 60_000),
    ] {
        let t = TruncatedDiscreteLaplace::new(m, alpha).unwrap();
        let mut out = vec![0i64; n];
        t.fill(&mut rng(seed), &mut out);
        let hi = m as i64;
        assert!(out.iter().all(|y| y.abs() <= hi));
        let counts = int_counts(out.iter().copied(), -hi, hi);
        let probs: Vec<f64> = (-hi..=hi).map(|y| t.pmf(y)).collect();
        assert_chi2(&format!("TDL({m}, {alpha}) by fill"), &counts, &probs);
        let steeper: Vec<f64> = (-hi..=hi)
            .map(|y| {
                TruncatedDiscreteLaplace::new(m, alpha * 1.05)
                    .unwrap()
                    .pmf(y)
            })
            .collect();
        // Pooled into 41 bins (the test's power is in the slope, not in single values).
        let width = (2 * m as usize + 1).div_ceil(41);
        let pool = |v: &[f64]| {
            let mut p = vec![0.0; 41];
            for (i, x) in v.iter().enumerate() {
                p[i / width] += x;
            }
            p
        };
        let pooled: Vec<u64> = pool(&counts.iter().map(|&c| c as f64).collect::<Vec<_>>())
            .iter()
            .map(|&c| c as u64)
            .collect();
        assert!(
            chi2_pvalue(&pooled, &pool(&steeper)) < ALPHA,
            "alpha x 1.05 not rejected"
        );
    }
    // Truncation: the draws of m = 3000 against the law cut at 2900 (mass 1.4e−3 beyond).
    let t = TruncatedDiscreteLaplace::new(3000, 0.002).unwrap();
    let mut out = vec![0i64; 200_000];
    t.fill(&mut rng(79), &mut out);
    let counts = int_counts(out.iter().copied(), -3000, 3000);
    let cut = TruncatedDiscreteLaplace::new(2900, 0.002).unwrap();
    let probs: Vec<f64> = (-3000..=3000).map(|y| cut.pmf(y)).collect();
    assert!(
        chi2_pvalue(&counts, &probs) < ALPHA,
        "m = 2900 not rejected"
    );
}

/// The uniform path through `fill`'s fast lane (bulk keystream, 10-bit first chunk of the
/// acceptance test read with Lemire's index; `qtdl::tdl` module doc): the paper's FMNIST
/// (m, α) at s = 2^6 and 2^12, and αm = 1 (m = 10, α = 0.1: the largest acceptance thresholds
/// the path takes, so the lane's fallback runs often), each on its whole support against the
/// exact pmf. At αm = 1 the same draws are rejected against α·1.05 (non-centrality ≈ 220 at
/// this n against a 1e−6 critical value of ≈ 58 on 20 degrees of freedom), so the test can
/// fail.
#[test]
fn truncated_discrete_laplace_uniform_path_passes_chi2_through_fill() {
    for (seed, m, alpha, n) in [
        (80u64, 9u64, 1.51e-5, 200_000usize),
        (81, 413, 1.12e-5, 400_000),
        (82, 10, 0.1, 1_000_000),
    ] {
        let t = TruncatedDiscreteLaplace::new(m, alpha).unwrap();
        let mut out = vec![0i64; n];
        t.fill(&mut rng(seed), &mut out);
        let hi = m as i64;
        assert!(out.iter().all(|y| y.abs() <= hi));
        let counts = int_counts(out.iter().copied(), -hi, hi);
        let probs: Vec<f64> = (-hi..=hi).map(|y| t.pmf(y)).collect();
        assert_chi2(&format!("TDL({m}, {alpha}) by fill"), &counts, &probs);
        if m == 10 {
            let wrong = TruncatedDiscreteLaplace::new(m, alpha * 1.05).unwrap();
            let steeper: Vec<f64> = (-hi..=hi).map(|y| wrong.pmf(y)).collect();
            assert!(
                chi2_pvalue(&counts, &steeper) < ALPHA,
                "alpha x 1.05 not rejected"
            );
        }
    }
}

/// A hand-computed case of the split path with general trials: TDL(3, 1/2) (αm = 1.5, l = 0,
/// Q counted by Bernoulli(e^{−1/2}) trials). Z = 1 + 2(e^{−1/2} + e^{−1} + e^{−3/2})
/// = 1 + 2(0.606531 + 0.367879 + 0.223130) = 3.395081, so P[0] = 0.294544, P[±1] = 0.178650,
/// P[±2] = 0.108357, P[±3] = 0.065722; 200,000 draws by `fill` and 20,000 by `sample` against
/// these numbers (not the crate's pmf).
#[test]
fn truncated_discrete_laplace_split_path_matches_hand_computed_pmf() {
    let hand = [
        0.065722, 0.108357, 0.178650, 0.294544, 0.178650, 0.108357, 0.065722,
    ];
    assert!((hand.iter().sum::<f64>() - 1.0).abs() < 3e-6);
    let probs: Vec<f64> = hand.iter().map(|p| p / hand.iter().sum::<f64>()).collect();
    let t = TruncatedDiscreteLaplace::new(3, 0.5).unwrap();
    let mut out = vec![0i64; 200_000];
    let mut r = rng(83);
    t.fill(&mut r, &mut out);
    assert_chi2(
        "TDL(3, 0.5) by fill",
        &int_counts(out.iter().copied(), -3, 3),
        &probs,
    );
    let counts = int_counts((0..20_000).map(|_| t.sample(&mut r)), -3, 3);
    assert_chi2("TDL(3, 0.5) by sample", &counts, &probs);
}

/// TDL at dpfl's corrected m for FMNIST s = 2^12 (m = 1,993,383, α = 1.12e−5, per-round
/// δ = 1e−9: the noise the reproductions actually draw, on the Laplace-proposal path with a
/// support far too wide to tabulate): 60,000 draws in 64 equal-width bins over [−m, m], each
/// bin's probability the exact pmf summed over it. The same draws against α·1.05 are rejected,
/// so the test can fail at this sample size.
#[test]
fn truncated_discrete_laplace_at_the_corrected_m_passes_binned_chi2() {
    let (m, alpha, n, bins) = (1_993_383u64, 1.12e-5, 60_000usize, 64i64);
    let t = TruncatedDiscreteLaplace::new(m, alpha).unwrap();
    let hi = m as i64;
    let width = (2 * hi + bins) / bins; // ⌈(2m + 1)/bins⌉
    let bin = |y: i64| ((y + hi) / width) as usize;
    let mut r = rng(76);
    let mut counts = vec![0u64; bins as usize];
    for _ in 0..n {
        let y = t.sample(&mut r);
        assert!(y.abs() <= hi, "draw {y} outside the support");
        counts[bin(y)] += 1;
    }
    let binned = |w: &dyn Fn(i64) -> f64| {
        let mut p = vec![0.0; bins as usize];
        let mut z = 0.0;
        for y in -hi..=hi {
            let v = w(y);
            p[bin(y)] += v;
            z += v;
        }
        p.iter().map(|v| v / z).collect::<Vec<f64>>()
    };
    let probs = binned(&|y| t.pmf(y));
    assert_chi2("TDL(1993383, 1.12e-5)", &counts, &probs);
    let wrong = binned(&|y| (-1.05 * alpha * y.abs() as f64).exp());
    assert!(
        chi2_pvalue(&counts, &wrong) < ALPHA,
        "alpha x 1.05 not rejected"
    );
    // The split path's bulk lane (issue 14, session 8): 10^6 draws by `fill`, where α·1.01
    // is rejected too.
    let mut out = vec![0i64; 1_000_000];
    t.fill(&mut rng(84), &mut out);
    assert!(out.iter().all(|y| y.abs() <= hi));
    let mut counts = vec![0u64; bins as usize];
    for &y in &out {
        counts[bin(y)] += 1;
    }
    assert_chi2("TDL(1993383, 1.12e-5) by fill", &counts, &probs);
    let wrong = binned(&|y| (-1.01 * alpha * y.abs() as f64).exp());
    assert!(
        chi2_pvalue(&counts, &wrong) < ALPHA,
        "alpha x 1.01 not rejected"
    );
}

/// Q_s's two outcomes per coordinate: P[b + 1] = s·u − b (DP-NormFedAvg Algorithm 1).
#[test]
fn stochastic_quantizer_passes_chi2() {
    let q = StochasticQuantizer::new(4).unwrap();
    let us = [0.3, -0.77, 0.9, -1.0 / 3.0, 0.01];
    let mut r = rng(75);
    let n = 30_000;
    let input: Vec<f64> = us.iter().copied().cycle().take(us.len() * n).collect();
    let mut out = Vec::new();
    q.quantize(&input, &mut r, &mut out).unwrap();
    for (i, &u) in us.iter().enumerate() {
        let x = u * 4.0;
        let b = x.floor() as i64;
        let up = out
            .iter()
            .skip(i)
            .step_by(us.len())
            .filter(|&&v| v == b + 1)
            .count() as u64;
        let down = out
            .iter()
            .skip(i)
            .step_by(us.len())
            .filter(|&&v| v == b)
            .count() as u64;
        assert_eq!(up + down, n as u64, "u = {u}: values outside {{b, b+1}}");
        let p_up = x - b as f64;
        assert_chi2(&format!("Q_4({u})"), &[down, up], &[1.0 - p_up, p_up]);
    }
}

// ---------------------------------------------------------------- record and silo samplers

/// Index of a sorted k-subset of {0..n−1} in a bitmask table.
fn mask(idx: &[usize]) -> usize {
    idx.iter().fold(0, |m, &i| m | 1 << i)
}

fn subset_probs(n: usize, p_of: impl Fn(usize) -> f64) -> Vec<f64> {
    (0..1usize << n).map(p_of).collect()
}

#[test]
fn with_replacement_draws_are_iid_uniform() {
    // K = 3 of n = 5: the ordered triple is uniform on 125 outcomes.
    let s = sampler::WithReplacement::new(5, 3).unwrap();
    let mut r = rng(51);
    let mut idx = Vec::new();
    let mut counts = vec![0u64; 125];
    for _ in 0..60_000 {
        s.draw(&mut r, &mut idx);
        counts[idx[0] * 25 + idx[1] * 5 + idx[2]] += 1;
    }
    assert_chi2("with replacement", &counts, &[1.0 / 125.0; 125]);
}

#[test]
fn without_replacement_and_choose_subset_are_uniform_over_subsets() {
    // C(6, 3) = 20 subsets, each 1/20.
    let s = sampler::WithoutReplacement::new(6, 3).unwrap();
    let mut r = rng(52);
    let mut idx = Vec::new();
    let mut counts = vec![0u64; 64];
    for _ in 0..40_000 {
        s.draw(&mut r, &mut idx);
        counts[mask(&idx)] += 1;
    }
    let probs = subset_probs(6, |m| if m.count_ones() == 3 { 0.05 } else { 0.0 });
    let (c, p): (Vec<u64>, Vec<f64>) = counts.iter().zip(&probs).filter(|(_, p)| **p > 0.0).unzip();
    assert_eq!(counts.iter().sum::<u64>(), c.iter().sum::<u64>());
    assert_chi2("without replacement", &c, &p);

    // Participation: M = 2 of N = 6 silos, C(6, 2) = 15 subsets.
    let mut counts = vec![0u64; 64];
    for _ in 0..30_000 {
        sampler::choose_subset(&mut r, 6, 2, &mut idx).unwrap();
        counts[mask(&idx)] += 1;
    }
    let probs = subset_probs(6, |m| if m.count_ones() == 2 { 1.0 / 15.0 } else { 0.0 });
    let (c, p): (Vec<u64>, Vec<f64>) = counts.iter().zip(&probs).filter(|(_, p)| **p > 0.0).unzip();
    assert_eq!(counts.iter().sum::<u64>(), c.iter().sum::<u64>());
    assert_chi2("choose_subset", &c, &p);
}

#[test]
fn poisson_and_bernoulli_subsets_have_product_probabilities() {
    // n = 5, q = 0.3: P[S] = 0.3^|S| 0.7^(5−|S|) over 32 subsets.
    let s = sampler::Poisson::new(5, 0.3).unwrap();
    let mut r = rng(53);
    let mut idx = Vec::new();
    let mut counts = vec![0u64; 32];
    for _ in 0..60_000 {
        s.draw(&mut r, &mut idx);
        counts[mask(&idx)] += 1;
    }
    let pr = |q: f64, n: i32| {
        move |m: usize| q.powi(m.count_ones() as i32) * (1.0 - q).powi(n - m.count_ones() as i32)
    };
    assert_chi2("Poisson", &counts, &subset_probs(5, pr(0.3, 5)));

    let mut counts = vec![0u64; 16];
    for _ in 0..40_000 {
        sampler::bernoulli_subset(&mut r, 4, 0.6, &mut idx).unwrap();
        counts[mask(&idx)] += 1;
    }
    assert_chi2("bernoulli_subset", &counts, &subset_probs(4, pr(0.6, 4)));
}

/// Rank of a permutation of {0..n−1} in lexicographic order (Lehmer code).
fn perm_rank(p: &[usize]) -> usize {
    let n = p.len();
    let mut rank = 0;
    for i in 0..n {
        let smaller = p[i + 1..].iter().filter(|&&x| x < p[i]).count();
        rank = rank * (n - i) + smaller;
    }
    rank
}

#[test]
fn permutations_and_disjoint_batches_are_uniform() {
    let mut r = rng(54);
    // shuffle of 4 items: 24 permutations.
    let mut counts = vec![0u64; 24];
    for _ in 0..48_000 {
        let mut items = [0usize, 1, 2, 3];
        sampler::shuffle(&mut r, &mut items);
        counts[perm_rank(&items)] += 1;
    }
    assert_chi2("shuffle", &counts, &[1.0 / 24.0; 24]);

    // Disjoint batches of K = 2 from n = 5: the two batches are the first four entries of a
    // uniform permutation, 5·4·3·2 = 120 equally likely ordered outcomes.
    let mut counts = vec![0u64; 120];
    for _ in 0..60_000 {
        let mut b = sampler::DisjointBatches::new(5, 2, &mut r).unwrap();
        let mut seq = Vec::new();
        while let Some(batch) = b.next_batch() {
            seq.extend_from_slice(batch);
        }
        let missing = (0..5).find(|i| !seq.contains(i)).unwrap();
        seq.push(missing);
        counts[perm_rank(&seq)] += 1;
    }
    assert_chi2("disjoint batches", &counts, &[1.0 / 120.0; 120]);

    // uniform_int on {3..9}.
    let counts = int_counts(
        (0..35_000).map(|_| sampler::uniform_int(&mut r, 3, 9).unwrap() as i64),
        3,
        9,
    );
    assert_chi2("uniform_int", &counts, &[1.0 / 7.0; 7]);
}

// ---------------------------------------------------------------- the tests can fail

#[test]
fn a_wrong_distribution_is_rejected() {
    // Discrete Gaussian σ = 3 tested as if σ were 3.15 (5% off), and Gaussian noise of σ = 1.7
    // tested against 1.9: both must be rejected at α = 1e-6 with these sample sizes.
    let g = DiscreteGaussian::new(3.0).unwrap();
    let mut r = rng(61);
    let counts = int_counts((0..60_000).map(|_| g.sample(&mut r)), -16, 16);
    let wrong = int_probs(
        |y| (-(y * y) as f64 / (2.0 * 3.15 * 3.15)).exp(),
        -16,
        16,
        640,
    );
    assert!(chi2_pvalue(&counts, &wrong) < ALPHA);

    // TDL(30, 0.5) tested as if α were 0.45.
    let t = TruncatedDiscreteLaplace::new(30, 0.5).unwrap();
    let wrong = TruncatedDiscreteLaplace::new(30, 0.45).unwrap();
    let mut r = rng(63);
    let counts = int_counts((0..60_000).map(|_| t.sample(&mut r)), -30, 30);
    let probs: Vec<f64> = (-30..=30).map(|y| wrong.pmf(y)).collect();
    assert!(chi2_pvalue(&counts, &probs) < ALPHA);

    let m = GaussianMechanism::new(1.7, 1.0).unwrap();
    let mut v = vec![0.0; 50_000];
    m.privatize(&mut v, &mut rng(62));
    let d = ks_statistic(v, |x| normal_cdf(x, 1.9));
    assert!(d > ks_critical(ALPHA) / (50_000f64).sqrt(), "D = {d}");
}

// ---------------------------------------------------------------- table Binomial (issue 15)

/// ln P(Bin(n, p) = k) by log-gamma: independent of the sampler's ratio recurrence. At
/// n = 10⁸ lgamma's absolute error (~2e-7) gives a relative pmf error ~1e-6, far below what
/// 10⁶ draws can see.
fn ln_binom_pmf(n: u64, p: f64, k: u64) -> f64 {
    let (n, k) = (n as f64, k as f64);
    libm::lgamma(n + 1.0) - libm::lgamma(k + 1.0) - libm::lgamma(n - k + 1.0)
        + k * p.ln()
        + (n - k) * (1.0 - p).ln()
}

/// Draws of the table sampler binned in `bins` equal-width bins over mean ± 6σ (tails folded
/// into the end bins), with the expected probability of each bin from `ln_binom_pmf` at
/// `p_model` (so a wrong model can be tried).
fn binned_binomial(
    n: u64,
    p: f64,
    p_model: f64,
    draws: usize,
    seed: u64,
    bins: u64,
) -> (Vec<u64>, Vec<f64>) {
    use dpfl_privacy::binomial::Binomial;
    let b = Binomial::new(n, p).unwrap();
    let mu = n as f64 * p;
    let sd = (n as f64 * p * (1.0 - p)).sqrt();
    let lo = (mu - 6.0 * sd).floor().max(0.0) as u64;
    let hi = ((mu + 6.0 * sd).ceil() as u64).min(n);
    let width = (hi - lo + 1).div_ceil(bins).max(1);
    let nb = ((hi - lo) / width + 1) as usize;
    let bin = |k: u64| ((k.clamp(lo, hi) - lo) / width) as usize;
    let mut r = rng(seed);
    let mut counts = vec![0u64; nb];
    for _ in 0..draws {
        counts[bin(b.sample(&mut r))] += 1;
    }
    // The model's mass over mean ± 12σ (beyond it < 1e-30), folded like the counts.
    let mu_m = n as f64 * p_model;
    let sd_m = (n as f64 * p_model * (1.0 - p_model)).sqrt();
    let mlo = (mu_m - 12.0 * sd_m - 1.0).max(0.0) as u64;
    let mhi = ((mu_m + 12.0 * sd_m + 1.0) as u64).min(n);
    let mut probs = vec![0.0; nb];
    for k in mlo.min(lo)..=mhi.max(hi) {
        probs[bin(k)] += ln_binom_pmf(n, p_model, k).exp();
    }
    (counts, probs)
}

#[test]
fn table_binomial_passes_chi2() {
    // Large n (the P1D regime, s ≈ 10⁸), a skewed p, a Poisson-like small mean, and small n
    // where the whole support is tabulated.
    for (n, p, seed) in [
        (100_000_000u64, 0.5, 71u64),
        (100_000_000, 0.3, 72),
        (100_000_000, 1e-7, 73),
        (20, 0.3, 74),
        (1_000, 0.499_999_9, 75),
    ] {
        let (counts, probs) = binned_binomial(n, p, p, 400_000, seed, 200);
        assert_chi2(&format!("table binomial({n}, {p})"), &counts, &probs);
    }
}

#[test]
fn table_binomial_chi2_rejects_a_slightly_wrong_p() {
    // Mean shift 10⁸·2e-5 = 2000 ≈ 0.4σ: must be rejected at α = 1e-6.
    let (counts, probs) = binned_binomial(100_000_000, 0.5, 0.500_02, 400_000, 76, 200);
    assert!(chi2_pvalue(&counts, &probs) < ALPHA);
}

use super::*;

fn order(a: f64) -> usize {
    ORDERS.iter().position(|&o| o == a).unwrap()
}

#[test]
fn hand_computed_shift_curves() {
    // m = 2, p = ½, a = 1: B = (¼, ½, ¼). Direction 1 keeps k ∈ {0, 1} (η = ¼):
    // P′ = (⅓, ⅔) on {1, 2}, Q = (½, ¼) there: Σ P′²/Q = 2/9 + 16/9 = 2, D₂ = ln 2; the
    // other direction is the mirror image.
    let c = shift_curve(2, 0.5, 1).unwrap();
    assert!((c.eta - 0.25).abs() < 1e-8, "{}", c.eta);
    let d2 = c.rdp[order(2.0)];
    assert!((d2 - 2f64.ln()).abs() < 1e-8, "{d2}");
    // m = 3, p = ½, a = 1: B = (1, 3, 3, 1)/8, η = ⅛. Σ_{k≤2} b(k)²/b(k+1) = 1/24 + 3/8 + 9/8
    // = 37/24, D₂ = ln(37/24) − 2 ln(7/8) = 0.432864 + 0.267063 = 0.699927.
    let c = shift_curve(3, 0.5, 1).unwrap();
    assert!((c.eta - 0.125).abs() < 1e-8, "{}", c.eta);
    let d2 = c.rdp[order(2.0)];
    let want = (37.0f64 / 24.0).ln() - 2.0 * (7.0f64 / 8.0).ln();
    assert!((d2 - want).abs() < 1e-8, "{d2} vs {want}");
    // A large m behaves like a Gaussian of σ² = mp(1 − p): D_α ≈ α·a²/(2σ²).
    let (m, a) = (40_000u64, 3u64);
    let c = shift_curve(m, 0.5, a).unwrap();
    let gauss = 8.0 * 9.0 / (2.0 * 10_000.0);
    let got = c.rdp[order(8.0)];
    assert!((got / gauss - 1.0).abs() < 0.01, "{got} vs {gauss}");
    assert!(c.eta < 1e-20, "{}", c.eta);
    assert!(shift_curve(0, 0.5, 1).is_err());
    assert!(shift_curve(3, 0.5, 0).is_err());
}

/// Exact distribution of one coordinate's count for a user-1 input u1 (other users' scaled
/// inputs `others`), by enumerating every user's rounding bit and noise bits.
fn brute_counts(u1: f64, others: &[f64], s: u32, p: f64) -> Vec<f64> {
    let users: Vec<f64> = std::iter::once(u1).chain(others.iter().copied()).collect();
    let bits = users.len() as u32 * (s + 1);
    let max = users.len() * (4 + s as usize) + 1;
    let mut out = vec![0.0; max];
    for word in 0u64..(1 << bits) {
        let (mut count, mut prob) = (0usize, 1.0);
        for (i, &u) in users.iter().enumerate() {
            let base = i as u32 * (s + 1);
            let (fl, fr) = (u.floor(), u - u.floor());
            let up = word >> base & 1 == 1;
            prob *= if up { fr } else { 1.0 - fr };
            count += fl as usize + usize::from(up);
            for b in 1..=s {
                let one = word >> (base + b) & 1 == 1;
                prob *= if one { p } else { 1.0 - p };
                count += usize::from(one);
            }
        }
        out[count] += prob;
    }
    out
}

fn hockey(p: &[f64], q: &[f64], eps: f64) -> f64 {
    p.iter()
        .zip(q)
        .map(|(a, b)| (a - eps.exp() * b).max(0.0))
        .sum()
}

#[test]
fn never_below_brute_force_on_a_tiny_pvec() {
    // n = 2 users, d = 2, g = 2, s = 3 noise bits each, p = 0.3: every user's rounding and
    // noise bits enumerated (2⁸ outcomes per coordinate), inputs on a grid of the unit ball
    // (u = g(x + 1)/2), user 2 fixed. The accountant's δ(ε) must be at least the worst pair's.
    let (g, s, p) = (2u64, 3u32, 0.3);
    let mut grid = vec![(0.0, 0.0)];
    for k in 0..8 {
        let t = k as f64 * std::f64::consts::FRAC_PI_4;
        grid.push((t.cos(), t.sin()));
        grid.push((0.45 * t.cos(), 0.45 * t.sin()));
    }
    let other = (0.3, -0.2);
    let u = |x: f64| (x + 1.0) * g as f64 / 2.0;
    let dists: Vec<(Vec<f64>, Vec<f64>)> = grid
        .iter()
        .map(|&(a, b)| {
            (
                brute_counts(u(a), &[u(other.0)], s, p),
                brute_counts(u(b), &[u(other.1)], s, p),
            )
        })
        .collect();
    let joint = |(c1, c2): &(Vec<f64>, Vec<f64>)| -> Vec<f64> {
        c1.iter()
            .flat_map(|a| c2.iter().map(move |b| a * b))
            .collect()
    };
    let joints: Vec<Vec<f64>> = dists.iter().map(joint).collect();
    let curve = release_curve(2 * s as u64, p, g, 2).unwrap();
    let mut worst_seen: f64 = 0.0;
    for eps in [0.5, 1.0, 2.0, 4.0, 8.0] {
        let brute = joints
            .iter()
            .flat_map(|a| joints.iter().map(move |b| hockey(a, b, eps)))
            .fold(0.0f64, f64::max);
        worst_seen = worst_seen.max(brute);
        let ours = curve.delta(1, eps, 0.0);
        assert!(ours >= brute, "eps {eps}: {ours} < brute {brute}");
    }
    assert!(
        worst_seen > 0.01,
        "the grid must contain distinguishable pairs"
    );
    // The enumerated count law is the binomial convolution the accountant assumes.
    let c = brute_counts(1.0, &[], s, p);
    let binom = [0.343, 0.441, 0.189, 0.027];
    for (k, b) in binom.iter().enumerate() {
        assert!((c[k + 1] - b).abs() < 1e-12, "{k}: {} vs {b}", c[k + 1]);
    }
}

/// The count law of one coordinate: Σ users' randomised roundings ⊛ Bin(m, p), exactly.
fn count_pmf(us: &[f64], g: u64, m: u64, p: f64) -> Vec<f64> {
    let mut pmf = vec![1.0];
    for &u in us {
        let (fl, fr) = (u.floor() as usize, u - u.floor());
        let mut next = vec![0.0; pmf.len() + fl + 1];
        for (k, &v) in pmf.iter().enumerate() {
            next[k + fl] += v * (1.0 - fr);
            next[k + fl + 1] += v * fr;
        }
        pmf = next;
    }
    let binom: Vec<f64> = (0..=m)
        .map(|k| {
            (log_comb(m as f64, k as f64) + k as f64 * p.ln() + (m - k) as f64 * (-p).ln_1p()).exp()
        })
        .collect();
    // A fixed length (every user at most g + 1), so laws of different inputs line up.
    let mut out = vec![0.0; us.len() * (g as usize + 1) + binom.len()];
    for (i, a) in pmf.iter().enumerate() {
        for (j, b) in binom.iter().enumerate() {
            out[i + j] += a * b;
        }
    }
    out
}

#[test]
fn never_below_and_close_to_the_exact_worst_pair_at_moderate_noise() {
    // n = 3, d = 2, g = 4, m = 400 trials, p = 0.4: exact count laws (convolutions), inputs
    // on a grid of the unit ball; the accountant is an upper bound and within a factor 2.5 in
    // ε of the worst pair on the grid at δ = 1e-4 (its slack: the worst rounding profile and
    // the RDP conversion).
    let (g, m, p) = (4u64, 400u64, 0.4);
    let mut grid = vec![(0.0, 0.0)];
    for k in 0..16 {
        let t = k as f64 * std::f64::consts::PI / 8.0;
        grid.push((t.cos(), t.sin()));
    }
    let u = |x: f64| (x + 1.0) * g as f64 / 2.0;
    let others = [u(0.1), u(-0.5)];
    let joints: Vec<Vec<f64>> = grid
        .iter()
        .map(|&(a, b)| {
            let c1 = count_pmf(&[u(a), others[0], others[1]], g, m, p);
            let c2 = count_pmf(&[u(b), others[1], others[0]], g, m, p);
            c1.iter()
                .flat_map(|x| c2.iter().map(move |y| x * y))
                .collect()
        })
        .collect();
    let curve = release_curve(m, p, g, 2).unwrap();
    let brute_delta = |eps: f64| {
        joints
            .iter()
            .flat_map(|a| joints.iter().map(move |b| hockey(a, b, eps)))
            .fold(0.0f64, f64::max)
    };
    for eps in [0.25, 0.5, 1.0, 2.0] {
        let (b, ours) = (brute_delta(eps), curve.delta(1, eps, 0.0));
        assert!(ours >= b, "eps {eps}: {ours} < {b}");
    }
    let ours = curve.epsilon(1, 1e-4, 0.0);
    let (mut lo, mut hi) = (0.0, 20.0);
    for _ in 0..40 {
        let mid = 0.5 * (lo + hi);
        if brute_delta(mid) <= 1e-4 {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    eprintln!("accountant eps {ours}, grid worst {hi}");
    assert!(
        ours >= hi && ours < 2.5 * hi,
        "ours {ours}, grid worst {hi}"
    );
}

#[test]
fn calibration_meets_its_target_and_needs_far_less_noise_than_theorem_3_2() {
    let (n, d, eps, delta) = (100u64, 10usize, 1.0, 1e-5);
    let ours = calibrate_exact(n, d, 1.0, eps, delta, Scale::Paper, 1, 0.0).unwrap();
    let got = pvec_epsilon(&ours, n, 1, delta, 0.0).unwrap();
    assert!(got <= eps, "{got}");
    // Fewer bits would not do (to the search's 0.1%).
    let fewer = PvecParams::with_p1d(
        n,
        d,
        1.0,
        Scale::Paper,
        ours.p1d.g,
        ours.p1d.s * 99 / 100,
        ours.p1d.p,
    )
    .unwrap();
    assert!(pvec_epsilon(&fewer, n, 1, delta, 0.0).unwrap() > eps);
    let paper = PvecParams::calibrate(n, d, 1.0, eps, delta, Scale::Paper).unwrap();
    let ratio = noise_std(&paper) / noise_std(&ours);
    assert!(ratio > 50.0, "paper/accountant noise ratio {ratio}");
    // And the paper's own parameters are far more private than Theorem 3.2 says.
    let paper_eps = pvec_epsilon(&paper, n, 1, delta, 0.0).unwrap();
    assert!(paper_eps < 0.05, "{paper_eps}");
    assert_eq!(ours.calibration.unwrap().rule, PvecRule::Accountant);
    assert!(ours.composed_epsilon().is_none() && ours.theorem_variance_bound().is_none());
    assert!(calibrate_exact(0, d, 1.0, eps, delta, Scale::Paper, 1, 0.0).is_err());
    assert!(calibrate_exact(n, d, 1.0, eps, 1.5, Scale::Paper, 1, 0.0).is_err());
}

#[test]
#[ignore = "prints the noise table of docs/shuffle.md (cargo test -p dpfl-privacy --lib noise_table -- --ignored --nocapture)"]
fn noise_table() {
    use crate::calibration::analytic_gaussian_noise_multiplier;
    use crate::params::{Delta, Epsilon};
    println!(
        "| n | d | ε | δ | paper std | accountant std | central Gaussian std | paper/accountant | accountant/Gaussian | accountant s, g |"
    );
    for (n, d) in [(100u64, 10usize), (1000, 10), (1000, 100), (10_000, 100)] {
        for eps in [1.0, 4.0] {
            let delta = 1e-5;
            let paper = PvecParams::calibrate(n, d, 1.0, eps, delta, Scale::Paper).unwrap();
            let ours = calibrate_exact(n, d, 1.0, eps, delta, Scale::Paper, 1, 0.0).unwrap();
            let z = analytic_gaussian_noise_multiplier(
                Epsilon::new(eps).unwrap(),
                Delta::new(delta).unwrap(),
            )
            .unwrap();
            let gauss = 2.0 * z;
            let (a, b) = (noise_std(&paper), noise_std(&ours));
            println!(
                "| {n} | {d} | {eps} | {delta:e} | {a:.1} | {b:.2} | {gauss:.2} | {:.0} | {:.2} | {}, {} |",
                a / b,
                b / gauss,
                ours.p1d.s,
                ours.p1d.g
            );
        }
    }
}

#[test]
fn the_release_event_is_accounted_at_its_exact_epsilon() {
    use crate::accountant::AccountantKind;
    use crate::event::{Neighbouring, PrivacyEvent};
    use crate::params::Delta;
    let ev = PrivacyEvent::PvecSum {
        trials: 40_000,
        p: 0.49,
        granularity: 8,
        dimension: 4,
        sampler_tv: 0.0,
        delta: 1e-6,
    };
    let e = release_epsilon(40_000, 0.49, 8, 4, 0.0, 1e-6).unwrap();
    assert!(e > 0.0 && e.is_finite(), "{e}");
    let at = |kind: AccountantKind, ev: &PrivacyEvent, d: f64| {
        kind.epsilon(Neighbouring::ReplaceOne, ev, Delta::new(d).unwrap())
    };
    // The accountants need δ above the events' own: basic composition charges ε itself, the
    // PLD of the (ε, δ) leaf at most ε.
    let basic = at(AccountantKind::Basic, &ev, 1.5e-6).unwrap();
    assert!(basic >= e && basic < e + 1e-9, "{basic} vs {e}");
    let pld = at(AccountantKind::Pld, &ev, 1.5e-6).unwrap();
    assert!(pld > 0.5 * e && pld <= e + 1e-9, "{pld} vs {e}");
    // Two releases by basic composition: 2ε; plain RDP has no curve for δ > 0.
    let two = at(AccountantKind::Basic, &ev.clone().repeated(2), 3e-6).unwrap();
    assert!(two >= 2.0 * e && two < 2.0 * e + 1e-9, "{two}");
    assert!(at(AccountantKind::Rdp, &ev, 1e-5).is_err());
    // An accountant-calibrated PVEC's honest-shuffler event is that release.
    let params = calibrate_exact(50, 3, 1.0, 2.0, 1e-6, Scale::Unit, 1, CALIBRATION_TV).unwrap();
    let pvec = crate::shuffle::protocol::Pvec::new(params).unwrap();
    assert!(pvec.noise_tv_bound() <= CALIBRATION_TV);
    let r = crate::shuffle::randomizer::PvecRandomizer::new(
        pvec,
        5,
        crate::shuffle::randomizer::Against::HonestShuffler {
            honest_fraction: None,
        },
    )
    .unwrap();
    use crate::mechanism::Mechanism;
    let ev = r.privacy_event();
    let PrivacyEvent::PvecSum { trials, .. } = ev else {
        panic!("{ev:?}")
    };
    assert_eq!(trials, 50 * params.p1d.s);
    let got = at(AccountantKind::Basic, &ev, 2e-6).unwrap();
    assert!(got <= 2.0, "{got}");
}

//! `dpfl reproduce shuffle-rates`: the quick run (asserted values, files present) and the
//! full run (`#[ignore]`; `cargo test -p dpfl-lab --test it shuffle_rates:: -- --ignored`).

use dpfl_lab::reproduce::shuffle_rates::{self as sr, ALGORITHMS, NON_PRIVATE, Plan};
use dpfl_lab::reproduce::shuffle_rates_out as out;

fn mean(bands: &[sr::Band], a: usize, n: usize) -> f64 {
    bands
        .iter()
        .find(|b| b.algorithm == ALGORITHMS[a] && b.n == n)
        .map(|b| b.mean)
        .unwrap_or(f64::NAN)
}

fn check(plan: &Plan, dir: &std::path::Path) {
    let (runs, refused) = dpfl_lab::reproduce::shuffle_rates_repro::run(plan, &|_, _| {}).unwrap();
    eprintln!("refused: {refused:?}");
    // Nothing is refused: PGD's per-round δ₀ absorbs the Binomial sampler's error term since
    // that fell to ~1e-19 per draw (session 6 refused PGD at every n).
    assert!(refused.is_empty(), "{refused:?}");
    let bands = sr::bands(&runs);
    let slopes = sr::slopes(&bands);
    eprintln!("{slopes:?}");
    for b in &bands {
        eprintln!("{} n = {}: {:.3e}", b.algorithm, b.n, b.mean);
        assert!(b.mean.is_finite() && b.mean >= 0.0);
        // Θ is the unit ball and ‖w*‖ = ½: ‖w − w*‖ ≤ 1.5, excess ≤ 1.5²/(2d).
        assert!(b.mean <= 2.25 / (2.0 * plan.d as f64) + 1e-12, "{b:?}");
    }
    let slope = |a: usize| slopes[a].1.unwrap();
    // Central DP improves with n at least like n^(-1/2) (Table 1: n^(-1) for the privacy
    // term), and so does ISRL-DP.
    assert!(slope(2) < -0.9, "central {}", slope(2));
    assert!(slope(1) < -0.5, "ISRL-DP {}", slope(1));
    assert!(slope(0) < -0.2, "local DP {}", slope(0));
    // Central DP's slope is steeper than local DP's (Table 1: −1 against −½).
    assert!(
        slope(2) < slope(0),
        "central {} vs local {}",
        slope(2),
        slope(0)
    );
    // At every n, at the same (ε, δ): the non-private run is the floor and central DP
    // beats local DP; at the largest n, PVEC at Theorem 3.2's constants (trusted shuffler) is
    // worse than central DP, while the accountant-calibrated PSGD is far better than the
    // paper-rule one (its noise is within 1.3x a central Gaussian's, docs/shuffle.md).
    for &n in &plan.ns {
        for (a, name) in ALGORITHMS.iter().enumerate().take(NON_PRIVATE) {
            let m = mean(&bands, a, n);
            assert!(
                m.is_nan() || mean(&bands, NON_PRIVATE, n) < m,
                "{name} at n = {n}"
            );
        }
        if n <= plan.ldp_max_n {
            assert!(mean(&bands, 2, n) < mean(&bands, 0, n), "n = {n}");
        }
    }
    let n = *plan.ns.last().unwrap();
    assert!(mean(&bands, 2, n) < mean(&bands, 3, n), "PSGD at n = {n}");
    assert!(mean(&bands, 2, n) < mean(&bands, 4, n), "PAGD at n = {n}");
    assert!(
        mean(&bands, 6, n) < 0.5 * mean(&bands, 3, n),
        "accountant PSGD {} vs paper PSGD {}",
        mean(&bands, 6, n),
        mean(&bands, 3, n)
    );
    // The MB-SGD rows carry the tuned step, the presets' rows none; one row per seed.
    for r in &runs {
        assert_eq!(
            r.step_size.is_some(),
            sr::is_mbsgd(ALGORITHMS.iter().position(|a| *a == r.algorithm).unwrap())
        );
    }
    let per_point = runs
        .iter()
        .filter(|r| r.algorithm == ALGORITHMS[2] && r.n == plan.ns[0])
        .count();
    assert_eq!(per_point, plan.seeds);
    let beats = sr::first_beats_local(&bands);
    eprintln!("first n below local DP: {beats:?}");
    assert_eq!(beats.len(), NON_PRIVATE - 3);
    let noise = out::pvec_noise_rows(1_000).unwrap();
    // Digest §4's illustration: n = 1000, d = 10, ε = 1, δ = 1e-6: g = 64, std ≈ 4·10³ per
    // coordinate against a central Gaussian's ≈ 10.
    let r = noise
        .iter()
        .find(|r| r.protocol == "PVEC" && r.n == 1_000 && r.d == 10)
        .unwrap();
    assert_eq!(r.g, 64);
    assert!(r.paper_std > 3.0e3 && r.paper_std < 5.0e3, "{r:?}");
    assert!(r.central_std > 5.0 && r.central_std < 12.0, "{r:?}");
    let p = noise
        .iter()
        .find(|r| r.protocol == "P1D" && r.n == 1_000)
        .unwrap();
    let exact = p.exact_std.unwrap();
    assert!(exact < p.paper_std / 2.0, "{p:?}");
    let files = out::write(plan, &runs, &bands, &slopes, &noise, &refused, dir).unwrap();
    for f in [
        "runs.csv",
        "summary.csv",
        "pvec_noise.csv",
        "shuffle-rates.svg",
        "shuffle-rates.png",
    ] {
        assert!(
            files.iter().any(|p| p.ends_with(f)),
            "{f} missing: {files:?}"
        );
        assert!(dir.join(f).metadata().unwrap().len() > 0, "{f} empty");
    }
    let summary = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    assert!(summary.contains("fitted_slope,theory_exponent,design_exponent"));
    assert!(summary.contains("below local DP"), "{summary}");
    assert!(summary.contains("\"shuffle PSGD\",,,,,,"), "{summary}");
}

#[test]
fn quick_reproduction_has_the_expected_orderings_and_files() {
    let dir = std::env::temp_dir().join(format!("dpfl-shuffle-rates-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    check(&Plan::new(true), &dir);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
#[ignore = "the full reproduction (minutes); docs/results/shuffle-rates holds its output"]
fn full_reproduction() {
    // DPFL_SHUFFLE_RATES_OUT=docs/results/shuffle-rates keeps the outputs (how the committed
    // ones were made). A relative path is taken from the workspace root, where the command is
    // typed, not from crates/dpfl, where cargo runs the test.
    let dir = std::env::var_os("DPFL_SHUFFLE_RATES_OUT").map_or_else(
        || std::env::temp_dir().join(format!("dpfl-shuffle-rates-full-{}", std::process::id())),
        |d| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../..")
                .join(d)
        },
    );
    check(&Plan::new(false), &dir);
}

//! PAGD, Moreau-smoothed PAGD, the strongly convex phases, pan-private AC-SA and the robust
//! variant (Cheu, Joseph, Mao & Peng 2022 §4, App. A.3, App. C) through their configs, the
//! plan, the simulator, and Monte Carlo checks with fixed seeds.

use std::sync::{Arc, Mutex};

use dpfl::algo::shuffle::{AcsaConstants, Against, Transport};
use dpfl::algo::{
    AlgorithmSpec, Broadcast, BuildContext, Payload, Round, ServerHalf, SiloHalf, SiloInfo,
    SiloMessage,
};
use dpfl::data::{Dataset, SiloData, Target};
use dpfl::linalg::Matrix;
use dpfl::model::{GradientOracle, HingeLoss, LogisticRegression, Model, Projection};
use dpfl::sim::{Participation, Simulator};
use dpfl::testing::shuffle::{
    AbsentFilter, AbsentSilo, ExtremeSilo, NegatedModel, PagdServer, PvecServer, PvecSilo,
    phase_schedule,
};
use dpfl::units::SiloId;
use dpfl_privacy::rng::Purpose;
use dpfl_privacy::shuffle::params::{PvecParams, Scale};
use dpfl_privacy::shuffle::protocol::Pvec;
use dpfl_privacy::{DpRng, sampler};
use dpfl_testkit::MeanRecorder;

/// `silos` silos of n records, x uniform in [−0.7, 0.7]², y = [x₀ > 0]; ε = `eps`, δ = 1e-5.
fn federation(
    model: Arc<dyn Model>,
    silos: usize,
    n: usize,
    rounds: usize,
    eps: f64,
) -> (BuildContext, Vec<SiloData>) {
    dpfl_testkit::separable_federation(model, silos, n, rounds, eps)
}

fn logistic() -> Arc<dyn Model> {
    Arc::new(LogisticRegression::new(2, None).unwrap())
}

fn spec(text: &str) -> AlgorithmSpec {
    toml::from_str(text).unwrap()
}

fn run(spec: &AlgorithmSpec, ctx: &BuildContext, data: &[SiloData], rounds: usize) -> Vec<f64> {
    let built = spec.build(ctx).unwrap();
    let mut sim = Simulator::new(data, built, Participation::All, Some(1)).unwrap();
    if spec.needs_shuffler() {
        sim = sim.with_shuffle(Some(1)).unwrap();
    }
    for _ in 0..rounds {
        sim.step().unwrap();
    }
    sim.output()
}

#[test]
fn pagd_builds_from_its_config_explains_its_preset_and_runs() {
    let (ctx, data) = federation(logistic(), 5, 400, 10, 2.0);
    let lan = spec("kind = \"pagd\"\nsmoothness = 0.25\nshuffler = \"trusted\"");
    let built = lan.build(&ctx).unwrap();
    let text = &built.calibration[0].formula;
    for part in [
        "Cheu et al. Alg. 4",
        "AC-SA preset (Cheu et al. Thm 4.3)",
        "schedule (lan",
        "sigma^2 = L^2/B + V/B^2",
        "given an honest shuffler",
    ] {
        assert!(text.contains(part), "{part}: {text}");
    }
    // Thm 4.3's B for n = 5·400 = 2000, d = 2, L = 1, ln(d/δ) = ln(2e5), ε = 2, β = 1/4,
    // D = 20: 2000^0.6·2^0.2·12.206^0.4/(2^0.4·0.25^0.4·20^0.4) = 298.9/2.5118 = 119.0 →
    // K = ⌈119.0/5⌉ = 24 (below ⌊400/10⌋ = 40).
    let b = 2000f64.powf(0.6) * 2f64.powf(0.2) * (2e5f64).ln().powf(0.4)
        / (2f64.powf(0.4) * 0.25f64.powf(0.4) * 20f64.powf(0.4));
    assert!((b - 118.97).abs() < 0.01, "{b}");
    assert_eq!(built.calibration[0].batch_size, 24);
    let out = run(&lan, &ctx, &data, 10);
    assert!(out.iter().all(|v| v.is_finite()) && out.len() == 2);
    // The OCR variant is a named option with its own schedule; both are private alike.
    let ocr = spec(
        "kind = \"pagd\"\nsmoothness = 0.25\nconstants = \"paper-ocr\"\nshuffler = \"trusted\"",
    );
    let b2 = ocr.build(&ctx).unwrap();
    assert!(b2.calibration[0].formula.contains("schedule (paper-ocr"));
    assert_eq!(
        b2.silos[0].round_event(Round::FIRST),
        built.silos[0].round_event(Round::FIRST),
        "the constants do not change the privacy event"
    );
    // Missing β (and no smoothing), or an unbounded domain without D, are refused by field.
    let e = spec("kind = \"pagd\"")
        .build(&ctx)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("algorithm.smoothness"), "{e}");
    let mut open = ctx.clone();
    open.projection = Projection::None;
    let e = lan.build(&open).err().unwrap().to_string();
    assert!(e.contains("algorithm.diameter"), "{e}");
    assert!(
        spec("kind = \"pagd\"\nsmoothness = 0.25\ndiameter = 5.0")
            .build(&open)
            .is_ok()
    );
}

#[test]
fn smoothed_pagd_runs_on_the_moreau_envelope_with_twice_the_bound() {
    let hinge: Arc<dyn Model> = Arc::new(HingeLoss::new(2, None).unwrap());
    let (ctx, data) = federation(hinge, 5, 400, 10, 2.0);
    let s = spec("kind = \"pagd\"\nsmoothing = \"theory\"\nshuffler = \"trusted\"");
    let built = s.build(&ctx).unwrap();
    let text = &built.calibration[0].formula;
    // Thm 4.7: β = ε^{2/3} n^{2/3} L/(d^{1/3} D ln^{2/3}(d/δ)) = (4000)^{2/3}/(2^{1/3}·20·12.206^{2/3})
    //        = 251.98/(1.25992·20·5.3017) = 1.8863.
    let beta = 4000f64.powf(2.0 / 3.0) / (2f64.cbrt() * 20.0 * (2e5f64).ln().powf(2.0 / 3.0));
    assert!((beta - 1.8863).abs() < 1e-4, "{beta}");
    assert!(
        text.contains(&format!("Moreau beta = {beta:.4e}")),
        "{text}"
    );
    assert!(
        text.contains("L = 2:"),
        "PVEC runs with Delta2 = 2L: {text}"
    );
    let out = run(&s, &ctx, &data, 10);
    assert!(out.iter().all(|v| v.is_finite()));
    // A loss without a prox cannot be smoothed.
    let (lctx, _) = federation(logistic(), 5, 400, 10, 2.0);
    let e = s.build(&lctx).err().unwrap().to_string();
    assert!(e.contains("prox"), "{e}");
}

/// f(θ) = (λ/2)‖θ − θ*‖² with N(0, s²) noise per coordinate on every gradient.
struct NoisyQuadratic {
    lambda: f64,
    star: Vec<f64>,
    s: f64,
}

impl NoisyQuadratic {
    fn excess(&self, w: &[f64]) -> f64 {
        0.5 * self.lambda
            * w.iter()
                .zip(&self.star)
                .map(|(a, b)| (a - b).powi(2))
                .sum::<f64>()
    }
    fn message(&self, b: &Broadcast, rng: &mut DpRng) -> SiloMessage {
        let z = sampler::standard_normals(rng, self.star.len());
        let g = b
            .point
            .iter()
            .zip(&self.star)
            .zip(z)
            .map(|((w, s), z)| self.lambda * (w - s) + self.s * z)
            .collect();
        SiloMessage {
            round: b.round,
            payload: Payload::Dense(g),
        }
    }
}

#[test]
fn strongly_convex_phases_cut_the_error_phase_by_phase_as_predicted() {
    // λ = β = 1, θ* = (1.2, −0.9) (‖θ*‖ = 1.5), D = 4 (ball of radius 2), σ² = 2·0.5² per
    // gradient, R = 300 rounds in 3 phases.
    let q = NoisyQuadratic {
        lambda: 1.0,
        star: vec![1.2, -0.9],
        s: 0.5,
    };
    let sigma = (2.0f64).sqrt() * 0.5;
    let (phases, _) = phase_schedule(AcsaConstants::Lan, 1.0, sigma, 4.0, Some(1.0), 3, 300);
    // The a-priori bounds Δ̂_i = βD_i²/R_i² + D_iσ/√R_i shrink with the radii.
    let bound = |i: usize| {
        let p = &phases[i];
        let r = p.rounds as f64;
        p.radius * p.radius / (r * r) + p.radius * sigma / r.sqrt()
    };
    assert!(phases[1].radius < phases[0].radius && phases[2].radius < phases[1].radius);
    let mut mean = [0.0; 3];
    let trials = 40;
    for seed in 0..trials {
        let mut s = PagdServer::new(
            vec![0.0, 0.0],
            Projection::L2Ball { radius: 2.0 },
            AcsaConstants::Lan,
            phases.clone(),
        )
        .unwrap();
        let mut rng = DpRng::from_seed(seed, Purpose::Silo, 0);
        let mut r = 0;
        for (i, p) in phases.iter().enumerate() {
            for _ in 0..p.rounds {
                let b = s.broadcast(Round::new(r));
                s.aggregate(Round::new(r), &[q.message(&b, &mut rng)])
                    .unwrap();
                r += 1;
            }
            mean[i] += q.excess(&s.output()) / trials as f64;
        }
    }
    eprintln!(
        "phase means {mean:?}; bounds {} {} {}",
        bound(0),
        bound(1),
        bound(2)
    );
    // In expectation over the seeds: each phase lowers the error, and each phase's error is
    // within its a-priori bound.
    assert!(mean[1] < mean[0] && mean[2] < mean[1], "{mean:?}");
    for (i, m) in mean.iter().enumerate() {
        assert!(*m <= bound(i), "phase {i}: {m} > {}", bound(i));
    }
    // And by the predicted factor: the bounds fall 5.3× then 2.3×, the errors 4.0× then 2.0×
    // (seeds 0..40); each observed factor within a factor 2 of the prediction.
    for i in 0..2 {
        let (seen, predicted) = (mean[i] / mean[i + 1], bound(i) / bound(i + 1));
        assert!(
            seen > 0.5 * predicted && seen < 2.0 * predicted,
            "phase {i}: {seen} vs {predicted}"
        );
    }
    // Without restarts (one phase of 300 rounds at the full radius) the error is larger.
    let (one, _) = phase_schedule(AcsaConstants::Lan, 1.0, sigma, 4.0, None, 1, 300);
    let mut single = 0.0;
    for seed in 0..trials {
        let mut s = PagdServer::new(
            vec![0.0, 0.0],
            Projection::L2Ball { radius: 2.0 },
            AcsaConstants::Lan,
            one.clone(),
        )
        .unwrap();
        let mut rng = DpRng::from_seed(seed, Purpose::Silo, 0);
        for r in 0..300 {
            let b = s.broadcast(Round::new(r));
            s.aggregate(Round::new(r), &[q.message(&b, &mut rng)])
                .unwrap();
        }
        single += q.excess(&s.output()) / trials as f64;
    }
    eprintln!("single phase {single}");
    assert!(mean[2] < single, "{} vs {single}", mean[2]);
}

#[test]
fn strongly_convex_pagd_plans_its_phases_from_the_config() {
    let (ctx, data) = federation(logistic(), 5, 400, 12, 2.0);
    let s =
        spec("kind = \"pagd\"\nsmoothness = 0.25\nstrong_convexity = 0.05\nshuffler = \"trusted\"");
    let built = s.build(&ctx).unwrap();
    let text = &built.calibration[0].formula;
    // k = ⌈log₂ log₂ 2000⌉ = ⌈log₂ 10.97⌉ = 4 phases of 3 rounds.
    assert!(
        text.contains("4 phase(s)") && text.contains("phase 4: R_i = 3"),
        "{text}"
    );
    assert!(run(&s, &ctx, &data, 12).iter().all(|v| v.is_finite()));
}

#[test]
fn pan_private_acsa_noises_state_and_output_and_charges_its_guarantee() {
    use dpfl::testing::shuffle::zeta;
    let (ctx, data) = federation(logistic(), 4, 200, 5, 0.5);
    let s = spec("kind = \"pan-private-acsa\"\nsmoothness = 0.25\nbatch_size = 10");
    assert!(!s.needs_shuffler());
    let built = s.build(&ctx).unwrap();
    // ζ = (2L/K)√(2 ln(2/δ))/ε = 0.2·√(2·12.206)/0.5 = 1.97636; the output carries √2·ζ.
    let z = zeta(1.0, 10, 0.5, 1e-5).unwrap();
    assert!((z - 0.2 * (2.0 * (2e5f64).ln()).sqrt() / 0.5).abs() < 1e-12);
    assert!((z - 1.976_346).abs() < 1e-6, "{z}");
    assert!((built.silos[0].noise_std() - 2f64.sqrt() * z).abs() < 1e-12);
    assert_eq!(
        built.silos[0].round_event(Round::FIRST),
        Some(
            dpfl_privacy::PrivacyEvent::EpsilonDelta {
                epsilon: 0.5,
                delta: 1e-5
            }
            .sampled(dpfl_privacy::event::Sampling::Disjoint {
                population: 200,
                size: 10
            })
        )
    );
    let text = &built.calibration[0].formula;
    assert!(text.contains("state noise before the batch"), "{text}");
    // Thm C.3's log factor in the preset: √ln(1/δ) where PVEC has ln(d/δ).
    assert!(text.contains("[sqrt(ln(1/delta))]^(2/5)"), "{text}");
    // Monte Carlo: at w = 0 with identical records the output is the gradient (−0.3, 0.4)
    // plus two independent N(0, ζ²) draws: mean within 4·√(2ζ²/T), variance 2ζ² ± 4·2ζ²√(2/T).
    let x = Matrix::from_vec(200, 2, [0.6, -0.8].repeat(200)).unwrap();
    let same = Dataset::new(
        x,
        vec![1.0; 200],
        Target::Classes {
            names: vec!["0".into(), "1".into()],
        },
        vec!["a".into(), "b".into()],
    )
    .unwrap();
    let trials = 4000;
    let (mut sum, mut sq) = (0.0, 0.0);
    for t in 0..trials {
        let mut silo = s.build(&ctx).unwrap().silos.remove(0);
        let mut rng = DpRng::from_seed(21, Purpose::Silo, t);
        let b = Broadcast {
            round: Round::FIRST,
            point: vec![0.0, 0.0],
            aux: vec![],
        };
        let Payload::Dense(v) = silo.respond(&b, &same, &mut rng).unwrap().payload else {
            panic!("not dense")
        };
        sum += v[0];
        sq += (v[0] + 0.3).powi(2);
    }
    let n = trials as f64;
    let var = 2.0 * z * z;
    assert!(
        (sum / n + 0.3).abs() < 4.0 * (var / n).sqrt(),
        "{}",
        sum / n
    );
    assert!(
        (sq / n - var).abs() < 4.0 * var * (2.0 / n).sqrt(),
        "{} vs {var}",
        sq / n
    );
    assert!(run(&s, &ctx, &data, 5).iter().all(|v| v.is_finite()));
    // ε ≥ 1 is outside Lemma C.5.
    let (big, _) = federation(logistic(), 4, 200, 5, 2.0);
    let e = s.build(&big).err().unwrap().to_string();
    assert!(e.contains("privacy.epsilon"), "{e}");
}

/// Issue 27: an OS-seeded pan-private silo draws its state noise and its output noise each
/// from a key that exists only while it is drawn, so a copy of the silo's generator taken
/// before the round (what an intrusion finds) neither reproduces its message nor the noise in
/// it; a seeded silo stays reproducible from its stream.
#[test]
fn pan_private_noise_is_not_regenerated_from_the_silos_generator() {
    let (ctx, data) = federation(logistic(), 4, 200, 5, 0.5);
    let s = spec("kind = \"pan-private-acsa\"\nsmoothness = 0.25\nbatch_size = 10");
    let b = Broadcast {
        round: Round::FIRST,
        point: vec![0.0, 0.0],
        aux: vec![],
    };
    let message = |rng: &mut DpRng| {
        let mut silo = s.build(&ctx).unwrap().silos.remove(0);
        let Payload::Dense(v) = silo.respond(&b, &data[0].train, rng).unwrap().payload else {
            panic!("not dense")
        };
        v
    };
    for os in [true, false] {
        let mut rng = if os {
            DpRng::from_os().unwrap()
        } else {
            DpRng::from_seed(4, Purpose::Silo, 0)
        };
        let mut intruder = DpRng::from_snapshot(&rng.snapshot()).unwrap();
        let (real, guess) = (message(&mut rng), message(&mut intruder));
        assert!(real.iter().all(|v| v.is_finite()));
        assert_eq!(real == guess, !os, "OS-seeded {os}: {real:?} vs {guess:?}");
    }
}

const K: usize = 2;

/// A tiny PVEC over 4·K users: g = 4, s = 20, p = 1/4, Δ₂ = 1 (range 2).
fn pvec() -> Pvec {
    Pvec::new(PvecParams::with_p1d((4 * K) as u64, 2, 1.0, Scale::Paper, 4, 20, 0.25).unwrap())
        .unwrap()
}

/// Identical records: every logistic gradient at w = 0 is (−0.3, 0.4).
fn same_records() -> Dataset {
    Dataset::new(
        Matrix::from_vec(40, 2, [0.6, -0.8].repeat(40)).unwrap(),
        vec![1.0; 40],
        Target::Classes {
            names: vec!["0".into(), "1".into()],
        },
        vec!["a".into(), "b".into()],
    )
    .unwrap()
}

/// Mean and per-coordinate variance of the analyzer's mean gradient over `trials` rounds
/// of 4 silos, the last `bad` of which are built by `adversary`.
fn analyzer_moments(
    bad: usize,
    adversary: &dyn Fn() -> Box<dyn SiloHalf>,
    trials: u32,
) -> ([f64; 2], [f64; 2]) {
    let data = same_records();
    let oracle = GradientOracle::new(logistic(), Some(1.0)).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let mut server = AbsentFilter {
        inner: Box::new(PvecServer::new(
            Box::new(MeanRecorder {
                seen: seen.clone(),
                dim: 2,
            }),
            pvec(),
            Transport::Compact,
            K,
        )),
    };
    let b = Broadcast {
        round: Round::FIRST,
        point: vec![0.0, 0.0],
        aux: vec![],
    };
    for t in 0..trials {
        let mut messages = Vec::new();
        for i in 0..4u32 {
            let mut half: Box<dyn SiloHalf> = if (i as usize) + bad >= 4 {
                adversary()
            } else {
                Box::new(
                    PvecSilo::new(
                        oracle.clone(),
                        pvec(),
                        Transport::Compact,
                        40,
                        K,
                        Against::OwnCounts { delta: 1e-6 },
                    )
                    .unwrap(),
                )
            };
            let mut rng = DpRng::from_seed(5, Purpose::Silo, t * 10 + i);
            messages.extend(half.respond_reply(&b, &data, &mut rng).unwrap().messages);
        }
        server.aggregate(Round::FIRST, &messages).unwrap();
    }
    let v = seen.lock().unwrap();
    let n = v.len() as f64;
    let mut mean = [0.0; 2];
    let mut var = [0.0; 2];
    for j in 0..2 {
        mean[j] = v.iter().map(|g| g[j]).sum::<f64>() / n;
        var[j] = v.iter().map(|g| (g[j] - mean[j]).powi(2)).sum::<f64>() / (n - 1.0);
    }
    (mean, var)
}

#[test]
fn robust_adversaries_degrade_the_gradient_as_the_theory_says() {
    let truth = [-0.3, 0.4];
    let trials = 3000;
    let honest = || -> Box<dyn SiloHalf> { unreachable!() };
    let (m0, v0) = analyzer_moments(0, &honest, trials);
    // Drop half the silos: still unbiased (the analyzer debiases with the observed n' = 4
    // users), and the mean's variance doubles: (Δ/g)²(Σr(1−r) + s n' p(1−p))/n'² ∝ 1/n'.
    let drop = || -> Box<dyn SiloHalf> { Box::new(AbsentSilo { dim: 2 }) };
    let (m1, v1) = analyzer_moments(2, &drop, trials);
    // Per coordinate: Var = (0.5)²·(8·r(1−r) + 20·8·3/16)/64 at n' = 8; r = frac(u) with
    // u = (x + 1)·2: x = −0.3 → 1.4 (r = 0.4), x = 0.4 → 2.8 (r = 0.8).
    let var8 = |r: f64| 0.25 * (8.0 * r * (1.0 - r) + 30.0) / 64.0;
    let var4 = |r: f64| 0.25 * (4.0 * r * (1.0 - r) + 15.0) / 16.0;
    let tol = 5.0 * (2.0 / trials as f64).sqrt();
    for (j, r) in [0.4, 0.8].into_iter().enumerate() {
        assert!(
            (v0[j] / var8(r) - 1.0).abs() < tol,
            "{j}: {} vs {}",
            v0[j],
            var8(r)
        );
        assert!(
            (v1[j] / var4(r) - 1.0).abs() < tol,
            "{j}: {} vs {}",
            v1[j],
            var4(r)
        );
        assert!((v1[j] / v0[j] - 2.0).abs() < 4.0 * tol, "{}", v1[j] / v0[j]);
        for m in [m0[j], m1[j]] {
            assert!(
                (m - truth[j]).abs() < 5.0 * (var4(r) / trials as f64).sqrt(),
                "{m}"
            );
        }
    }
    // One flipping liar of four (f = 1/4): E[g̃] = (1 − 2f)·∇ = ∇/2.
    let oracle = GradientOracle::new(logistic(), Some(1.0)).unwrap();
    let flip = || -> Box<dyn SiloHalf> {
        let neg = GradientOracle::new(
            Arc::new(NegatedModel {
                inner: oracle.model_arc(),
            }),
            Some(1.0),
        )
        .unwrap();
        Box::new(
            PvecSilo::new(
                neg,
                pvec(),
                Transport::Compact,
                40,
                K,
                Against::OwnCounts { delta: 1e-6 },
            )
            .unwrap(),
        )
    };
    let (m2, _) = analyzer_moments(1, &flip, trials);
    for j in 0..2 {
        let sd = (var8(0.5) / trials as f64).sqrt();
        assert!((m2[j] - 0.5 * truth[j]).abs() < 5.0 * sd, "{j}: {}", m2[j]);
    }
    // One extreme liar (all K(g + s) = 48 ones per label): its two "users" add
    // (Δ/g)(48 − 2ps) − 2Δ₂ = 0.5·38 − 2 = 17 to each coordinate's sum, so
    // E[g̃_j] = (6x_j + 17)/8 = 1.9 and 2.425: one liar swamps the gradient.
    let extreme = || -> Box<dyn SiloHalf> {
        Box::new(ExtremeSilo {
            dim: 2,
            max: 48,
            transport: Transport::Compact,
        })
    };
    let (m3, _) = analyzer_moments(1, &extreme, trials);
    for (j, want) in [1.9, 2.425].into_iter().enumerate() {
        let sd = (var8(0.5) / trials as f64).sqrt();
        assert!((m3[j] - want).abs() < 5.0 * sd, "{j}: {} vs {want}", m3[j]);
    }
}

#[test]
fn robust_pagd_reports_eps_over_gamma_refuses_too_many_adversaries_and_never_panics() {
    let (ctx, data) = federation(logistic(), 6, 400, 8, 1.0);
    let base = "kind = \"pagd\"\nsmoothness = 0.25\nshuffler = \"trusted\"\n";
    for behaviour in ["drop", "flip", "extreme"] {
        let s = spec(&format!(
            "{base}robust = {{ honest_fraction = 0.5, adversaries = 3, behaviour = \"{behaviour}\" }}"
        ));
        let built = s.build(&ctx).unwrap();
        let text = &built.calibration[0].formula;
        // PVEC at ε_c = γε = 0.5, so the robust level ε_c/γ = 1 is the budget, charged.
        assert!(text.contains("eps_c = gamma eps = 0.5000"), "{text}");
        assert!(text.contains("(1.0000, 1e-5, gamma = 0.5)"), "{text}");
        match built.silos[0].round_event(Round::FIRST) {
            Some(dpfl_privacy::PrivacyEvent::Sampled { event, .. }) => assert_eq!(
                *event,
                dpfl_privacy::PrivacyEvent::EpsilonDelta {
                    epsilon: 1.0,
                    delta: 1e-5
                }
            ),
            other => panic!("{other:?}"),
        }
        let out = run(&s, &ctx, &data, 8);
        assert!(out.iter().all(|v| v.is_finite()), "{behaviour}: {out:?}");
        // The plan rebuilds the same halves in separate processes.
        let plan = dpfl::plan::Plan::new(
            dpfl::plan::Setup {
                model: toml::from_str("kind = \"logistic\"").unwrap(),
                features: 2,
                classes: Some(2),
                clip: None,
                lipschitz: 1.0,
                rounds: 8,
                participation: Participation::All,
                projection: Projection::L2Ball { radius: 10.0 },
                noise: Default::default(),
                enforce_budget: false,
                silos: ctx.silos.clone(),
            },
            &s,
        )
        .unwrap();
        let back: dpfl::plan::Plan = toml::from_str(&toml::to_string(&plan).unwrap()).unwrap();
        assert_eq!(back, plan);
        let adversary = dpfl::plan::silo_half(&back, SiloId::new(5)).unwrap();
        assert_eq!(
            adversary.round_event(Round::FIRST).is_none(),
            behaviour != "flip"
        );
    }
    let e = spec(&format!(
        "{base}robust = {{ honest_fraction = 0.5, adversaries = 4 }}"
    ))
    .build(&ctx)
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("algorithm.robust.adversaries"), "{e}");
    let (big, _) = federation(logistic(), 6, 400, 8, 4.0);
    let e = spec(&format!("{base}robust = {{ honest_fraction = 0.5 }}"))
        .build(&big)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("honest_fraction"), "{e}");
}

#[test]
fn new_kinds_plan_once_and_halves_calibrate_nothing() {
    use dpfl::algo::context::calibrations_on_this_thread;
    use dpfl::plan::{Plan, Setup, server_half, silo_half};
    use dpfl::units::SiloId;
    for (model, text, eps) in [
        ("logistic", "kind = \"pagd\"\nsmoothness = 0.25", 2.0),
        (
            "hinge",
            "kind = \"pagd\"\nsmoothing = \"theory\"\nshuffler = \"trusted\"",
            2.0,
        ),
        (
            "logistic",
            "kind = \"pan-private-acsa\"\nsmoothness = 0.25",
            0.5,
        ),
        ("hinge", "kind = \"pan-private-acsa\"\nsmoothing = 3.0", 0.5),
    ] {
        let setup = Setup {
            model: toml::from_str(&format!("kind = \"{model}\"")).unwrap(),
            features: 2,
            classes: Some(2),
            clip: None,
            lipschitz: 1.0,
            rounds: 5,
            participation: Participation::All,
            projection: Projection::L2Ball { radius: 10.0 },
            noise: Default::default(),
            enforce_budget: false,
            silos: (0..3)
                .map(|i| {
                    SiloInfo::new(SiloId::new(i as u32), 100 + 10 * i, Some((eps, 1e-5))).unwrap()
                })
                .collect(),
        };
        let alg = spec(text);
        let before = calibrations_on_this_thread();
        let plan = Plan::new(setup, &alg).unwrap();
        assert_eq!(calibrations_on_this_thread() - before, 3, "{text}");
        let back: Plan = toml::from_str(&toml::to_string(&plan).unwrap()).unwrap();
        assert_eq!(back, plan, "{text}");
        let before = calibrations_on_this_thread();
        let server = server_half(&back).unwrap();
        let silos: Vec<_> = (0..3)
            .map(|i| silo_half(&back, SiloId::new(i)).unwrap())
            .collect();
        assert_eq!(calibrations_on_this_thread(), before, "{text}");
        assert_eq!(server.dim(), 2);
        for (i, s) in silos.iter().enumerate() {
            assert_eq!(s.noise_std(), plan.calibration[i].sigma, "{text}");
            assert_eq!(
                s.round_event(Round::FIRST).map(|e| e.repeated(5)),
                plan.calibration[i].run_event,
                "{text}"
            );
        }
    }
}

#[test]
fn the_example_experiments_run() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    for name in [
        "shuffle-pagd.toml",
        "shuffle-pagd-smoothed.toml",
        "shuffle-pagd-strongly-convex.toml",
        "shuffle-pan-private.toml",
        "shuffle-pagd-robust.toml",
    ] {
        let text = std::fs::read_to_string(root.join(name)).unwrap();
        let spec = dpfl_lab::experiment::ExperimentSpec::from_toml(&text, name).unwrap();
        let mut rng = DpRng::from_seed(5, Purpose::Data, 0);
        let trial = dpfl_lab::experiment::prepare_trial(&spec, None, &mut rng).unwrap();
        for a in &spec.algorithms {
            let run = dpfl_lab::experiment::train_one(&spec, &a.spec, &trial, Some(7), 5, |_| {})
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(run.final_model.iter().all(|v| v.is_finite()), "{name}");
        }
    }
}

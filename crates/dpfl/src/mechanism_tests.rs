//! Issue 28 item 2: every noise source is a `Mechanism` whose event is what its silo's ledger
//! charges. Per wing: one simulated round's charged events (`Simulator::spent`, what the
//! ledgers see) equal the mechanism's own event, value for value; and a silo half keeps no
//! event of its own: the same half built with other noise charges another event, the new
//! mechanism's.
//!
//! Unit tests of the crate (moved from `tests/it/mechanisms.rs`, issue 28 item 5): they probe
//! each wing's crate-private mechanism types, which the public face does not show.

use std::sync::Arc;

use crate::algo::gradient::{BatchSource, GradientSilo};
use crate::algo::normfedavg::NoisePlan;
use crate::algo::normfedavg::{
    BetaSchedule, BudgetSpec, NormFedAvgSpec, QuantPrivacy, SensitivitySpec, TdlCalibration,
    Variant,
};
use crate::algo::normfedavg::{Encoder, IntNoise};
use crate::algo::shuffle::pan::{PanPrivatePair, PanPrivateSilo};
use crate::algo::shuffle::pvec::{Against, PvecRandomizer, PvecSilo, Transport};
use crate::algo::soteria::silo::SiloNoise;
use crate::algo::soteria::{Method, SoteriaSpec};
use crate::algo::{AlgorithmSpec, BuildContext, BuiltAlgorithm, Round, SiloHalf};
use crate::algo::{FederationInfo, SiloInfo};
use crate::data::{Dataset, SiloData, Target};
use crate::linalg::Matrix;
use crate::model::{GradientOracle, LogisticRegression, Projection};
use crate::sim::{Participation, Simulator};
use crate::units::SiloId;
use dpfl_privacy::event::Sampling;
use dpfl_privacy::sampler::{BatchSampler, RecordSampling};
use dpfl_privacy::shuffle::params::{PvecParams, PvecRule, Scale};
use dpfl_privacy::shuffle::protocol::Pvec;
use dpfl_privacy::{GaussianMechanism, GaussianNoise, Mechanism, PrivacyEvent};

/// `silos` silos of `n` records in d = 2 (L = 1), budget (ε, 1e-5) each.
/// (`dpfl_testkit::separable_federation`, which a unit test cannot call: the testkit links
/// another copy of this crate.) x uniform in [−0.7, 0.7]², y = 1[x₀ > 0], train = test; L = 1,
/// the ball of radius 10, start at 0.
fn federation(silos: usize, n: usize, rounds: usize, eps: f64) -> (BuildContext, Vec<SiloData>) {
    let model = Arc::new(LogisticRegression::new(2, None).unwrap());
    let mut rng = dpfl_privacy::DpRng::from_seed(11, dpfl_privacy::rng::Purpose::Data, 0);
    let data = (0..silos)
        .map(|_| {
            let u = dpfl_privacy::sampler::uniforms(&mut rng, 2 * n);
            let x: Vec<f64> = u.iter().map(|v| (2.0 * v - 1.0) * 0.7).collect();
            let y: Vec<f64> = (0..n)
                .map(|i| f64::from(u8::from(x[2 * i] > 0.0)))
                .collect();
            let ds = || {
                Dataset::new(
                    Matrix::from_vec(n, 2, x.clone()).unwrap(),
                    y.clone(),
                    Target::Classes {
                        names: vec!["0".into(), "1".into()],
                    },
                    vec!["a".into(), "b".into()],
                )
                .unwrap()
            };
            SiloData {
                train: ds(),
                test: ds(),
            }
        })
        .collect();
    let ctx = BuildContext {
        federation: FederationInfo {
            dim: 2,
            silos,
            rounds,
            expected_participants: silos as f64,
        },
        silos: (0..silos)
            .map(|i| SiloInfo::new(SiloId::new(i as u32), n, Some((eps, 1e-5))).unwrap())
            .collect(),
        oracle: GradientOracle::new(model, None).unwrap(),
        lipschitz: 1.0,
        projection: Projection::L2Ball { radius: 10.0 },
        init: vec![0.0; 2],
        noise: Default::default(),
    };
    (ctx, data)
}

fn oracle() -> GradientOracle {
    GradientOracle::new(
        Arc::new(LogisticRegression::new(2, None).unwrap()),
        Some(1.0),
    )
    .unwrap()
}

/// What each silo's ledger is charged for one simulated round (exactly one event each).
fn charged(built: BuiltAlgorithm, data: &[SiloData], shuffle: bool) -> Vec<PrivacyEvent> {
    let mut sim = Simulator::new(data, built, Participation::All, Some(3)).unwrap();
    if shuffle {
        sim = sim.with_shuffle(Some(3)).unwrap();
    }
    sim.step().unwrap();
    sim.spent()
        .into_iter()
        .map(|s| {
            assert_eq!(s.len(), 1, "one charge a round");
            s[0].clone()
        })
        .collect()
}

/// The server of `built` with `silos` in place of its silo halves.
fn with_silos(built: BuiltAlgorithm, silos: Vec<Box<dyn SiloHalf>>) -> BuiltAlgorithm {
    BuiltAlgorithm {
        server: built.server,
        silos,
        calibration: built.calibration,
    }
}

#[test]
fn the_gaussian_is_charged_its_own_event_continuous_and_discrete() {
    let (ctx, data) = federation(3, 60, 4, 2.0);
    let spec: AlgorithmSpec = toml::from_str(
        "kind = \"mb-sgd\"\ncalibration = \"experiment\"\nstep_size = 0.5\nbatch_size = 30",
    )
    .unwrap();
    let built = spec.build(&ctx).unwrap();
    let rows = built.calibration.clone();
    let spent = charged(built, &data, false);
    for (row, event) in rows.iter().zip(&spent) {
        // N(0, σ²) on the mean of K = 30 gradients bounded by L = 1: Δ = 2L/K.
        let m = GaussianMechanism::new(row.sigma, 2.0 / 30.0).unwrap();
        let want = m.sampled_event(Sampling::WithReplacement {
            population: 60,
            draws: 30,
        });
        assert_eq!(*event, want);
        assert_eq!(row.run_event, Some(want.repeated(4)));
    }
    // The floor's gradient silo with a discrete Gaussian, at σ and at 2σ: each charges its
    // mechanism's discrete event (lattice sensitivity and dimension included).
    let noise = GaussianNoise::DiscreteGaussian {
        granularity: 1.0 / 1024.0,
    };
    let mech = |sigma: f64| GaussianMechanism::with_noise(noise, sigma, 0.1, 2).unwrap();
    let events: Vec<PrivacyEvent> = [0.3, 0.6]
        .iter()
        .map(|&sigma| {
            let silos: Vec<Box<dyn SiloHalf>> = (0..3)
                .map(|_| {
                    Box::new(GradientSilo::new(
                        oracle(),
                        BatchSource::sampled(RecordSampling::WithReplacement, 60, 20).unwrap(),
                        Some(mech(sigma)),
                        1.0,
                    )) as Box<dyn SiloHalf>
                })
                .collect();
            let spent = charged(with_silos(spec.build(&ctx).unwrap(), silos), &data, false);
            let want = mech(sigma).sampled_event(Sampling::WithReplacement {
                population: 60,
                draws: 20,
            });
            assert!(spent.iter().all(|e| *e == want), "{spent:?} vs {want:?}");
            let PrivacyEvent::Sampled { event, .. } = &want else {
                panic!("{want:?}")
            };
            assert!(
                matches!(**event, PrivacyEvent::DiscreteGaussian { dimension: 2, .. }),
                "{want:?}"
            );
            want
        })
        .collect();
    assert_ne!(events[0], events[1], "twice the noise, another event");
}

fn soteria(estimator: &str) -> SoteriaSpec {
    toml::from_str(&format!(
        "estimator = \"{estimator}\"\nstep_size = 0.1\ncalibration = \"closed-form\"\nbatch_size = 10"
    ))
    .unwrap()
}

#[test]
fn soteria_noise_is_charged_its_own_event_and_the_half_keeps_none() {
    let (ctx, data) = federation(3, 60, 5, 2.0);
    for (estimator, split) in [("sgd", false), ("svrg", true)] {
        let (plan, report) =
            crate::algo::soteria::plan::plan(&ctx, Method::SoteriaFl, &soteria(estimator)).unwrap();
        let g = plan.clip;
        // The mechanism each silo draws from, and the sampler it draws records with.
        let noise = |i: usize, sigma: f64| {
            let (m, b) = (plan.silos[i].records, plan.silos[i].batch_size);
            let n = if split {
                SiloNoise::split(sigma, g, b, m).unwrap()
            } else {
                SiloNoise::single(sigma, 2.0 * g / b as f64, true).unwrap()
            };
            let sampler = BatchSampler::new(plan.sampling, m, b).unwrap();
            n.round_event(Some(&sampler))
        };
        let spent = charged(plan.build(&ctx, report.clone()).unwrap(), &data, false);
        for (i, event) in spent.iter().enumerate() {
            let sigma = plan.silos[i].sigma.unwrap();
            assert_eq!(*event, noise(i, sigma), "{estimator} silo {i}");
            assert_eq!(report[i].run_event, Some(event.clone().repeated(5)));
            match (split, event) {
                // Lemma 3: the sampled A part and the unsampled full-batch B part.
                (true, PrivacyEvent::Composed(parts)) => {
                    assert!(
                        matches!(parts[0], PrivacyEvent::Sampled { .. }),
                        "{parts:?}"
                    );
                    assert!(
                        matches!(parts[1], PrivacyEvent::Gaussian { .. }),
                        "{parts:?}"
                    );
                }
                (false, PrivacyEvent::Sampled { .. }) => {}
                other => panic!("{other:?}"),
            }
        }
        // Twice the noise in the plan: the rebuilt half charges the new mechanism's event.
        let mut louder = plan.clone();
        let sigma = plan.silos[0].sigma.unwrap();
        louder.silos[0].sigma = Some(2.0 * sigma);
        let half = louder.silo_half(&ctx, 0).unwrap();
        let event = half.round_event(Round::FIRST).unwrap();
        assert_eq!(event, noise(0, 2.0 * sigma));
        assert_ne!(event, spent[0]);
    }
}

fn normfedavg(variant: Variant) -> NormFedAvgSpec {
    NormFedAvgSpec {
        local_steps: 1,
        batch_size: 1,
        momentum: 0.0,
        weight_decay: 0.0,
        privacy: Some(QuantPrivacy {
            s: 4,
            sensitivity: SensitivitySpec::Mu { mu: 0.1 },
            budget: BudgetSpec::PerRound {
                epsilon: 0.5,
                delta: 1e-3,
            },
            calibration: TdlCalibration::PaperClaim,
        }),
        ..NormFedAvgSpec::new(variant, 0.5, BetaSchedule::Constant { beta: 0.1 })
    }
}

#[test]
fn qtdl_and_binomial_encoders_are_charged_their_own_events_and_the_half_keeps_none() {
    let (ctx, data) = federation(2, 20, 3, 2.0);
    for variant in [Variant::DpNormFedAvg, Variant::Binomial] {
        let (plan, report) = crate::algo::normfedavg::plan(&ctx, &normfedavg(variant)).unwrap();
        let noise = plan.noise.unwrap();
        let encoder = |noise: &NoisePlan, i: usize| {
            let int = match *noise {
                NoisePlan::Tdl { m, alpha } => IntNoise::Tdl(
                    dpfl_privacy::qtdl::TruncatedDiscreteLaplace::new(m, alpha).unwrap(),
                ),
                NoisePlan::Binomial { n } => {
                    IntNoise::Binomial(dpfl_privacy::binomial::Binomial::new(n, 0.5).unwrap())
                }
            };
            Encoder::new(4, int, 2, plan.silos[i].accounting.unwrap()).unwrap()
        };
        let spent = charged(plan.build(&ctx, report.clone()).unwrap(), &data, false);
        for (i, event) in spent.iter().enumerate() {
            assert_eq!(*event, encoder(&noise, i).privacy_event(), "{variant:?}");
            assert_eq!(report[i].run_event, Some(event.clone().repeated(3)));
        }
        // Other noise in the plan: a wider TDL support gives the rebuilt half the new
        // encoder's event (a smaller correct δ), not the planned one; a quarter of the
        // Binomial's trials no longer gives cpSGD's ε, and the half is refused.
        let mut other = plan.clone();
        match noise {
            NoisePlan::Tdl { m, alpha } => {
                let wider = NoisePlan::Tdl { m: 4 * m, alpha };
                other.noise = Some(wider);
                let event = other
                    .silo_half(&ctx, 0)
                    .unwrap()
                    .round_event(Round::FIRST)
                    .unwrap();
                assert_eq!(event, encoder(&wider, 0).privacy_event());
                assert_ne!(event, spent[0]);
            }
            NoisePlan::Binomial { n } => {
                other.noise = Some(NoisePlan::Binomial { n: n / 4 });
                let e = other.silo_half(&ctx, 0).err().unwrap().to_string();
                assert!(e.contains("cpSGD"), "{e}");
            }
        }
    }
}

#[test]
fn pvec_randomizers_are_charged_their_own_events_and_the_half_keeps_none() {
    use crate::algo::shuffle::trust::{PvecTarget, ShufflerTrust, plan_pvec};
    let (ctx, data) = federation(50, 400, 10, 2.0);
    let disjoint = Sampling::Disjoint {
        population: 400,
        size: 1,
    };
    let target = PvecTarget {
        users: 50,
        d: 2,
        l2_bound: 1.0,
        scale: Scale::Paper,
        round: (2.0, 1e-5),
        uses: 1,
        budget: (2.0, 1e-5),
        rule: PvecRule::Paper,
    };
    for (text, trust, against) in [
        (
            "kind = \"psgd\"",
            ShufflerTrust::Untrusted,
            Against::OwnCounts { delta: 1e-5 },
        ),
        (
            "kind = \"psgd\"\nshuffler = \"trusted\"",
            ShufflerTrust::Trusted,
            Against::HonestShuffler {
                honest_fraction: None,
            },
        ),
    ] {
        let spec: AlgorithmSpec = toml::from_str(text).unwrap();
        let pvec = plan_pvec(&target, 1, trust).unwrap().pvec;
        let want = PvecRandomizer::new(pvec, 1, against)
            .unwrap()
            .sampled_event(disjoint.clone());
        let spent = charged(spec.build(&ctx).unwrap(), &data, true);
        assert!(spent.iter().all(|e| *e == want), "{text}: {:?}", spent[0]);
    }
    // A PVEC silo of K = 40 users with another calibration (ε = 1 instead of 2, so more
    // binomial noise) charges the other randomizer's event, under either trust model.
    let calibrated = |eps| {
        Pvec::new(PvecParams::calibrate(50, 2, 1.0, eps, 1e-5, Scale::Paper).unwrap()).unwrap()
    };
    let batch = Sampling::Disjoint {
        population: 400,
        size: 40,
    };
    for against in [
        Against::OwnCounts { delta: 1e-5 },
        Against::HonestShuffler {
            honest_fraction: None,
        },
    ] {
        let event = |eps| {
            let silo = PvecSilo::new(
                oracle(),
                calibrated(eps),
                Transport::Compact,
                400,
                40,
                against,
            )
            .unwrap();
            let e = silo.round_event(Round::FIRST).unwrap();
            let r = PvecRandomizer::new(calibrated(eps), 40, against).unwrap();
            assert_eq!(e, r.sampled_event(batch.clone()));
            let PrivacyEvent::Sampled { event, .. } = &e else {
                panic!("{e:?}")
            };
            let PrivacyEvent::EpsilonDelta { epsilon, .. } = **event else {
                panic!("{e:?}")
            };
            assert!(epsilon.is_finite(), "{against:?}: {e:?}");
            e
        };
        assert_ne!(event(1.0), event(2.0), "{against:?}");
    }
}

#[test]
fn the_pan_private_pair_is_charged_its_own_event_and_the_half_keeps_none() {
    // ε < 1 (Lemma C.5): budget (0.5, 1e-5).
    let (ctx, data) = federation(4, 200, 5, 0.5);
    let spec: AlgorithmSpec =
        toml::from_str("kind = \"pan-private-acsa\"\nsmoothness = 0.25").unwrap();
    let built = spec.build(&ctx).unwrap();
    let k = built.calibration[0].batch_size;
    let sigma = built.calibration[0].sigma;
    let spent = charged(built, &data, false);
    let disjoint = Sampling::Disjoint {
        population: 200,
        size: k as u64,
    };
    // Δ = 2L/K with L = 1.
    let pair = |eps| PanPrivatePair::new(&ctx, 2, 2.0 / k as f64, eps, 1e-5).unwrap();
    assert!(
        spent
            .iter()
            .all(|e| *e == pair(0.5).sampled_event(disjoint.clone()))
    );
    assert_eq!(
        pair(0.5).privacy_event(),
        PrivacyEvent::EpsilonDelta {
            epsilon: 0.5,
            delta: 1e-5
        }
    );
    // Two draws of ζ reach the output: the report's σ is √2·ζ of the pair.
    assert_eq!(sigma, std::f64::consts::SQRT_2 * pair(0.5).zeta());
    // The pair at ε = 0.8 draws less noise (ζ ∝ 1/ε) and the half built with it is charged
    // that pair's event.
    let (quiet, loud) = (pair(0.8), pair(0.5));
    assert!(quiet.zeta() < loud.zeta());
    let event = |p: PanPrivatePair| {
        PanPrivateSilo::new(oracle(), p, 200, k)
            .unwrap()
            .round_event(Round::FIRST)
            .unwrap()
    };
    assert_eq!(event(quiet), pair(0.8).sampled_event(disjoint.clone()));
    assert_ne!(event(loud), pair(0.8).sampled_event(disjoint));
    // Lemma C.5's (ε, δ) is the continuous Gaussian's: no pair on a discrete-Gaussian context.
    let mut discrete = ctx.clone();
    discrete.noise = GaussianNoise::DiscreteGaussian {
        granularity: 1.0 / 1024.0,
    };
    let e = PanPrivatePair::new(&discrete, 2, 2.0 / k as f64, 0.5, 1e-5)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("privacy.mechanism"), "{e}");
}

#[test]
fn the_trusted_shuffle_gaussian_is_charged_its_chain_at_its_own_sigma() {
    use crate::algo::shuffle::calibration::{
        SdpCalibration, SdpInputs, round_at, sdp_noise, shared_round,
    };
    use crate::algo::shuffle::honest::{HonestShuffle, HonestShuffleGaussian};
    // 50 equal silos, K = 20 of n = 400 with replacement, R = 10, budget (2, 1e-5), L = 1
    // (the federation clips at 1): every silo runs the chain's σ, each charged its chain's
    // round (ε, δ) at that σ.
    let (ctx, data) = federation(50, 400, 10, 2.0);
    let spec: AlgorithmSpec = toml::from_str(
        "kind = \"sdp-mb-sgd\"\nstep_size = 0.3\nbatch_size = 20\ncalibration = { kind = \"accountant\" }\nshuffler = \"trusted\"",
    )
    .unwrap();
    let x = SdpInputs {
        epsilon: 2.0,
        delta: 1e-5,
        records: 400,
        batch_size: 20,
        silos: 50,
        participants: 50,
        rounds: 10,
        lipschitz: ctx.lipschitz,
    };
    let noise = sdp_noise(&x, SdpCalibration::Accountant).unwrap();
    let (_, delta0) = noise.local.unwrap();
    let planned = shared_round(&x, noise.sigma, delta0).unwrap();
    let want = PrivacyEvent::EpsilonDelta {
        epsilon: planned.round.0,
        delta: planned.round.1,
    };
    let spent = charged(spec.build(&ctx).unwrap(), &data, true);
    assert!(
        spent.iter().all(|e| *e == want),
        "{:?} vs {want:?}",
        spent[0]
    );

    // The event is the mechanism's: the same silo with half the σ charges the chain at σ/2
    // (a larger ε), and with a σ far below the chain's domain its own sampled Gaussian event.
    let honest = HonestShuffle { chain: x, delta0 };
    let sampling = RecordSampling::WithReplacement;
    let silo = |sigma: f64| {
        let gaussian = GaussianMechanism::new(sigma, 2.0 / 20.0).unwrap();
        let noise = HonestShuffleGaussian::new(gaussian, honest).unwrap();
        GradientSilo::with_noise(
            oracle(),
            BatchSource::sampled(sampling, 400, 20).unwrap(),
            Some(Box::new(noise)),
            1.0,
        )
        .round_event(Round::FIRST)
        .unwrap()
    };
    assert_eq!(silo(noise.sigma), want);
    let (e_half, d_half) = round_at(&x, noise.sigma / 2.0, delta0).unwrap();
    assert!(e_half > planned.round.0, "{e_half} vs {:?}", planned.round);
    assert_eq!(
        silo(noise.sigma / 2.0),
        PrivacyEvent::EpsilonDelta {
            epsilon: e_half,
            delta: d_half
        }
    );
    let tiny = noise.sigma * 1e-5;
    assert!(round_at(&x, tiny, delta0).is_err());
    assert_eq!(
        silo(tiny),
        GaussianMechanism::new(tiny, 2.0 / 20.0)
            .unwrap()
            .sampled_event(Sampling::WithReplacement {
                population: 400,
                draws: 20
            })
    );
}

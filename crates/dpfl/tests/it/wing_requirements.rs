//! Every algorithm kind's [`Requirements`] as its planned run reports them
//! (`Plan::requirements`, issue 28 item 1): the experiment layer, `dpfl-net` and the CLI read
//! these instead of matching kinds, so each value is asserted here, per kind, together with
//! its privacy and how it takes a noise multiplier.

use dpfl::algo::wing::{Privacy, Requirements, Transport};
use dpfl::algo::{AlgorithmSpec, SiloInfo};
use dpfl::model::Projection;
use dpfl::plan::{Plan, Setup};
use dpfl::sim::Participation;
use dpfl::units::SiloId;

/// Four silos of 400 records at (0.9, 1e-5), R = 4, a bounded W (PSGD's default η needs D).
fn setup(participation: Participation) -> Setup {
    Setup {
        model: toml::from_str("kind = \"logistic\"").unwrap(),
        features: 2,
        classes: Some(2),
        clip: None,
        lipschitz: 1.0,
        rounds: 4,
        participation,
        projection: Projection::L2Ball { radius: 5.0 },
        noise: Default::default(),
        enforce_budget: false,
        silos: (0..4)
            .map(|i| SiloInfo::new(SiloId::new(i), 400, Some((0.9, 1e-5))).unwrap())
            .collect(),
    }
}

fn plan(text: &str) -> (AlgorithmSpec, Plan) {
    let alg: AlgorithmSpec = toml::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let plan = Plan::new(setup(Participation::All), &alg).unwrap_or_else(|e| panic!("{text}: {e}"));
    (alg, plan)
}

const PLAIN: Requirements = Requirements {
    shuffler: false,
    every_silo: false,
    fixed_participation: false,
    transport: Transport::Messages,
    quorum: None,
};

fn shuffled(transport: Transport, quorum: usize) -> Requirements {
    Requirements {
        shuffler: true,
        every_silo: false,
        fixed_participation: true,
        transport,
        quorum: Some(quorum),
    }
}

const EVERY_SILO: Requirements = Requirements {
    shuffler: false,
    every_silo: true,
    fixed_participation: false,
    transport: Transport::Messages,
    quorum: None,
};

/// (config, requirements, privacy, takes a noise multiplier), one or more per kind.
fn cases() -> Vec<(&'static str, Requirements, Privacy, bool)> {
    use Privacy::*;
    vec![
        (
            "kind = \"mb-sgd\"\ncalibration = \"accountant\"\nstep_size = 0.5\nbatch_size = 20",
            PLAIN,
            SiloNoise,
            true,
        ),
        (
            "kind = \"mb-sgd\"\nstep_size = 0.5\nbatch_size = 20",
            PLAIN,
            NonPrivate,
            true,
        ),
        (
            "kind = \"local-sgd\"\ncalibration = \"accountant\"\nstep_size = 0.1\nlocal_steps = 2",
            PLAIN,
            SiloNoise,
            true,
        ),
        (
            "kind = \"local-sgd\"\nstep_size = 0.1\nlocal_steps = 2",
            PLAIN,
            NonPrivate,
            true,
        ),
        (
            "kind = \"accelerated-mb-sgd\"\nsampling = \"erm\"\ncalibration = \"accountant\"\nstep_size = 1.0\nbatch_size = 20",
            PLAIN,
            SiloNoise,
            true,
        ),
        (
            "kind = \"noisy-mb-sgd\"\ncalibration = \"accountant\"\nstep_size = 0.5\nbatch_size = 20\nsampling = \"without-replacement\"",
            PLAIN,
            SiloNoise,
            true,
        ),
        (
            "kind = \"sdp-mb-sgd\"\nstep_size = 0.5\nbatch_size = 20\ncalibration = { kind = \"accountant\" }",
            shuffled(Transport::Messages, 4),
            Shuffled,
            false,
        ),
        (
            "kind = \"sdp-accelerated-mb-sgd\"\nstep_size = 1.0",
            shuffled(Transport::PvecCompact, 4),
            Shuffled,
            false,
        ),
        (
            "kind = \"psgd\"\nstep_size = 0.5\nmin_participants = 3",
            shuffled(Transport::PvecCompact, 3),
            Shuffled,
            false,
        ),
        (
            "kind = \"pgd\"\nstep_size = 0.5",
            shuffled(Transport::PvecCompact, 4),
            Shuffled,
            false,
        ),
        (
            "kind = \"pagd\"\nsmoothness = 1.0\ndiameter = 10.0\nshuffler = \"trusted\"\nrobust = { honest_fraction = 0.5 }",
            shuffled(Transport::PvecCompact, 2),
            Shuffled,
            false,
        ),
        (
            "kind = \"pan-private-acsa\"\nsmoothness = 0.25\nbatch_size = 10\ndiameter = 10.0",
            PLAIN,
            PanPrivate,
            false,
        ),
        (
            "kind = \"norm-fed-avg\"\nstep_size = 0.1\nlocal_steps = 2\nbatch_size = 20\n\
             variant = { kind = \"dp-norm-fed-avg\" }\nprivacy = { s = 64, sensitivity = \
             { kind = \"worst-case\" }, budget = { kind = \"per-round\", epsilon = 0.1, delta \
             = 1e-6 } }",
            PLAIN,
            SiloNoise,
            false,
        ),
        (
            "kind = \"norm-fed-avg\"\nstep_size = 0.1\nlocal_steps = 2\nbatch_size = 20\n\
             variant = { kind = \"fed-avg\" }",
            PLAIN,
            NonPrivate,
            false,
        ),
        (
            "kind = \"soteria-fl\"\nstep_size = 0.3\nbatch_size = 20",
            EVERY_SILO,
            SiloNoise,
            true,
        ),
        (
            "kind = \"soteria-fl\"\nestimator = \"svrg\"\nstep_size = 0.3\nbatch_size = 20",
            EVERY_SILO,
            SiloNoise,
            false,
        ),
        (
            "kind = \"cdp-sgd\"\nstep_size = 0.3\nbatch_size = 20",
            EVERY_SILO,
            SiloNoise,
            true,
        ),
        (
            "kind = \"ldp-sgd\"\nstep_size = 0.3\nbatch_size = 20",
            EVERY_SILO,
            SiloNoise,
            true,
        ),
        (
            "kind = \"ldp-svrg\"\nstep_size = 0.3\nbatch_size = 20",
            EVERY_SILO,
            SiloNoise,
            false,
        ),
        (
            "kind = \"q-dpsgd-1\"\nstep_size = 0.3\nbatch_size = 20",
            EVERY_SILO,
            SiloNoise,
            true,
        ),
        (
            "kind = \"q-dpsgd-1\"\nstep_size = 0.3\nbatch_size = 20\ncalibration = \"none\"",
            EVERY_SILO,
            NonPrivate,
            true,
        ),
    ]
}

#[test]
fn each_kind_plans_with_its_requirements_privacy_and_multiplier_rule() {
    let cases = cases();
    for (text, needs, privacy, multiplier) in &cases {
        let (alg, plan) = plan(text);
        assert_eq!(plan.requirements(), *needs, "{text}");
        // The unplanned algorithm says the same, without the quorum.
        assert_eq!(
            alg.requirements(),
            Requirements {
                quorum: None,
                ..*needs
            },
            "{text}"
        );
        assert_eq!(plan.shuffle_quorum(), needs.quorum, "{text}");
        assert_eq!(alg.needs_shuffler(), needs.shuffler, "{text}");
        assert_eq!(alg.privacy(), *privacy, "{text}");
        assert_eq!(alg.is_private(), *privacy != Privacy::NonPrivate, "{text}");
        assert_eq!(alg.accepts_noise_multiplier(), *multiplier, "{text}");
        assert_eq!(
            alg.noise_multiplier_refusal().is_empty(),
            *multiplier,
            "{text}"
        );
    }
    // Every kind of the serde enum has a case (a new kind must add one).
    let kinds: std::collections::BTreeSet<String> = cases
        .iter()
        .map(|(t, ..)| t.lines().next().unwrap().to_string())
        .collect();
    assert_eq!(kinds.len(), 16, "{kinds:#?}");
}

/// Explicit PVEC (one message per bit) is refused over the network from this requirement;
/// it plans only at tiny sizes, so it is read here from the unplanned algorithm.
#[test]
fn explicit_pvec_is_its_own_transport() {
    for kind in [
        "kind = \"sdp-accelerated-mb-sgd\"\nstep_size = 1.0",
        "kind = \"psgd\"",
        "kind = \"pgd\"",
    ] {
        let alg: AlgorithmSpec =
            toml::from_str(&format!("{kind}\ntransport = \"explicit\"")).unwrap();
        let needs = alg.requirements();
        assert_eq!(needs.transport, Transport::PvecExplicit, "{kind}");
        assert!(needs.transport.is_pvec() && needs.shuffler, "{kind}");
    }
    assert!(!Transport::Messages.is_pvec());
}

/// A fixed-M rule gives the shuffle quorum its M; participation the shuffle model does not
/// allow is refused by the experiment layer from `fixed_participation` (the requirement).
#[test]
fn the_quorum_follows_fixed_participation() {
    let alg: AlgorithmSpec = toml::from_str(
        "kind = \"sdp-mb-sgd\"\nstep_size = 0.5\nbatch_size = 20\ncalibration = { kind = \"accountant\" }",
    )
    .unwrap();
    let plan = Plan::new(setup(Participation::Fixed { m: 3 }), &alg).unwrap();
    assert_eq!(plan.requirements().quorum, Some(3));
    assert!(plan.requirements().fixed_participation);
}

/// The grid knobs a reproduction turns, read and written through the wing.
#[test]
fn grid_knobs_turn_the_step_and_batch_where_the_wing_has_them() {
    let alg: AlgorithmSpec = toml::from_str(
        "kind = \"mb-sgd\"\ncalibration = \"experiment\"\nstep_size = 0.5\nbatch_size = 20",
    )
    .unwrap();
    assert_eq!(alg.knobs().step_size, Some(0.5));
    assert!(alg.knobs().app_i_batch_floor);
    let t = alg.tuned(0.25, Some(7));
    assert_eq!(t.knobs().step_size, Some(0.25));
    let AlgorithmSpec::MbSgd(m) = &t else {
        panic!("{t:?}")
    };
    assert_eq!(m.batch_size, Some(7));
    // PAGD's steps are its preset's: η stays unset, K is turned.
    let pagd: AlgorithmSpec = toml::from_str("kind = \"pagd\"\nsmoothness = 1.0").unwrap();
    assert_eq!(pagd.knobs().step_size, None);
    let AlgorithmSpec::Pagd(p) = pagd.tuned(0.25, Some(9)) else {
        panic!("not pagd")
    };
    assert_eq!(p.batch_size, Some(9));
    // A SoteriaFL kind stays its kind.
    let cdp: AlgorithmSpec =
        toml::from_str("kind = \"cdp-sgd\"\nstep_size = 0.3\nbatch_size = 20").unwrap();
    let t = cdp.tuned(0.1, Some(5));
    assert_eq!(t.default_label(), "CDP-SGD");
    let AlgorithmSpec::CdpSgd(s) = t else {
        panic!("not cdp-sgd")
    };
    assert_eq!((s.step_size, s.batch_size), (0.1, Some(5)));
}

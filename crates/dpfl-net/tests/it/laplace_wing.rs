//! Issue 28 item 6 over the network: the testkit's `laplace-mb-sgd` wing, defined outside
//! `dpfl` and registered in this test program, planned once into a federation file (as `dpfl
//! federate` writes one), read back by the server and three silos of the real gRPC + TLS
//! runtime on 127.0.0.1, trained for 6 rounds: the server's final model equals the simulator's
//! bit for bit for the same seed and plan, and every silo's durable ledger holds exactly the
//! 6 rounds' Laplace events (ε₀ = 0.5 each: noise multiplier 1/ε₀ = 2), as the simulator's
//! ledgers do.

use crate::common;

use std::path::{Path, PathBuf};

use dpfl::run::{Ledgers, OnDiverged, RunOptions};
use dpfl::sim::Simulator;
use dpfl_lab::experiment::{ExperimentSpec, TrialData, prepare_trial};
use dpfl_privacy::rng::Purpose;
use dpfl_privacy::{DpRng, PrivacyEvent};
use dpfl_testkit::laplace_mbsgd;

const SILOS: usize = 3;
const ROUNDS: usize = 6;
const SEED: u64 = 7;

/// The trial's silos (drawn again for each runner: data sets are not `Clone`).
fn trial(exp: &ExperimentSpec) -> TrialData {
    prepare_trial(exp, None, &mut DpRng::from_seed(11, Purpose::Data, 0)).unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn bits(w: &[f64]) -> Vec<u64> {
    w.iter().map(|x| x.to_bits()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_laplace_wing_runs_over_the_network_as_in_the_simulator() {
    laplace_mbsgd::register().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let text = laplace_mbsgd::example_experiment(ROUNDS, 3);
    write(dir, "experiment.toml", &text);
    let exp = ExperimentSpec::from_toml(&text, "<laplace>").unwrap();
    let for_sim = trial(&exp);
    let setup = dpfl_lab::experiment::setup(&exp, &for_sim).unwrap();
    let records: Vec<usize> = for_sim.silos.iter().map(|s| s.train.len()).collect();
    let classes = setup
        .classes
        .map_or(String::new(), |c| format!("classes = {c}\n"));
    dpfl_net::certs::dev_pki(&dir.join("certs"), SILOS).unwrap();
    let federation = format!(
        "experiment = \"experiment.toml\"\nseed = {SEED}\n[public]\nrecords = {records:?}\n\
         features = {}\n{classes}lipschitz = 1.0\n[server]\naddress = \"127.0.0.1:0\"\n\
         address_file = \"server.addr\"\nstate_dir = \"server\"\nround_deadline_ms = 30000\n\
         start_timeout_ms = 30000\nheartbeat_timeout_ms = 30000\n[tls]\ndir = \"certs\"\n",
        setup.features
    );
    // Planned once from the experiment, then written into the federation file as `dpfl
    // federate` writes it: every process reads the plan (with the registered wing's config and
    // plan in it) back from the file, and calibrates nothing.
    let planned = common::load(&write(dir, "planned.toml", &federation));
    let mut config = planned.config.clone();
    config.plan = Some(planned.plan.clone());
    let path = write(dir, "federation.toml", &toml::to_string(&config).unwrap());
    let fed = dpfl_net::Federation::load(&path).unwrap();
    assert_eq!(fed.plan, planned.plan, "the plan reads back as written");
    assert!(matches!(
        fed.algorithm,
        dpfl::algo::AlgorithmSpec::Custom(ref c) if c.kind() == "laplace-mb-sgd"
    ));
    assert!(fed.plan.setup.enforce_budget);

    let server = dpfl_net::server::Server::bind(fed.clone()).await.unwrap();
    let server = tokio::spawn(server.run());
    let silos: Vec<_> = trial(&exp)
        .silos
        .into_iter()
        .enumerate()
        .map(|(id, data)| {
            let s = dpfl_net::silo::Silo::new(
                fed.clone(),
                id as u32,
                data,
                dpfl_net::silo::Start::Fresh,
            )
            .unwrap();
            tokio::spawn(s.run())
        })
        .collect();
    let outcome = server.await.unwrap().unwrap();
    assert!(outcome.finished());
    let all: Vec<u32> = (0..ROUNDS as u32).collect();
    for (id, s) in silos.into_iter().enumerate() {
        let report = s.await.unwrap().unwrap();
        assert_eq!(report.answered, all, "silo {id}");
        assert!(report.refused.is_empty(), "silo {id}");
    }
    assert!(
        outcome.log.iter().all(|l| l.participants == SILOS),
        "{:?}",
        outcome.log
    );

    // The simulator on the same plan, data and seed, with the ledgers the experiment asks for.
    let ctx = fed.plan.context().unwrap();
    let built = fed.plan.build_with(&ctx).unwrap();
    let opts = RunOptions::seeded(
        fed.plan.setup.participation.clone(),
        Some(SEED),
        Ledgers::Enforce,
    );
    let mut sim =
        Simulator::start(&for_sim.silos, built, &ctx, &fed.plan.requirements(), opts).unwrap();
    sim.drive(ROUNDS, OnDiverged::Fail, |_, _, _| Ok(()))
        .unwrap();
    let w = sim.output();
    assert_eq!(
        bits(&outcome.model),
        bits(&w),
        "network {:?} vs simulator {w:?}",
        outcome.model
    );
    assert!(w.iter().any(|&x| x != 0.0));

    let event = PrivacyEvent::Laplace {
        noise_multiplier: 2.0,
    };
    for (i, spent) in sim.spent().into_iter().enumerate() {
        let cell = fed
            .silo_state_dir(i as u32)
            .join(dpfl_net::ledger::ROUND_LEDGER);
        let charged = dpfl_net::ledger::read_events(&cell).unwrap();
        assert_eq!(charged, vec![event.clone(); ROUNDS], "silo {i}");
        assert_eq!(
            charged, spent,
            "silo {i}: the network's ledger is the simulator's"
        );
        let mut rounds = dpfl_net::ledger::charged_rounds(&cell).unwrap();
        rounds.sort_unstable();
        assert_eq!(rounds, (0..ROUNDS as u64).collect::<Vec<_>>(), "silo {i}");
    }
}

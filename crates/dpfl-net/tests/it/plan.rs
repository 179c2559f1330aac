//! A run is planned once and each process builds only its own half (issue 10): with
//! `calibration = "accountant"` the planner calibrates N times, and a server and every silo
//! building from the federation file's `[plan]` calibrate nothing.

use crate::common;

use dpfl::algo::context::calibrations_on_this_thread;
use dpfl_net::Federation;

const EXPERIMENT: &str = r#"
name = "net-plan"
rounds = 4
seed = 3
[data]
source = { kind = "synthetic", task = "binary", silos = 3, train = 40, test = 5, features = 3 }
[model]
kind = "logistic"
[privacy]
epsilon = 2.0
delta = 1e-4
lipschitz = 1.0
[[algorithms]]
kind = "mb-sgd"
calibration = "accountant"
step_size = 0.5
batch_size = 8
"#;

#[test]
fn a_run_is_planned_once_and_each_process_builds_only_its_half() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::write(dir.join("experiment.toml"), EXPERIMENT).unwrap();
    let hand_written = dir.join("federation.toml");
    std::fs::write(
        &hand_written,
        "experiment = \"experiment.toml\"\n[public]\nrecords = [40, 40, 40]\nfeatures = 3\n\
         classes = 2\nlipschitz = 1.0\n[server]\naddress = \"127.0.0.1:0\"\n\
         state_dir = \"server\"\n[tls]\ndir = \"certs\"\n",
    )
    .unwrap();
    // A file without a plan cannot be loaded without a planner.
    let e = Federation::load(&hand_written).unwrap_err().to_string();
    assert!(e.contains("no [plan]"), "{e}");

    // The planner (what `dpfl federate` runs once): N = 3 calibrations.
    let before = calibrations_on_this_thread();
    let fed = common::load(&hand_written);
    assert_eq!(calibrations_on_this_thread() - before, 3);
    assert_eq!(fed.plan.calibration.len(), 3);

    // The file `dpfl federate` writes: the same with its plan.
    let mut config = fed.config.clone();
    config.plan = Some(fed.plan.clone());
    let planned = dir.join("federation-0.toml");
    std::fs::write(&planned, toml::to_string(&config).unwrap()).unwrap();

    let before = calibrations_on_this_thread();
    // The server process: its half only.
    let server = Federation::load(&planned).unwrap();
    assert_eq!(
        server.plan, fed.plan,
        "the plan round-trips through the file"
    );
    dpfl::plan::server_half(&server.plan).unwrap();
    // Each silo process: its own half, judged against its own budget first.
    let local = dpfl_net::config::LocalBudget {
        epsilon: Some(2.0),
        delta: Some(1e-4),
        neighbouring: dpfl_privacy::Neighbouring::ReplaceOne,
        enforce: true,
    };
    for id in 0..3u32 {
        let silo = Federation::load(&planned).unwrap();
        let spend = dpfl_net::config::check_plan(&silo, id, &local)
            .unwrap()
            .unwrap();
        assert_eq!(spend.rounds, 4);
        let half = dpfl::plan::silo_half(&silo.plan, dpfl::units::SiloId::new(id)).unwrap();
        assert_eq!(
            half.noise_std().to_bits(),
            fed.plan.calibration[id as usize].sigma.to_bits()
        );
    }
    assert_eq!(
        calibrations_on_this_thread(),
        before,
        "building halves from a plan calibrates nothing"
    );

    // A plan made for another federation is refused.
    let mut other = config.clone();
    other.public.records = vec![40, 40, 41];
    let wrong = dir.join("federation-wrong.toml");
    std::fs::write(&wrong, toml::to_string(&other).unwrap()).unwrap();
    let e = Federation::load(&wrong).unwrap_err().to_string();
    assert!(e.contains("plan.setup"), "{e}");
}

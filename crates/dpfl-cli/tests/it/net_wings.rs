//! The wings of issues 13–15 over the network: federations of separate `dpfl` processes on
//! 127.0.0.1 train SoteriaFL (a silo SIGKILLed and restarted mid-run), DP-NormFedAvg (t-bit
//! packed messages) and the shuffle-model algorithms (through the real shuffler), and each
//! ends where the simulator ends for the same seed.

use crate::common;
use common::{
    Started, bits, dpfl, participants, prepare, prepare_only_args, simulated_run, spawn,
    spawn_silo, start, wait_exit, wait_until,
};

use std::path::{Path, PathBuf};
use std::time::Duration;

use dpfl_lab::experiment::{self, ExperimentSpec};

/// The simulator's run of algorithm 0 of trial 0, evaluated once at the end.
fn simulated(exp: &Path) -> experiment::SingleRun {
    let spec = ExperimentSpec::from_file(exp).unwrap();
    simulated_run(exp, spec.rounds).1
}

fn checkpoint(alg: &Path) -> Option<dpfl_net::checkpoint::Checkpoint> {
    let path = alg.join("server/checkpoint");
    let bytes = dpfl_net::store::Cell::read(&path).ok().flatten()?;
    dpfl_net::checkpoint::Checkpoint::decode(&path, &bytes).ok()
}

fn checkpoint_round(alg: &Path) -> u32 {
    checkpoint(alg).map_or(0, |c| c.next_round.get())
}

/// (bytes the server received from round 0's opening on, messages aggregated).
fn wire(alg: &Path) -> (u64, u64) {
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(alg.join("server/wire.json")).unwrap())
            .unwrap();
    (
        v["received_in_rounds"].as_u64().unwrap(),
        v["messages"].as_u64().unwrap(),
    )
}

/// Every silo's ledger charged each round exactly once.
fn assert_charged_once(alg: &Path, silos: usize, rounds: u64) {
    for i in 0..silos {
        let cell = alg.join(format!("silo-{i}/ledger"));
        let mut charged = dpfl_net::ledger::charged_rounds(&cell).unwrap();
        charged.sort_unstable();
        assert_eq!(charged, (0..rounds).collect::<Vec<_>>(), "silo {i}");
    }
}

const SOTERIA_FEATURES: usize = 10_000;
const SOTERIA_ROUNDS: u32 = 30;

fn soteria_experiment() -> String {
    soteria_experiment_with("svrg", SOTERIA_FEATURES)
}

fn soteria_experiment_with(estimator: &str, features: usize) -> String {
    format!(
        r#"
name = "soteria-net"
rounds = {SOTERIA_ROUNDS}
seed = 11
[data]
source = {{ kind = "synthetic", task = "binary", silos = 3, train = 40, test = 10, features = {features}, shift = 0.5 }}
[model]
kind = "nonconvex-logistic"
lambda = 0.2
[privacy]
epsilon = 4.0
delta = 1e-3
lipschitz = 0.5
[[algorithms]]
kind = "soteria-fl"
estimator = "{estimator}"
step_size = 0.5
calibration = "{calibration}"
compressor = {{ kind = "random-k", fraction = 0.05, indices = "seed" }}
"#,
        // A private SAGA run is refused (its table is hidden state, issue 27 finding 8).
        calibration = if estimator == "saga" {
            "none"
        } else {
            "accountant"
        }
    )
}

/// Issue 13 item 6: SoteriaFL-SVRG with random-k (seed-encoded indices) over the network. Silo
/// 1 is SIGKILLed mid-run and restarted; the round waits for it (SoteriaFL needs every silo
/// every round), the silo resumes from its stored shift, SVRG snapshot and generator; later
/// the server is SIGKILLed and restarted from its checkpoint; and:
/// every round aggregated all three silos, every ledger charged each round once, the final
/// model is the simulator's bit for bit, the server's shift is the mean of the silos' shifts,
/// and the bytes the (resumed) server received in its rounds are within 1.2x of the
/// compressor's exact encoded bits (the simulator's `uplink_bits`).
#[test]
fn soteria_svrg_survives_a_killed_silo_with_its_shifts_in_sync() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp.toml");
    std::fs::write(&exp, soteria_experiment()).unwrap();
    let Started {
        cfg,
        shards,
        mut server,
        mut silos,
    } = start(tmp.path(), &exp, &[], "min_round_ms = 150");
    let alg = cfg.parent().unwrap().join("alg-0");
    let logs = tmp.path();
    let c = cfg.to_str().unwrap();
    wait_until("round 5", Duration::from_secs(60), || {
        checkpoint_round(&alg) >= 5
    });
    silos[1].kill().unwrap(); // SIGKILL
    silos[1].wait().unwrap();
    let killed_at = checkpoint_round(&alg);
    // The round cannot close without silo 1: the server waits instead of aggregating a
    // short round (which would move its shift away from the silos' mean).
    std::thread::sleep(Duration::from_millis(800));
    assert!(
        checkpoint_round(&alg) <= killed_at + 1,
        "rounds went on without silo 1"
    );
    assert!(server.try_wait().unwrap().is_none(), "the server stopped");
    silos[1] = spawn_silo(&cfg, 1, &shards[1], &logs.join("silo-1-again.log"));
    // Then the server is SIGKILLed too, and restarted: it resumes from its checkpoint (its
    // shift included) and the silos answer the re-opened round with their stored bytes.
    wait_until(
        "four rounds with silo 1 back",
        Duration::from_secs(60),
        || checkpoint_round(&alg) >= killed_at + 4,
    );
    server.kill().unwrap();
    server.wait().unwrap();
    let server_killed_at = checkpoint_round(&alg);
    assert!(server_killed_at < SOTERIA_ROUNDS, "killed mid-training");
    let mut server = spawn(&["server", "--config", c], &logs.join("server-again.log"));
    let status = wait_exit(&mut server, Duration::from_secs(120));
    let server_log = std::fs::read_to_string(logs.join("server-again.log")).unwrap();
    assert!(status.success(), "{server_log}");
    assert!(
        server_log.contains("resuming from checkpoint"),
        "{server_log}"
    );
    for s in &mut silos {
        assert!(wait_exit(s, Duration::from_secs(30)).success());
    }
    let again = std::fs::read_to_string(logs.join("silo-1-again.log")).unwrap();
    assert!(again.contains("restored silo state"), "{again}");
    assert_eq!(participants(&alg), vec![3; SOTERIA_ROUNDS as usize]);
    assert_charged_once(&alg, 3, u64::from(SOTERIA_ROUNDS));

    // The simulator's run, bit for bit.
    let sim = simulated(&exp);
    let got = dpfl_net::server::read_model(&alg.join("server/model.bin")).unwrap();
    assert_eq!(got.len(), SOTERIA_FEATURES);
    assert_eq!(bits(&got), bits(&sim.final_model));

    // s = (1/n) Σ s_i after the last round (summation order aside).
    let d = SOTERIA_FEATURES;
    let server_shift = checkpoint(&alg).unwrap().half.vector("shift", d).unwrap();
    let mut mean = vec![0.0; d];
    for i in 0..3 {
        let (round, half) = dpfl_net::silo::stored_half(&alg.join(format!("silo-{i}")))
            .unwrap()
            .unwrap();
        assert_eq!(round, SOTERIA_ROUNDS - 1);
        let s = half.vector("shift", d).unwrap();
        mean.iter_mut().zip(&s).for_each(|(m, v)| *m += v / 3.0);
    }
    let scale = server_shift.iter().fold(1e-300f64, |m, v| m.max(v.abs()));
    assert!(scale > 1e-6, "the shift moved");
    for (j, (a, b)) in server_shift.iter().zip(&mean).enumerate() {
        assert!((a - b).abs() <= 1e-12 * scale, "coordinate {j}: {a} vs {b}");
    }

    // Wire bytes against the compressor's exact bits.
    let exact_bits = sim.extended.last().unwrap().uplink_bits;
    // Every message has k = 5% of d values and a seed: the same exact size. The restarted
    // server counts its own rounds (silo reconnections included).
    let per_message_bits = exact_bits / (3 * u64::from(SOTERIA_ROUNDS));
    assert_eq!(per_message_bits * 3 * u64::from(SOTERIA_ROUNDS), exact_bits);
    let (received, messages) = wire(&alg);
    assert_eq!(
        messages,
        3 * u64::from(SOTERIA_ROUNDS - server_killed_at),
        "the resumed server's rounds"
    );
    let exact = messages * per_message_bits / 8;
    let ratio = received as f64 / exact as f64;
    eprintln!(
        "soteria wire: {received} bytes received in the resumed server's {messages} messages' \
         rounds, {exact} bytes of exact encoded messages ({per_message_bits} bits each), \
         ratio {ratio:.3}"
    );
    assert!((1.0..=1.2).contains(&ratio), "ratio {ratio}");
}

/// Issue 13 item 6 for SAGA: its per-record gradient table (m × d floats) is silo state. Silo
/// 2 is SIGKILLed mid-run and restarted; it resumes from its stored table, shift and
/// generator, and the run ends on the simulator's model bit for bit (a lost or stale table
/// would change every later SAGA estimate), with every round aggregating all three silos. The
/// run is non-private (a private SAGA run is refused), so no ledger is charged.
#[test]
fn soteria_saga_survives_a_killed_silo_with_its_table() {
    const D: usize = 2000;
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp.toml");
    std::fs::write(&exp, soteria_experiment_with("saga", D)).unwrap();
    let Started {
        cfg,
        shards,
        mut server,
        mut silos,
    } = start(tmp.path(), &exp, &[], "min_round_ms = 150");
    let alg = cfg.parent().unwrap().join("alg-0");
    let logs = tmp.path();
    wait_until("round 5", Duration::from_secs(60), || {
        checkpoint_round(&alg) >= 5
    });
    silos[2].kill().unwrap(); // SIGKILL
    silos[2].wait().unwrap();
    let killed_at = checkpoint_round(&alg);
    assert!(killed_at < SOTERIA_ROUNDS, "killed mid-training");
    silos[2] = spawn_silo(&cfg, 2, &shards[2], &logs.join("silo-2-again.log"));
    let status = wait_exit(&mut server, Duration::from_secs(120));
    let server_log = std::fs::read_to_string(logs.join("server.log")).unwrap();
    assert!(status.success(), "{server_log}");
    for s in &mut silos {
        assert!(wait_exit(s, Duration::from_secs(30)).success());
    }
    let again = std::fs::read_to_string(logs.join("silo-2-again.log")).unwrap();
    assert!(again.contains("restored silo state"), "{again}");
    assert_eq!(participants(&alg), vec![3; SOTERIA_ROUNDS as usize]);
    let sim = simulated(&exp);
    let got = dpfl_net::server::read_model(&alg.join("server/model.bin")).unwrap();
    assert_eq!(got.len(), D);
    assert_eq!(bits(&got), bits(&sim.final_model));
}

const NFA_FEATURES: usize = 2000;
const NFA_ROUNDS: usize = 6;

fn normfedavg_experiment() -> String {
    format!(
        r#"
name = "normfedavg-net"
rounds = {NFA_ROUNDS}
seed = 21
participation = {{ kind = "fixed", m = 3 }}
[data]
source = {{ kind = "synthetic", task = "binary", silos = 4, train = 40, test = 10, features = {NFA_FEATURES}, shift = 0.5 }}
[model]
kind = "logistic"
[privacy]
epsilon = 10.0
delta = 1e-6
lipschitz = 1.0
[[algorithms]]
kind = "norm-fed-avg"
step_size = 0.1
local_steps = 2
batch_size = 16
variant = {{ kind = "dp-norm-fed-avg" }}
[algorithms.privacy]
s = 64
sensitivity = {{ kind = "mu", mu = 0.1 }}
budget = {{ kind = "per-round", epsilon = 10.0, delta = 1e-6 }}
"#
    )
}

/// Issue 14: DP-NormFedAvg (QTDL, s = 64) through `dpfl federate`, 3 of 4 silos a round. Each
/// silo's stored (= sent) body is its message as t-bit packed integers, never f64s; the server
/// received at most 1.2x t·d/8 bytes per message in the rounds; and the final model is the
/// simulator's bit for bit (integer sums in silo order, then one scaling, as in the simulator).
#[test]
fn dp_normfedavg_federates_with_t_bit_messages_and_ends_where_the_simulator_ends() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp.toml");
    std::fs::write(&exp, normfedavg_experiment()).unwrap();
    let out = tmp.path().join("run");
    let o = dpfl(&[
        "federate",
        "--config",
        exp.to_str().unwrap(),
        "--local",
        "--seeded",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let alg = out.join("trial-0/alg-0");
    assert_eq!(participants(&alg), vec![3; NFA_ROUNDS]);
    let sim = simulated(&exp);
    let got = dpfl_net::server::read_model(&alg.join("server/model.bin")).unwrap();
    assert_eq!(got.len(), NFA_FEATURES);
    assert_eq!(bits(&got), bits(&sim.final_model));

    // What each silo sent for its last round: one t-bit packed message of d integers.
    let mut widths = Vec::new();
    for i in 0..4 {
        let Some((round, bodies)) =
            dpfl_net::silo::stored_answer(&alg.join(format!("silo-{i}"))).unwrap()
        else {
            continue;
        };
        assert_eq!(bodies.len(), 1);
        let reply =
            dpfl_net::codec::decode_answer(&bodies[0], dpfl::algo::Round::new(round), NFA_FEATURES)
                .unwrap();
        match &reply.messages[0].payload {
            dpfl::algo::Payload::Packed(p) => {
                assert_eq!(p.len(), NFA_FEATURES);
                assert_eq!(
                    bodies[0].len() as u64,
                    17 + (p.bits() as u64 * NFA_FEATURES as u64).div_ceil(8)
                );
                widths.push(p.bits());
            }
            other => panic!("silo {i} sent {other:?}, not packed integers"),
        }
    }
    assert!(!widths.is_empty());
    let t = widths[0];
    assert!(
        widths.iter().all(|&w| w == t) && (2..=32).contains(&t),
        "{widths:?}"
    );
    let (received, messages) = wire(&alg);
    assert_eq!(messages, 3 * NFA_ROUNDS as u64);
    let payload = (u64::from(t) * NFA_FEATURES as u64).div_ceil(8);
    let ratio = received as f64 / (messages * payload) as f64;
    eprintln!(
        "normfedavg wire: t = {t}, d = {NFA_FEATURES}: {received} bytes in the rounds for \
         {messages} messages of t·d/8 = {payload} bytes: ratio {ratio:.3}"
    );
    assert!((1.0..=1.2).contains(&ratio), "ratio {ratio}");
}

fn shuffle_experiment(algorithm: &str) -> String {
    dpfl_testkit::experiment::Head::shuffle("shuffle-net", 5)
        .toml(&format!("[[algorithms]]\n{algorithm}\n"))
}

/// Runs `exp` through `dpfl federate --local` (its shuffle-model algorithm gets a shuffler
/// without `--shuffle`) and returns algorithm 0's state directory.
fn federate(dir: &Path, exp: &Path) -> PathBuf {
    let out = dir.join("run");
    let o = dpfl(&[
        "federate",
        "--config",
        exp.to_str().unwrap(),
        "--local",
        "--seeded",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let logs = std::fs::read_to_string(out.join("trial-0/logs/alg-0-shuffler.log")).unwrap();
    assert!(logs.contains("shuffler forwarded 5 batches"), "{logs}");
    out.join("trial-0/alg-0")
}

/// Issue 15: SDP MB-SGD (each silo's Gaussian-noised gradient, sealed to the server) through
/// the real shuffler process. Each silo draws the simulator's noise; the shuffler's permutation
/// (from the OS, unseeded) only reorders the server's sum, so the model equals the simulator's
/// up to summation order (1e-12 relative), whatever the permutation.
#[test]
fn sdp_mb_sgd_trains_through_the_real_shuffler() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp.toml");
    std::fs::write(
        &exp,
        shuffle_experiment(
            "kind = \"sdp-mb-sgd\"\nstep_size = 0.5\ncalibration = { kind = \"accountant\" }",
        ),
    )
    .unwrap();
    let alg = federate(tmp.path(), &exp);
    assert_eq!(participants(&alg), vec![4; 5]);
    let sim = simulated(&exp);
    let got = dpfl_net::server::read_model(&alg.join("server/model.bin")).unwrap();
    let scale = sim.final_model.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    assert!(got != vec![0.0; got.len()], "the model moved");
    for (a, b) in got.iter().zip(&sim.final_model) {
        assert!(
            (a - b).abs() <= 1e-12 * scale,
            "{got:?} vs {:?}",
            sim.final_model
        );
    }
    // Every message a silo sent went sealed: none is readable as a message or a share.
    for i in 0..4 {
        let (_, bodies) = dpfl_net::silo::stored_answer(&alg.join(format!("silo-{i}")))
            .unwrap()
            .unwrap();
        for b in &bodies {
            assert!(!b.starts_with(b"DPM1") && !dpfl_net::share::is_share_body(b));
        }
    }
    assert_charged_once(&alg, 4, 5);
}

/// Issue 15: PSGD (PVEC, compact transport) through the real shuffler. Each silo's counts
/// leave as two additive shares mod 2⁶⁴: the shuffler gets one in the clear (uniform on its
/// own; it forwards only the sum over silos), the server the other, sealed. The stored bodies
/// show it: one `DPSH` share whose values look uniform, one sealed body that only the server's
/// key opens, and only the two together give counts within PVEC's range. The analyzer's
/// counts are the exact sum, so the model equals the simulator's bit for bit, whatever the
/// shuffler's (unseeded) permutation.
#[test]
fn psgd_trains_through_the_real_shuffler_which_sees_only_shares() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp.toml");
    std::fs::write(&exp, shuffle_experiment("kind = \"psgd\"\nstep_size = 0.5")).unwrap();
    let alg = federate(tmp.path(), &exp);
    // The server counts the analyzer's messages: 4 sealed server shares, and the shuffler's
    // one sum standing for 4 shuffler shares.
    assert_eq!(participants(&alg), vec![8; 5]);
    let sim = simulated(&exp);
    let got = dpfl_net::server::read_model(&alg.join("server/model.bin")).unwrap();
    assert!(got != vec![0.0; got.len()], "the model moved");
    assert_eq!(bits(&got), bits(&sim.final_model));

    let key = std::fs::read(alg.join("server/hpke.key")).unwrap();
    let d = got.len();
    for i in 0..4 {
        let (round, bodies) = dpfl_net::silo::stored_answer(&alg.join(format!("silo-{i}")))
            .unwrap()
            .unwrap();
        assert_eq!(bodies.len(), 2, "two shares");
        let (shares, sealed): (Vec<_>, Vec<_>) = bodies
            .iter()
            .partition(|b| dpfl_net::share::is_share_body(b));
        assert_eq!((shares.len(), sealed.len()), (1, 1));
        let (count, to_shuffler) = dpfl_net::share::decode(shares[0], round, d).unwrap();
        assert_eq!(count, 1);
        // A uniform share has its top 32 bits all zero with probability 2^-32 per value.
        assert!(to_shuffler.iter().all(|&v| v >> 32 != 0), "{to_shuffler:?}");
        let plain = dpfl_net::seal::open(&key[..32], round, sealed[0]).unwrap();
        let m = dpfl_net::codec::decode_message(&plain, dpfl::algo::Round::new(round), d).unwrap();
        let dpfl::algo::Payload::Labelled { label, payload } = m.payload else {
            panic!("server share is not labelled")
        };
        assert_eq!(label, dpfl::algo::shuffle::TO_SERVER);
        let dpfl::algo::Payload::Packed(p) = *payload else {
            panic!("server share is not packed")
        };
        let to_server = p.unpack();
        assert!(to_server.iter().all(|&v| v >> 32 != 0));
        // Together: this silo's per-label counts, small numbers.
        let counts: Vec<u64> = to_shuffler
            .iter()
            .zip(&to_server)
            .map(|(a, b)| a.wrapping_add(*b))
            .collect();
        assert!(counts.iter().all(|&c| c < 1 << 32), "{counts:?}");
    }
    assert_charged_once(&alg, 4, 5);
}

/// Issue 15 item 2: PAGD (PVEC silos in front of AC-SA, compact shares through the real
/// shuffler) and pan-private AC-SA (no shuffler) federate with nothing of their own: the
/// wing's plan builds their halves, and the models equal the simulator's bit for bit.
#[test]
fn pagd_and_pan_private_acsa_federate_like_the_simulator() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp.toml");
    std::fs::write(
        &exp,
        shuffle_experiment(
            "kind = \"pagd\"\nsmoothness = 1.0\ndiameter = 10.0\nshuffler = \"trusted\"",
        ),
    )
    .unwrap();
    let alg = federate(tmp.path(), &exp);
    assert_eq!(participants(&alg), vec![8; 5]);
    let got = dpfl_net::server::read_model(&alg.join("server/model.bin")).unwrap();
    assert!(got != vec![0.0; got.len()], "the model moved");
    assert_eq!(bits(&got), bits(&simulated(&exp).final_model));
    assert_charged_once(&alg, 4, 5);

    let dir = tmp.path().join("pan");
    std::fs::create_dir_all(&dir).unwrap();
    let exp = dir.join("exp.toml");
    let text = shuffle_experiment("kind = \"pan-private-acsa\"\nsmoothness = 1.0\ndiameter = 10.0")
        .replace("epsilon = 2.0", "epsilon = 0.5");
    std::fs::write(&exp, text).unwrap();
    let out = dir.join("run");
    let o = dpfl(&[
        "federate",
        "--config",
        exp.to_str().unwrap(),
        "--local",
        "--seeded",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let alg = out.join("trial-0/alg-0");
    let got = dpfl_net::server::read_model(&alg.join("server/model.bin")).unwrap();
    assert_eq!(bits(&got), bits(&simulated(&exp).final_model));
    assert_charged_once(&alg, 4, 5);
}

/// A SoteriaFL silo that does not come back: the round is never aggregated short. At
/// `round_deadline_ms` the server exits 1 naming the silo, its checkpoint still at that round
/// (with the shift of the last full round), so a restart of both resumes there.
#[test]
fn a_soteria_round_missing_a_silo_past_the_deadline_stops_the_server_without_aggregating() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp.toml");
    let text =
        soteria_experiment().replace(&format!("features = {SOTERIA_FEATURES}"), "features = 50");
    std::fs::write(&exp, text).unwrap();
    let Started {
        cfg,
        mut server,
        mut silos,
        ..
    } = start(
        tmp.path(),
        &exp,
        &["--deadline-ms", "2500"],
        "min_round_ms = 100",
    );
    let alg = cfg.parent().unwrap().join("alg-0");
    let logs = tmp.path();
    wait_until("round 3", Duration::from_secs(60), || {
        checkpoint_round(&alg) >= 3
    });
    silos[2].kill().unwrap();
    silos[2].wait().unwrap();
    let status = wait_exit(&mut server, Duration::from_secs(30));
    let text = std::fs::read_to_string(logs.join("server.log")).unwrap();
    assert_eq!(status.code(), Some(1), "{text}");
    assert!(text.contains("needs every silo every round"), "{text}");
    assert!(text.contains("[2]"), "{text}");
    let ckpt = checkpoint(&alg).unwrap();
    assert!(ckpt.next_round.get() < SOTERIA_ROUNDS);
    assert!(
        ckpt.log.iter().all(|l| l.participants == 3),
        "{:?}",
        ckpt.log
    );
    for s in &mut silos[..2] {
        let _ = s.kill();
        let _ = s.wait();
    }
}

/// Over the network PVEC's explicit transport is refused (one sealed message per bit), and
/// a shuffle-model federation file without its `[shuffler]` is refused: exit 2, the field named.
#[test]
fn explicit_pvec_and_a_shuffle_algorithm_without_a_shuffler_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp.toml");
    std::fs::write(
        &exp,
        shuffle_experiment("kind = \"psgd\"\nstep_size = 0.5\ntransport = \"explicit\""),
    )
    .unwrap();
    let out = tmp.path().join("explicit");
    let o = dpfl(&prepare_only_args(&exp, &out, &[]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("algorithm.transport") && err.contains("compact"),
        "{err}"
    );

    std::fs::write(
        &exp,
        shuffle_experiment(
            "kind = \"sdp-mb-sgd\"\nstep_size = 0.5\ncalibration = { kind = \"accountant\" }",
        ),
    )
    .unwrap();
    let (cfg, _) = prepare(tmp.path(), &exp, &[], "min_round_ms = 0");
    let text = std::fs::read_to_string(&cfg).unwrap();
    let start = text.find("[shuffler]").expect("federate adds a shuffler");
    let end = text[start + 1..]
        .find("\n[")
        .map_or(text.len(), |e| start + 1 + e + 1);
    std::fs::write(&cfg, format!("{}{}", &text[..start], &text[end..])).unwrap();
    let o = dpfl(&["server", "--config", cfg.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("shuffler") && err.contains("needs a [shuffler]"),
        "{err}"
    );
}

/// Starts the shuffler of federation file `cfg`, logging into `dir/shuffler.log`.
fn spawn_shuffler(cfg: &Path, dir: &Path) -> std::process::Child {
    spawn(
        &["shuffler", "--config", cfg.to_str().unwrap()],
        &dir.join("shuffler.log"),
    )
}

/// PAGD over 4 silos with one silo SIGKILLed mid-run (issue 15, docs/shuffle.md "Dropouts
/// over the network"), in both regimes:
/// * calibrated for all 4 (default `min_participants`): the shuffler withholds the next
///   batch (3 < 4 silos would mean less binomial noise than the charged ε assumes), the
///   server exits 1 saying so, its checkpoint still at that round, nothing aggregated short;
/// * robust at γ = 1/2 (PVEC at γε, quorum ⌈γ·4⌉ = 2): the rounds go on with the 3 silos
///   that answer (6 analyzer messages instead of 8: the analyzer debiases with n' = 3K), the
///   run finishes, and the survivors' ledgers charged every round once.
///
/// Both: each silo's shuffler share travels unsealed to the shuffler, its server share sealed.
#[test]
fn pagd_with_a_killed_silo_stops_unless_calibrated_for_dropouts() {
    for robust in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let exp = tmp.path().join("exp.toml");
        let alg_text = format!(
            "kind = \"pagd\"\nsmoothness = 1.0\ndiameter = 10.0\nshuffler = \"trusted\"{}",
            if robust {
                "\nrobust = { honest_fraction = 0.5 }"
            } else {
                ""
            }
        );
        let text = shuffle_experiment(&alg_text)
            .replace("rounds = 5", "rounds = 8")
            .replace("epsilon = 2.0", "epsilon = 1.0");
        std::fs::write(&exp, text).unwrap();
        let Started {
            cfg,
            mut server,
            mut silos,
            ..
        } = start(
            tmp.path(),
            &exp,
            &["--deadline-ms", "2000"],
            "min_round_ms = 150",
        );
        let mut shuffler = spawn_shuffler(&cfg, tmp.path());
        let alg = cfg.parent().unwrap().join("alg-0");
        wait_until("round 2", Duration::from_secs(60), || {
            checkpoint_round(&alg) >= 2
        });
        silos[3].kill().unwrap(); // SIGKILL
        silos[3].wait().unwrap();
        let killed_at = checkpoint_round(&alg);
        let status = wait_exit(&mut server, Duration::from_secs(60));
        let log = std::fs::read_to_string(tmp.path().join("server.log")).unwrap();
        let shuffler_log = || std::fs::read_to_string(tmp.path().join("shuffler.log")).unwrap();
        if robust {
            assert!(status.success(), "{log}");
            let p = participants(&alg);
            assert_eq!(p.len(), 8, "{p:?}");
            // Rounds before the kill hold 4 silos (8 messages), those after it 3 (6).
            assert!(p[..killed_at as usize].iter().all(|&m| m == 8), "{p:?}");
            assert!(p[killed_at as usize + 1..].iter().all(|&m| m == 6), "{p:?}");
            let got = dpfl_net::server::read_model(&alg.join("server/model.bin")).unwrap();
            assert!(got.iter().all(|v| v.is_finite()), "{got:?}");
            assert_charged_once(&alg, 3, 8);
            assert!(
                !shuffler_log().contains("batch withheld"),
                "{}",
                shuffler_log()
            );
        } else {
            assert_eq!(status.code(), Some(1), "{log}");
            assert!(
                log.contains("withheld")
                    && log.contains("3 silo(s) submitted")
                    && log.contains("fewer than the 4"),
                "{log}"
            );
            assert!(
                shuffler_log().contains("batch withheld"),
                "{}",
                shuffler_log()
            );
            let ckpt = checkpoint(&alg).unwrap();
            let stopped = ckpt.next_round.get();
            assert!(
                stopped < 8 && stopped <= killed_at + 1,
                "{stopped} {killed_at}"
            );
            // Every aggregated round held all 4 silos: none was aggregated short (the
            // withheld round is logged, with nothing aggregated).
            assert!(
                ckpt.log
                    .iter()
                    .all(|l| l.participants == if l.aggregated() { 8 } else { 0 }),
                "{:?}",
                ckpt.log
            );
            // The survivors charged the withheld round too (charged before release): the
            // ledgers over-count, never under-count.
            for i in 0..3 {
                let charged =
                    dpfl_net::ledger::charged_rounds(&alg.join(format!("silo-{i}/ledger")))
                        .unwrap();
                assert!(charged.len() as u32 >= stopped, "silo {i}: {charged:?}");
            }
        }
        for i in 0..3 {
            let (round, bodies) = dpfl_net::silo::stored_answer(&alg.join(format!("silo-{i}")))
                .unwrap()
                .unwrap();
            let shares = bodies
                .iter()
                .filter(|b| dpfl_net::share::is_share_body(b))
                .count();
            assert_eq!((bodies.len(), shares), (2, 1), "silo {i} round {round}");
        }
        let _ = shuffler.kill();
        let _ = shuffler.wait();
        for s in &mut silos[..3] {
            let _ = s.kill();
            let _ = s.wait();
        }
    }
}

/// The server's round log, one JSON value per line.
fn round_log(alg: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(alg.join("server/rounds.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Issue 15: what the records say when a silo drops out of a shuffle round. PAGD over 4
/// silos, silo 3 never started (the server starts with 3, `min_silos = 3`):
/// * calibrated for all 4: the shuffler withholds round 0; the round log's line says so
///   (submitted [0, 1, 2], dropped [3], quorum 4, outcome "withheld"); silos 0–2 charged
///   round 0 (their messages left them: never refunded), silo 3 has no ledger at all (it
///   sent nothing). Silo 3 and the server then restart: round 0 runs again (epoch 2), the
///   log keeps the withheld line before the aggregated ones, and every ledger charged every
///   round exactly once (the first three resent their stored round-0 bytes);
/// * robust at γ = 1/2 (quorum 2): every round continues with the 3 survivors, each line
///   "survivors" with silo 3 dropped; only the survivors are charged.
#[test]
fn a_withheld_round_and_a_dropped_silo_are_in_the_round_log_and_the_ledgers() {
    const ROUNDS: u64 = 3;
    for robust in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let exp = tmp.path().join("exp.toml");
        let alg_text = format!(
            "kind = \"pagd\"\nsmoothness = 1.0\ndiameter = 10.0\nshuffler = \"trusted\"{}",
            if robust {
                "\nrobust = { honest_fraction = 0.5 }"
            } else {
                ""
            }
        );
        let text = shuffle_experiment(&alg_text)
            .replace("rounds = 5", &format!("rounds = {ROUNDS}"))
            .replace("epsilon = 2.0", "epsilon = 1.0");
        std::fs::write(&exp, text).unwrap();
        let (cfg, shards) = prepare(
            tmp.path(),
            &exp,
            &["--deadline-ms", "2000"],
            "start_timeout_ms = 3000",
        );
        let text = std::fs::read_to_string(&cfg).unwrap();
        std::fs::write(
            &cfg,
            text.replacen("[server]\n", "[server]\nmin_silos = 3\n", 1),
        )
        .unwrap();
        let c = cfg.to_str().unwrap();
        let mut server = spawn(&["server", "--config", c], &tmp.path().join("server.log"));
        let mut shuffler = spawn_shuffler(&cfg, tmp.path());
        let mut silos: Vec<_> = (0..3)
            .map(|i| {
                let log = tmp.path().join(format!("silo-{i}.log"));
                spawn_silo(&cfg, i, &shards[i], &log)
            })
            .collect();
        let alg = cfg.parent().unwrap().join("alg-0");
        let status = wait_exit(&mut server, Duration::from_secs(120));
        let server_log = std::fs::read_to_string(tmp.path().join("server.log")).unwrap();
        let charged = |i: usize| {
            dpfl_net::ledger::charged_rounds(&alg.join(format!("silo-{i}/ledger"))).unwrap()
        };
        // Silo 3 never ran: no state directory, no ledger, nothing charged.
        assert!(!alg.join("silo-3").exists());
        if robust {
            assert!(status.success(), "{server_log}");
            let log = round_log(&alg);
            assert_eq!(log.len(), ROUNDS as usize, "{log:?}");
            for (r, l) in log.iter().enumerate() {
                assert_eq!(l["round"], r as u64, "{l}");
                assert_eq!(l["outcome"], "survivors", "{l}");
                assert_eq!(l["submitted"], serde_json::json!([0, 1, 2]), "{l}");
                assert_eq!(l["dropped"], serde_json::json!([3]), "{l}");
                assert_eq!(l["quorum"], 2, "{l}");
                assert_eq!(l["participants"], 6, "{l}");
            }
            assert_charged_once(&alg, 3, ROUNDS);
        } else {
            assert_eq!(status.code(), Some(1), "{server_log}");
            assert!(server_log.contains("withheld"), "{server_log}");
            let log = round_log(&alg);
            assert_eq!(log.len(), 1, "{log:?}");
            let l = &log[0];
            assert_eq!(
                (&l["round"], &l["epoch"], &l["outcome"]),
                (
                    &serde_json::json!(0),
                    &serde_json::json!(1),
                    &serde_json::json!("withheld")
                ),
                "{l}"
            );
            assert_eq!(l["submitted"], serde_json::json!([0, 1, 2]), "{l}");
            assert_eq!(l["dropped"], serde_json::json!([3]), "{l}");
            assert_eq!(
                (&l["quorum"], &l["participants"]),
                (&serde_json::json!(4), &serde_json::json!(0))
            );
            for i in 0..3 {
                assert_eq!(charged(i), vec![0], "silo {i}: charged though withheld");
            }
            assert_eq!(checkpoint(&alg).unwrap().next_round.get(), 0);
            // Silo 3 back, the server restarted: round 0 again, then the rest.
            silos.push(spawn_silo(
                &cfg,
                3,
                &shards[3],
                &tmp.path().join("silo-3.log"),
            ));
            let mut server = spawn(&["server", "--config", c], &tmp.path().join("server-2.log"));
            let status = wait_exit(&mut server, Duration::from_secs(120));
            let log2 = std::fs::read_to_string(tmp.path().join("server-2.log")).unwrap();
            assert!(status.success(), "{log2}");
            let log = round_log(&alg);
            assert_eq!(log.len(), 1 + ROUNDS as usize, "{log:?}");
            assert_eq!(log[0]["outcome"], "withheld");
            for (r, l) in log[1..].iter().enumerate() {
                assert_eq!(
                    (&l["round"], &l["epoch"]),
                    (&serde_json::json!(r), &serde_json::json!(2)),
                    "{l}"
                );
                assert_eq!(l["outcome"], "complete", "{l}");
                assert_eq!(l["submitted"], serde_json::json!([0, 1, 2, 3]), "{l}");
                assert_eq!(l["dropped"], serde_json::json!([]), "{l}");
            }
            assert_eq!(participants(&alg), vec![8; ROUNDS as usize]);
            assert_charged_once(&alg, 4, ROUNDS);
        }
        let _ = shuffler.kill();
        let _ = shuffler.wait();
        for s in &mut silos {
            let _ = s.kill();
            let _ = s.wait();
        }
    }
}

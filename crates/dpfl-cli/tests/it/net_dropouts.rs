//! Dropouts and restarts of shuffle-model federations over the network (issue 15;
//! docs/shuffle.md "Dropouts over the network"): separate `dpfl` processes (server, shuffler,
//! four silos) on 127.0.0.1, one silo SIGKILLed mid-run.
//!
//! * PSGD stops at a short batch unless its PVEC is calibrated for fewer silos
//!   (`min_participants`), and then trains on with the survivors;
//! * PGD and Shuffled Noisy MB-SGD cannot be calibrated for a dropout (see
//!   [`pgd_and_sdp_mb_sgd_stop_at_a_dropout_and_offer_no_dropout_calibration`]): they stop;
//! * a silo restarted after its round was withheld rejoins, and the run ends on the
//!   simulator's model with every ledger charged once per round;
//! * PVEC's explicit transport is refused over the network, PAGD's included.
//!
//! (PAGD's dropout test is `net_wings.rs`'s
//! `pagd_with_a_killed_silo_stops_unless_calibrated_for_dropouts`.)

use crate::common;
use common::{
    Started, bits, charged_rounds, checkpoint, checkpoint_round, dpfl, prepare_only_args,
    simulated_run, spawn, spawn_shuffler, spawn_silo, start, wait_exit, wait_until,
};

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

/// Four silos of 100 records, d = 4 (plus the bias), `rounds` rounds, all silos every round.
fn experiment(algorithm: &str, rounds: u32) -> String {
    dpfl_testkit::experiment::Head::shuffle("shuffle-dropouts", rounds as usize)
        .toml(&format!("[[algorithms]]\n{algorithm}\n"))
}

/// The server's shuffle round deadline: the shuffler forwards (or withholds) a batch missing
/// a silo after ¾ of it. Generous for a loaded machine, short enough for a quick test (at 2400
/// a silo restarted under load 5–6 once missed a round of the resumed run, which the shuffler
/// then withheld).
const DEADLINE_MS: &str = "4000";

/// A running federation: server, shuffler and silos of algorithm 0 of `exp`, logging into `dir`.
struct Federation {
    cfg: PathBuf,
    shards: Vec<PathBuf>,
    alg: PathBuf,
    server: Child,
    shuffler: Child,
    silos: Vec<Child>,
}

impl Federation {
    fn start(dir: &Path, exp: &Path) -> Self {
        let Started {
            cfg,
            shards,
            server,
            silos,
        } = start(
            dir,
            exp,
            &["--deadline-ms", DEADLINE_MS],
            "min_round_ms = 150",
        );
        let shuffler = spawn_shuffler(&cfg, dir);
        let alg = cfg.parent().unwrap().join("alg-0");
        Federation {
            cfg,
            shards,
            alg,
            server,
            shuffler,
            silos,
        }
    }

    /// SIGKILLs silo `id` once round `after` is aggregated. Returns the checkpoint's round
    /// just before and just after the kill: every round before the first held the silo's
    /// messages, and it answered no round after the second.
    fn kill_silo_after(&mut self, id: usize, after: u32) -> (u32, u32) {
        wait_until(&format!("round {after}"), Duration::from_secs(90), || {
            checkpoint_round(&self.alg) >= after
        });
        let before = checkpoint_round(&self.alg);
        self.silos[id].kill().unwrap(); // SIGKILL
        self.silos[id].wait().unwrap();
        (before, checkpoint_round(&self.alg))
    }

    /// (round, messages aggregated) of every aggregated round in the server's checkpoint.
    fn aggregated(&self) -> Vec<(u32, usize)> {
        checkpoint(&self.alg)
            .unwrap()
            .log
            .iter()
            // A withheld round is logged too (nothing aggregated): only aggregated lines.
            .filter(|l| l.aggregated())
            .map(|l| (l.round.get(), l.participants))
            .collect()
    }

    /// Kills and reaps whatever still runs.
    fn stop(mut self) {
        for c in std::iter::once(&mut self.server)
            .chain(std::iter::once(&mut self.shuffler))
            .chain(self.silos.iter_mut())
        {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// The last round silo `id` stored an answer for.
fn last_answered(alg: &Path, id: usize) -> u32 {
    dpfl_net::silo::stored_answer(&alg.join(format!("silo-{id}")))
        .unwrap()
        .unwrap()
        .0
}

/// A silo's ledger charges a round before storing and sending its answer; a SIGKILL between
/// the two leaves one charged round unsent. So the killed silo's ledger is 0..=last answered,
/// plus at most that one round.
fn assert_killed_silo_charged_once(alg: &Path, id: usize) {
    let last = u64::from(last_answered(alg, id));
    let charged = charged_rounds(alg, id);
    let sent: Vec<u64> = (0..=last).collect();
    let or_one_more: Vec<u64> = (0..=last + 1).collect();
    assert!(
        charged == sent || charged == or_one_more,
        "silo {id} answered up to round {last}, charged {charged:?}"
    );
}

/// The server's message when the shuffler withheld a short batch (`server/round.rs`).
fn assert_withheld(server_log: &str, shuffler_log: &str, submitted: usize, quorum: usize) {
    assert!(
        server_log.contains("the shuffler withheld the round's batch")
            && server_log.contains(&format!("{submitted} silo(s) submitted"))
            && server_log.contains(&format!("fewer than the {quorum} the shuffle's privacy")),
        "{server_log}"
    );
    assert!(shuffler_log.contains("batch withheld"), "{shuffler_log}");
}

/// PSGD (PVEC compact shares through the real shuffler) over 4 silos, silo 3 SIGKILLed after
/// round 2 of 6, in both regimes:
/// * calibrated for all 4 (default `min_participants`): PVEC's binomial noise is spread over
///   4·K users, so a 3-silo batch would hold less noise than the charged ε assumes; the
///   shuffler withholds it, the server exits 1 naming 3 < 4, its checkpoint stops at that
///   round, every aggregated round held all 4 silos (8 analyzer messages), and the survivors'
///   ledgers charged exactly the rounds up to the withheld one (charged, never released);
/// * `min_participants = 3` (PVEC calibrated for 3·K users, quorum 3): the run finishes all 6
///   rounds, those before the kill with 8 messages, those after with 6 (3 server shares and
///   the shuffler's sum of 3), the survivors charged every round once and the killed silo
///   exactly the rounds it answered.
#[test]
fn psgd_with_a_killed_silo_stops_unless_calibrated_for_fewer_silos() {
    const ROUNDS: u32 = 6;
    for min_participants in [None, Some(3)] {
        let tmp = tempfile::tempdir().unwrap();
        let exp = tmp.path().join("exp.toml");
        let alg_text = match min_participants {
            Some(m) => format!("kind = \"psgd\"\nstep_size = 0.5\nmin_participants = {m}"),
            None => "kind = \"psgd\"\nstep_size = 0.5".to_string(),
        };
        std::fs::write(&exp, experiment(&alg_text, ROUNDS)).unwrap();
        let mut fed = Federation::start(tmp.path(), &exp);
        let (before, killed_at) = fed.kill_silo_after(3, 2);
        let status = wait_exit(&mut fed.server, Duration::from_secs(90));
        let server_log = read(&tmp.path().join("server.log"));
        let shuffler_log = read(&tmp.path().join("shuffler.log"));
        let alg = fed.alg.clone();
        let aggregated = fed.aggregated();
        if min_participants.is_some() {
            assert!(status.success(), "{server_log}");
            assert!(!shuffler_log.contains("batch withheld"), "{shuffler_log}");
            assert_eq!(
                aggregated.iter().map(|a| a.0).collect::<Vec<_>>(),
                (0..ROUNDS).collect::<Vec<_>>()
            );
            // Silo 3 may have answered the round it was killed in before dying.
            for &(r, m) in &aggregated {
                let want: &[usize] = if r < before {
                    &[8]
                } else if r <= killed_at {
                    &[6, 8]
                } else {
                    &[6]
                };
                assert!(want.contains(&m), "round {r}: {aggregated:?}");
            }
            let got = dpfl_net::server::read_model(&alg.join("server/model.bin")).unwrap();
            assert!(got.iter().all(|v| v.is_finite()), "{got:?}");
            assert!(got != vec![0.0; got.len()], "the model moved");
            for i in 0..3 {
                assert_eq!(
                    charged_rounds(&alg, i),
                    (0..u64::from(ROUNDS)).collect::<Vec<_>>()
                );
                assert_eq!(last_answered(&alg, i), ROUNDS - 1);
            }
        } else {
            assert_eq!(status.code(), Some(1), "{server_log}");
            assert_withheld(&server_log, &shuffler_log, 3, 4);
            let stopped = checkpoint_round(&alg);
            assert!(
                stopped < ROUNDS && stopped <= killed_at + 1,
                "stopped at {stopped}, killed at {killed_at}"
            );
            assert!(
                server_log.contains(&format!("round {stopped}: the shuffler withheld")),
                "{server_log}"
            );
            // Nothing aggregated short.
            assert_eq!(aggregated, (0..stopped).map(|r| (r, 8)).collect::<Vec<_>>());
            // The survivors charged the withheld round too (before release): over-count,
            // never under-count; and never a round after it.
            for i in 0..3 {
                assert_eq!(
                    charged_rounds(&alg, i),
                    (0..=u64::from(stopped)).collect::<Vec<_>>(),
                    "silo {i}"
                );
            }
        }
        assert_killed_silo_charged_once(&alg, 3);
        assert!(last_answered(&alg, 3) <= killed_at);
        fed.stop();
    }
}

/// Two kinds that cannot go on without a silo, by design:
/// * PGD is full-batch: its PVEC's users are every record of every silo, and its analyzer
///   debiases with all Σ n_i of them (it cannot tell which silo is missing), so a short round
///   would be a wrongly scaled gradient as well as less noise than charged;
/// * Shuffled Noisy MB-SGD's σ comes from amplification by shuffling over exactly the M
///   reports of a round (Feldman–McMillan–Talwar): fewer reports amplify less, and the
///   chain's δ term grows with the report count, so no single "fewest silos" calibration
///   covers both ends (docs/shuffle.md).
///
/// Neither has a dropout calibration to ask for (`min_participants` is refused as an unknown
/// field, exit 2); over the network a SIGKILLed silo makes the shuffler withhold the batch
/// (3 < 4) and the server exit 1, with every aggregated round whole.
#[test]
fn pgd_and_sdp_mb_sgd_stop_at_a_dropout_and_offer_no_dropout_calibration() {
    const ROUNDS: u32 = 5;
    // (algorithm, analyzer messages of a whole round: PGD's 4 server shares plus the
    // shuffler's sum standing for 4, SDP's 4 sealed gradients).
    let kinds = [
        ("kind = \"pgd\"\nshuffler = \"trusted\"\nstep_size = 0.5", 8),
        (
            "kind = \"sdp-mb-sgd\"\nstep_size = 0.5\ncalibration = { kind = \"accountant\" }",
            4,
        ),
    ];
    for (alg_text, whole) in kinds {
        let tmp = tempfile::tempdir().unwrap();
        let exp = tmp.path().join("exp.toml");
        std::fs::write(
            &exp,
            experiment(&format!("{alg_text}\nmin_participants = 3"), ROUNDS),
        )
        .unwrap();
        let o = dpfl(&prepare_only_args(&exp, &tmp.path().join("refused"), &[]));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{alg_text}: {err}");
        assert!(err.contains("min_participants"), "{alg_text}: {err}");

        std::fs::write(&exp, experiment(alg_text, ROUNDS)).unwrap();
        let mut fed = Federation::start(tmp.path(), &exp);
        let (_, killed_at) = fed.kill_silo_after(3, 2);
        let status = wait_exit(&mut fed.server, Duration::from_secs(90));
        let server_log = read(&tmp.path().join("server.log"));
        let shuffler_log = read(&tmp.path().join("shuffler.log"));
        assert_eq!(status.code(), Some(1), "{alg_text}: {server_log}");
        assert_withheld(&server_log, &shuffler_log, 3, 4);
        let alg = fed.alg.clone();
        let stopped = checkpoint_round(&alg);
        assert!(
            stopped < ROUNDS && stopped <= killed_at + 1,
            "{alg_text}: stopped at {stopped}, killed at {killed_at}"
        );
        assert_eq!(
            fed.aggregated(),
            (0..stopped).map(|r| (r, whole)).collect::<Vec<_>>(),
            "{alg_text}"
        );
        for i in 0..3 {
            assert_eq!(
                charged_rounds(&alg, i),
                (0..=u64::from(stopped)).collect::<Vec<_>>(),
                "{alg_text}: silo {i}"
            );
        }
        assert_killed_silo_charged_once(&alg, 3);
        fed.stop();
    }
}

/// A PSGD silo SIGKILLed after round 2 of 6: the shuffler withholds its round, the server
/// exits 1 at that round. The silo process and the server are restarted from their state
/// (the shuffler and the survivors wait for the server to come back). The survivors resend
/// their stored answers to the re-opened round, the restarted silo answers from its stored
/// generator, and the run finishes:
/// * every round aggregated all 4 silos (8 analyzer messages), rounds 0..6 once each;
/// * the final model is the simulator's bit for bit (PVEC's counts are exact sums, so the
///   shuffler's permutation does not matter): the restart changed nothing;
/// * every silo, the restarted one included, stored its answer to round 5, and every ledger
///   charged each round exactly once (the withheld round was charged once, before release,
///   and its resend charged nothing).
#[test]
fn a_psgd_silo_restarted_after_its_round_was_withheld_rejoins_and_ends_on_the_simulators_model() {
    const ROUNDS: u32 = 6;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let exp = dir.join("exp.toml");
    std::fs::write(&exp, experiment("kind = \"psgd\"\nstep_size = 0.5", ROUNDS)).unwrap();
    let mut fed = Federation::start(dir, &exp);
    let (_, killed_at) = fed.kill_silo_after(3, 2);
    let status = wait_exit(&mut fed.server, Duration::from_secs(90));
    let server_log = read(&dir.join("server.log"));
    assert_eq!(status.code(), Some(1), "{server_log}");
    assert_withheld(&server_log, &read(&dir.join("shuffler.log")), 3, 4);
    let stopped = checkpoint_round(&fed.alg);
    assert!(
        stopped <= killed_at + 1 && stopped < ROUNDS,
        "stopped at {stopped}, killed at {killed_at}"
    );

    fed.silos[3] = spawn_silo(&fed.cfg, 3, &fed.shards[3], &dir.join("silo-3-again.log"));
    let c = fed.cfg.to_str().unwrap().to_string();
    fed.server = spawn(&["server", "--config", &c], &dir.join("server-again.log"));
    let status = wait_exit(&mut fed.server, Duration::from_secs(120));
    let again = read(&dir.join("server-again.log"));
    assert!(status.success(), "{again}");
    assert!(again.contains("resuming from checkpoint"), "{again}");
    assert!(
        read(&dir.join("silo-3-again.log")).contains("restored silo state"),
        "{}",
        read(&dir.join("silo-3-again.log"))
    );
    for s in &mut fed.silos {
        assert!(wait_exit(s, Duration::from_secs(60)).success());
    }
    let shuffled = wait_exit(&mut fed.shuffler, Duration::from_secs(60));
    assert!(shuffled.success(), "{}", read(&dir.join("shuffler.log")));

    let alg = fed.alg.clone();
    assert_eq!(
        fed.aggregated(),
        (0..ROUNDS).map(|r| (r, 8)).collect::<Vec<_>>()
    );
    let (_, sim) = simulated_run(&exp, ROUNDS as usize);
    let got = dpfl_net::server::read_model(&alg.join("server/model.bin")).unwrap();
    assert!(got != vec![0.0; got.len()], "the model moved");
    assert_eq!(bits(&got), bits(&sim.final_model));
    for i in 0..4 {
        assert_eq!(last_answered(&alg, i), ROUNDS - 1, "silo {i}");
        assert_eq!(
            charged_rounds(&alg, i),
            (0..u64::from(ROUNDS)).collect::<Vec<_>>(),
            "silo {i}"
        );
    }
    fed.stop();
}

/// Over the network PVEC's explicit transport (one sealed one-bit message per label) is
/// refused, PAGD included (its compact shares are split between the shuffler and the server
/// like PSGD's): exit 2, the field named, by `dpfl federate` and by a server given the file.
/// The experiment is tiny (d = 2, K = 1, ε = 15, unit scale) so that the simulator would run
/// it explicitly and the network's own check is what refuses; PGD's full batch stays beyond
/// the plan's bound on explicit messages per reply even then, which refuses it first.
#[test]
fn explicit_pvec_transport_is_refused_over_the_network_for_pagd_too() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = tmp.path().join("exp.toml");
    let network = "\"explicit\" PVEC (one message per bit) runs in the simulator only";
    for (i, (alg_text, why)) in [
        (
            "kind = \"pagd\"\nsmoothness = 1.0\ndiameter = 10.0\nshuffler = \"trusted\"\nbatch_size = 1",
            network,
        ),
        ("kind = \"psgd\"\nstep_size = 0.5\nbatch_size = 1", network),
        (
            "kind = \"sdp-accelerated-mb-sgd\"\nstep_size = 1.0\nbatch_size = 1",
            network,
        ),
        (
            "kind = \"pgd\"\nshuffler = \"trusted\"\nstep_size = 0.5",
            "explicit PVEC would send",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let text = experiment(
            &format!("{alg_text}\ntransport = \"explicit\"\nscale = \"Unit\""),
            5,
        )
        .replace("features = 4", "features = 1")
        .replace("epsilon = 2.0", "epsilon = 15.0")
        .replace("delta = 1e-5", "delta = 0.01");
        std::fs::write(&exp, text).unwrap();
        let out = tmp.path().join(format!("explicit-{i}"));
        let o = dpfl(&prepare_only_args(&exp, &out, &[]));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{alg_text}: {err}");
        assert!(
            err.contains("algorithm.transport") && err.contains(why) && err.contains("compact"),
            "{alg_text}: {err}"
        );
        // `federate` writes the federation file before its network check; a server given
        // that file refuses the same way (its roles validate the file on load).
        let cfg = out.join("trial-0/federation-0.toml");
        if cfg.exists() {
            let o = dpfl(&["server", "--config", cfg.to_str().unwrap()]);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{alg_text}: {err}");
            assert!(err.contains("algorithm.transport") && err.contains(why), "{err}");
        }
    }
}

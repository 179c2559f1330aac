//! The round core over the network, against the simulator: a toy algorithm whose silos reply
//! with several labelled, packed messages, one silo whose ledger refuses every round, with and
//! without the shuffler. The one refusal rule holds in both runners (the refusing silo is left
//! out, the others answer), multi-message replies travel silo → (shuffler) → server through
//! the codec, and the shuffler permutes messages, not replies. The run loop is the
//! simulator's too (`dpfl::run::RunLoop`): a server half that diverges fails the network run
//! with the error the simulator's `drive` fails with, and `stop_after_rounds` pauses it where a
//! restarted server resumes.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use dpfl::algo::{Broadcast, BuiltAlgorithm, HalfState, Round, ServerHalf, SiloHalf, SiloMessage};
use dpfl::data::SiloData;
use dpfl::run::{Finished, OnDiverged};
use dpfl::sim::{Participation, Simulator};
use dpfl_privacy::Neighbouring;
use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::ledger::{Budget, Ledger};
use dpfl_testkit::{MESSAGES, Seen, ToyServer, ToySilo, tiny_silo};

const SILOS: u32 = 3;
const ROUNDS: usize = 3;
/// The silo whose budget cannot pay one release.
const REFUSING: u32 = 1;

fn tiny() -> SiloData {
    tiny_silo(1)
}

fn budget(id: u32) -> Option<Budget> {
    // ε = 0.01 cannot pay one Gaussian release at noise multiplier 0.5.
    (id == REFUSING).then(|| Budget::new(0.01, 1e-5, Neighbouring::AddRemove).unwrap())
}

fn federation(dir: &Path, shuffle: bool) -> PathBuf {
    std::fs::write(
        dir.join("experiment.toml"),
        format!(
            "name = \"toy\"\nrounds = {ROUNDS}\n[data]\nsource = {{ kind = \"synthetic\", task = \
             \"regression\", silos = {SILOS}, train = 4, test = 2, features = 1 }}\n[model]\n\
             kind = \"linear\"\n[[algorithms]]\nkind = \"mb-sgd\"\nstep_size = 0.1\nbatch_size = 1\n"
        ),
    )
    .unwrap();
    dpfl_net::certs::dev_pki(&dir.join("certs"), SILOS as usize).unwrap();
    let shuffler = if shuffle {
        "[shuffler]\naddress = \"127.0.0.1:0\"\naddress_file = \"shuffler.addr\"\n"
    } else {
        ""
    };
    let text = format!(
        "experiment = \"experiment.toml\"\nseed = 1\n[public]\nrecords = [1, 1, 1]\n\
         features = 1\nlipschitz = 1.0\n[server]\naddress = \"127.0.0.1:0\"\n\
         address_file = \"server.addr\"\nstate_dir = \"server\"\nround_deadline_ms = 30000\n\
         start_timeout_ms = 30000\nheartbeat_timeout_ms = 30000\n{shuffler}[tls]\n\
         dir = \"certs\"\n"
    );
    let p = dir.join("federation.toml");
    std::fs::write(&p, text).unwrap();
    p
}

/// Runs the toy federation over the network; returns what the server aggregated per round
/// and the messages it counted per round.
async fn network(shuffle: bool) -> (Vec<Vec<(u32, u64)>>, Vec<usize>) {
    let tmp = tempfile::tempdir().unwrap();
    let fed = common::load(&federation(tmp.path(), shuffle));
    let dim = fed.context().unwrap().federation.dim;
    let seen: Seen = Arc::default();
    let server = dpfl_net::server::Server::bind(fed.clone()).await.unwrap();
    let server = tokio::spawn(server.run_with(Box::new(ToyServer {
        seen: seen.clone(),
        dim,
    })));
    let shuffler = if shuffle {
        let sh = dpfl_net::shuffler::ShufflerProcess::bind(fed.clone())
            .await
            .unwrap();
        Some(tokio::spawn(sh.run()))
    } else {
        None
    };
    let silos = toy_silos(&fed, dim, dpfl_net::silo::Start::Fresh, budget);
    let outcome = server.await.unwrap().unwrap();
    for (id, s) in silos.into_iter().enumerate() {
        let report = s.await.unwrap().unwrap();
        let all: Vec<u32> = (0..ROUNDS as u32).collect();
        if id as u32 == REFUSING {
            assert_eq!(report.refused, all, "silo {id}");
            assert!(report.answered.is_empty(), "silo {id}");
        } else {
            assert_eq!(report.answered, all, "silo {id}");
            assert!(report.refused.is_empty(), "silo {id}");
        }
    }
    if let Some(sh) = shuffler {
        sh.await.unwrap().unwrap();
    }
    let participants = outcome.log.iter().map(|l| l.participants).collect();
    let seen = seen.lock().unwrap().clone();
    (seen, participants)
}

/// `server` with the toy silos (d = 1), for the simulator.
fn simulated_halves(server: Box<dyn ServerHalf>) -> BuiltAlgorithm {
    BuiltAlgorithm {
        server,
        silos: (0..SILOS)
            .map(|id| {
                Box::new(ToySilo {
                    id,
                    dim: 1,
                    private: true,
                }) as Box<dyn SiloHalf>
            })
            .collect(),
        calibration: vec![],
    }
}

/// The same toy federation in the simulator, with the same ledgers.
fn simulated() -> Vec<Vec<(u32, u64)>> {
    let seen: Seen = Arc::default();
    let built = simulated_halves(Box::new(ToyServer {
        seen: seen.clone(),
        dim: 1,
    }));
    let data: Vec<SiloData> = (0..SILOS).map(|_| tiny()).collect();
    let mut sim = Simulator::new(&data, built, Participation::All, Some(1)).unwrap();
    sim.attach_ledgers(
        (0..SILOS)
            .map(|id| budget(id).map(|b| Ledger::in_memory(b, AccountantKind::Rdp)))
            .collect(),
    )
    .unwrap();
    for _ in 0..ROUNDS {
        let report = sim.step().unwrap();
        assert_eq!(report.refused, vec![REFUSING]);
    }
    seen.lock().unwrap().clone()
}

/// Every message of the answering silos, in silo order.
fn expected() -> Vec<(u32, u64)> {
    (0..SILOS)
        .filter(|&id| id != REFUSING)
        .flat_map(|id| (0..MESSAGES).map(move |k| (k, u64::from(10 * id + k))))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_message_replies_and_a_refusal_in_silo_order_as_in_the_simulator() {
    let sim = simulated();
    assert_eq!(sim, vec![expected(); ROUNDS]);
    let (net, participants) = network(false).await;
    assert_eq!(net, sim, "the network aggregates what the simulator does");
    // Two silos of four messages each per round.
    assert_eq!(participants, vec![8; ROUNDS]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shuffler_permutes_the_messages_of_multi_message_replies() {
    let (net, participants) = network(true).await;
    assert_eq!(participants, vec![8; ROUNDS]);
    let mut contiguous_rounds = 0;
    for round in &net {
        let mut sorted = round.clone();
        sorted.sort_by_key(|&(_, v)| v);
        assert_eq!(
            sorted,
            expected(),
            "the same 8 messages, none from the refusing silo"
        );
        // A uniform permutation of 8 messages keeps both replies contiguous with probability
        // 2!·(4!)²/8! ≈ 0.029; in all three rounds, ≈ 2.3e-5.
        if round
            .chunks(MESSAGES as usize)
            .all(|c| c.iter().all(|&(_, v)| v / 10 == c[0].1 / 10))
        {
            contiguous_rounds += 1;
        }
    }
    assert!(contiguous_rounds < ROUNDS, "{net:?}");
}

/// A silo whose reply has one message more than a reply of the model's dimension may hold.
struct Flood;
impl SiloHalf for Flood {
    fn round_event(&self, _: Round) -> Option<dpfl_privacy::PrivacyEvent> {
        None
    }
    fn respond(
        &mut self,
        _: &Broadcast,
        _: &dpfl::data::Dataset,
        _: &mut dpfl_privacy::DpRng,
    ) -> dpfl::Result<SiloMessage> {
        unreachable!("the runners ask for the whole reply")
    }
    fn respond_reply(
        &mut self,
        b: &Broadcast,
        _: &dpfl::data::Dataset,
        _: &mut dpfl_privacy::DpRng,
    ) -> dpfl::Result<dpfl::algo::Reply> {
        let n = dpfl_net::codec::max_reply_messages(b.point.len()) + 1;
        let messages = (0..n)
            .map(|_| SiloMessage {
                round: b.round,
                payload: dpfl::algo::Payload::Dense(vec![0.0]),
            })
            .collect();
        Ok(dpfl::algo::Reply {
            round: b.round,
            messages,
        })
    }
    fn noise_std(&self) -> f64 {
        0.0
    }
}

/// Regression (the network shuffler's benchmark, which sent 1000-message replies at d = 1 and
/// printed nothing for 10 minutes): a reply the shuffler refuses for its size is refused again
/// when resent, so the silo used to reconnect and resend it in a loop for ever. It now stops
/// with the shuffler's reason, and the round goes on with the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_the_shuffler_refuses_stops_its_silo_instead_of_resending_it_for_ever() {
    let tmp = tempfile::tempdir().unwrap();
    let path = federation(tmp.path(), true);
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.replace("round_deadline_ms = 30000", "round_deadline_ms = 2000"),
    )
    .unwrap();
    let fed = common::load(&path);
    let dim = fed.context().unwrap().federation.dim;
    let seen: Seen = Arc::default();
    let server = dpfl_net::server::Server::bind(fed.clone()).await.unwrap();
    let server = tokio::spawn(server.run_with(Box::new(ToyServer { seen, dim })));
    let sh = dpfl_net::shuffler::ShufflerProcess::bind(fed.clone())
        .await
        .unwrap();
    let shuffler = tokio::spawn(sh.run());
    let mut silos: Vec<_> = (0..SILOS)
        .map(|id| {
            let half: Box<dyn SiloHalf> = if id == 0 {
                Box::new(Flood)
            } else {
                Box::new(ToySilo {
                    id,
                    dim,
                    private: true,
                })
            };
            spawn_silo(
                &fed,
                id,
                half,
                dim,
                budget(id),
                dpfl_net::silo::Start::Fresh,
            )
        })
        .collect();
    let flood = silos.remove(0);
    let err = tokio::time::timeout(std::time::Duration::from_secs(60), flood)
        .await
        .expect("the refused silo stops instead of resending for ever")
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the shuffler refused this silo's reply to round 0")
            && err.contains("InvalidArgument"),
        "{err}"
    );
    let outcome = server.await.unwrap().unwrap();
    // Silo 2's four messages each round (silo 1 refuses, silo 0 is gone).
    let participants: Vec<usize> = outcome.log.iter().map(|l| l.participants).collect();
    assert_eq!(participants, vec![4; ROUNDS]);
    for s in silos {
        s.await.unwrap().unwrap();
    }
    shuffler.await.unwrap().unwrap();
}

/// The toy server, diverging when it aggregates round `at`.
struct Diverging {
    toy: ToyServer,
    at: Round,
}

const WHY: &str = "the aggregate left the finite numbers";

impl ServerHalf for Diverging {
    fn broadcast(&mut self, round: Round) -> Broadcast {
        self.toy.broadcast(round)
    }
    fn aggregate(&mut self, round: Round, messages: &[SiloMessage]) -> dpfl::Result<()> {
        if round == self.at {
            return Err(dpfl::Error::Diverged(format!("round {round}: {WHY}")));
        }
        self.toy.aggregate(round, messages)
    }
    fn output(&self) -> Vec<f64> {
        self.toy.output()
    }
    fn dim(&self) -> usize {
        self.toy.dim()
    }
    fn state(&self) -> HalfState {
        self.toy.state()
    }
    fn restore(&mut self, state: HalfState) -> dpfl::Result<()> {
        self.toy.restore(state)
    }
}

/// The toy silos of `fed`, running, each with the budget `budget` gives it.
fn toy_silos(
    fed: &dpfl_net::Federation,
    dim: usize,
    start: dpfl_net::silo::Start,
    budget: fn(u32) -> Option<Budget>,
) -> Vec<tokio::task::JoinHandle<dpfl_net::Result<dpfl_net::silo::SiloReport>>> {
    (0..SILOS)
        .map(|id| {
            let half = Box::new(ToySilo {
                id,
                dim,
                private: true,
            });
            spawn_silo(fed, id, half, dim, budget(id), start)
        })
        .collect()
}

/// Silo `id` of `fed` with `half` and `budget`, running on a tiny shard.
fn spawn_silo(
    fed: &dpfl_net::Federation,
    id: u32,
    half: Box<dyn SiloHalf>,
    dim: usize,
    budget: Option<Budget>,
    start: dpfl_net::silo::Start,
) -> tokio::task::JoinHandle<dpfl_net::Result<dpfl_net::silo::SiloReport>> {
    let s = dpfl_net::silo::Silo::with_half_and_budget(
        fed.clone(),
        id,
        tiny(),
        half,
        dim,
        budget,
        start,
    )
    .unwrap();
    tokio::spawn(s.run())
}

/// A divergence is decided by the run loop the simulator's `drive` follows: the federated
/// policy fails the run with the server half's `Diverged` error, as `drive` with
/// `OnDiverged::Fail` does on the same halves, after the rounds before it were aggregated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diverging_server_half_fails_the_network_run_as_it_fails_the_simulators() {
    let at = Round::new(1);
    let why = format!("round 1: {WHY}");
    // The simulator: fails under Fail, reports round 2 (from 1) under Stop.
    for (policy, expected) in [
        (OnDiverged::Fail, Err(why.clone())),
        (
            OnDiverged::Stop,
            Ok(Finished::Diverged {
                round: 2,
                why: why.clone(),
            }),
        ),
    ] {
        let seen: Seen = Arc::default();
        let built = simulated_halves(Box::new(Diverging {
            toy: ToyServer {
                seen: seen.clone(),
                dim: 1,
            },
            at,
        }));
        let data: Vec<SiloData> = (0..SILOS).map(|_| tiny()).collect();
        let mut sim = Simulator::new(&data, built, Participation::All, Some(1)).unwrap();
        let got = match sim.drive(ROUNDS, policy, |_, _, _| Ok(())) {
            Err(dpfl::Error::Diverged(w)) => Err(w),
            Err(e) => panic!("{e}"),
            Ok(f) => Ok(f),
        };
        assert_eq!(got, expected, "{policy:?}");
        assert_eq!(seen.lock().unwrap().len(), 1, "round 0 was aggregated");
    }

    let tmp = tempfile::tempdir().unwrap();
    let fed = common::load(&federation(tmp.path(), false));
    let dim = fed.context().unwrap().federation.dim;
    let seen: Seen = Arc::default();
    let server = dpfl_net::server::Server::bind(fed.clone()).await.unwrap();
    let server = tokio::spawn(server.run_with(Box::new(Diverging {
        toy: ToyServer {
            seen: seen.clone(),
            dim,
        },
        at,
    })));
    let silos = toy_silos(&fed, dim, dpfl_net::silo::Start::Fresh, |_| None);
    let err = server.await.unwrap().unwrap_err();
    assert!(
        matches!(&err, dpfl_net::NetError::Dpfl(dpfl::Error::Diverged(w)) if *w == why),
        "{err:?}"
    );
    assert_eq!(seen.lock().unwrap().len(), 1, "round 0 was aggregated");
    for s in silos {
        s.abort();
    }
}

/// `stop_after_rounds` is the run loop's pause: the server stops after 2 rounds with
/// `Finished::Paused`, and a server restarted on its state directory resumes at round 2 (the
/// loop's rounds done, from the checkpoint) and completes; the restarted silos answer round 2
/// only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_after_rounds_pauses_the_run_loop_and_a_restart_resumes_at_its_round() {
    let tmp = tempfile::tempdir().unwrap();
    let path = federation(tmp.path(), false);
    let text = std::fs::read_to_string(&path).unwrap();
    let paused = tmp.path().join("paused.toml");
    std::fs::write(
        &paused,
        text.replace(
            "state_dir = \"server\"\n",
            "state_dir = \"server\"\nstop_after_rounds = 2\n",
        ),
    )
    .unwrap();
    let fed = common::load(&paused);
    let dim = fed.context().unwrap().federation.dim;
    let seen: Seen = Arc::default();
    let toy = || ToyServer {
        seen: seen.clone(),
        dim,
    };
    let server = dpfl_net::server::Server::bind(fed.clone()).await.unwrap();
    let out = server.run_with(Box::new(toy()));
    let silos = toy_silos(&fed, dim, dpfl_net::silo::Start::Fresh, |_| None);
    let out = out.await.unwrap();
    assert_eq!(out.ended, Finished::Paused { rounds_done: 2 });
    assert!(!out.finished());
    let rounds = |log: &[dpfl_net::server::RoundLog]| -> Vec<(u32, u64)> {
        log.iter().map(|l| (l.round.get(), l.epoch)).collect()
    };
    assert_eq!(rounds(&out.log), vec![(0, 1), (1, 1)]);
    // The silo processes stop too (in one process, a stopped server's sessions would stay
    // open); they restart on their state directories, as after a crash.
    for s in silos {
        s.abort();
        assert!(s.await.unwrap_err().is_cancelled());
    }

    let fed = common::load(&path);
    let server = dpfl_net::server::Server::bind(fed.clone()).await.unwrap();
    let out = server.run_with(Box::new(toy()));
    let silos = toy_silos(&fed, dim, dpfl_net::silo::Start::Resume, |_| None);
    let out = out.await.unwrap();
    assert_eq!(out.ended, Finished::Completed);
    assert!(out.finished());
    assert_eq!(rounds(&out.log), vec![(0, 1), (1, 1), (2, 2)]);
    assert_eq!(seen.lock().unwrap().len(), ROUNDS);
    for (id, s) in silos.into_iter().enumerate() {
        let report = s.await.unwrap().unwrap();
        assert_eq!(report.answered, vec![2], "silo {id}");
    }
}

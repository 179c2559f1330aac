//! Test and benchmark helpers shared by the workspace's crates, in one place instead of copied
//! builders: tiny silo data sets, the round core's toy multi-message algorithm (used by the
//! simulator's and the network runtime's round-core tests alike), the synthetic experiment
//! files of the calibration, wing, audit and command-line tests ([`experiment::Head`]), and
//! the shuffle wing's separable two-feature federation ([`separable_federation`]).
//!
//! A dev-dependency only. It depends on `dpfl`, and `dpfl`'s integration tests depend on it:
//! cargo links both against the one `dpfl` library, so the types agree (not in `dpfl`'s own
//! unit tests, which compile a second copy of the library; use it from `tests/` and `benches/`;
//! plain text such as [`audit`]'s experiment files is fine anywhere).

#![warn(missing_docs)]

pub mod audit;
pub mod experiment;
pub mod laplace_mbsgd;

use std::sync::{Arc, Mutex};

use dpfl::algo::{
    Broadcast, BuildContext, BuiltAlgorithm, FederationInfo, HalfState, PackedInts, Payload, Reply,
    Round, ServerHalf, SiloHalf, SiloInfo, SiloMessage,
};
use dpfl::data::{Dataset, SiloData, Target};
use dpfl::linalg::Matrix;
use dpfl::model::{GradientOracle, Model, Projection};
use dpfl::units::SiloId;
use dpfl_privacy::rng::Purpose;
use dpfl_privacy::{DpRng, PrivacyEvent, sampler};

/// A silo whose train and test sets are `rows` records of one zero feature, with targets
/// 0, 1, …, rows − 1 (real-valued): for toy halves that ignore the data.
pub fn tiny_silo(rows: usize) -> SiloData {
    let d = || {
        Dataset::new(
            Matrix::zeros(rows, 1),
            (0..rows).map(|i| i as f64).collect(),
            Target::Real,
            vec!["x".into()],
        )
        .expect("a valid tiny data set")
    };
    SiloData {
        train: d(),
        test: d(),
    }
}

/// Messages per reply of [`ToySilo`].
pub const MESSAGES: u32 = 4;

/// Per round, the (label, first value) of every message [`ToyServer`] aggregated, in the
/// order it arrived.
pub type Seen = Arc<Mutex<Vec<Vec<(u32, u64)>>>>;

/// Silo `id` answers every round with [`MESSAGES`] messages, message k labelled k and holding
/// `dim` copies of the 8-bit integer 10·id + k. With `private`, every round's event is a
/// Gaussian at noise multiplier 0.5 (what a ledger charges).
#[derive(Debug, Clone)]
pub struct ToySilo {
    /// The silo's index.
    pub id: u32,
    /// Values per message.
    pub dim: usize,
    /// Whether the silo's rounds have a privacy event.
    pub private: bool,
}

impl SiloHalf for ToySilo {
    fn round_event(&self, _round: Round) -> Option<PrivacyEvent> {
        self.private.then_some(PrivacyEvent::Gaussian {
            noise_multiplier: 0.5,
        })
    }
    fn respond(&mut self, _: &Broadcast, _: &Dataset, _: &mut DpRng) -> dpfl::Result<SiloMessage> {
        unreachable!("the runners ask for the whole reply")
    }
    fn respond_reply(&mut self, b: &Broadcast, _: &Dataset, _: &mut DpRng) -> dpfl::Result<Reply> {
        let messages = (0..MESSAGES)
            .map(|k| {
                let value = PackedInts::pack(8, &vec![u64::from(10 * self.id + k); self.dim])?;
                Ok(SiloMessage {
                    round: b.round,
                    payload: Payload::Labelled {
                        label: k,
                        payload: Box::new(Payload::Packed(value)),
                    },
                })
            })
            .collect::<dpfl::Result<Vec<_>>>()?;
        Ok(Reply {
            round: b.round,
            messages,
        })
    }
    fn noise_std(&self) -> f64 {
        0.0
    }
}

/// Records, per round, the (label, first value) of every labelled packed message it
/// aggregates; its model is `dim` zeros and never moves.
#[derive(Debug, Clone)]
pub struct ToyServer {
    /// Where the messages are recorded.
    pub seen: Seen,
    /// The model's dimension.
    pub dim: usize,
}

impl ServerHalf for ToyServer {
    fn broadcast(&mut self, round: Round) -> Broadcast {
        Broadcast {
            round,
            point: vec![0.0; self.dim],
            aux: vec![],
        }
    }
    fn aggregate(&mut self, _round: Round, messages: &[SiloMessage]) -> dpfl::Result<()> {
        let got = messages
            .iter()
            .map(|m| match &m.payload {
                Payload::Labelled { label, payload } => match payload.as_ref() {
                    Payload::Packed(p) => (*label, p.get(0)),
                    other => panic!("unexpected inner payload {other:?}"),
                },
                other => panic!("unexpected payload {other:?}"),
            })
            .collect();
        self.seen.lock().expect("not poisoned").push(got);
        Ok(())
    }
    fn output(&self) -> Vec<f64> {
        vec![0.0; self.dim]
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn state(&self) -> HalfState {
        HalfState::default()
    }
    fn restore(&mut self, _: HalfState) -> dpfl::Result<()> {
        Ok(())
    }
}

/// The server half behind an analyzer (PVEC's, in the shuffle wing's tests): records the one
/// dense message it is handed each round (the analyzer's mean g̃); its model is `dim` zeros
/// and never moves.
#[derive(Debug, Clone)]
pub struct MeanRecorder {
    /// The means, one per round.
    pub seen: Arc<Mutex<Vec<Vec<f64>>>>,
    /// The model's dimension.
    pub dim: usize,
}

impl ServerHalf for MeanRecorder {
    fn broadcast(&mut self, round: Round) -> Broadcast {
        Broadcast {
            round,
            point: vec![0.0; self.dim],
            aux: vec![],
        }
    }
    fn aggregate(&mut self, _: Round, m: &[SiloMessage]) -> dpfl::Result<()> {
        assert_eq!(m.len(), 1, "the analyzer hands on one mean");
        let Payload::Dense(v) = &m[0].payload else {
            panic!("not dense")
        };
        self.seen.lock().expect("not poisoned").push(v.clone());
        Ok(())
    }
    fn output(&self) -> Vec<f64> {
        vec![0.0; self.dim]
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn state(&self) -> HalfState {
        HalfState::default()
    }
    fn restore(&mut self, _: HalfState) -> dpfl::Result<()> {
        Ok(())
    }
}

/// The toy algorithm of `silos` [`ToySilo`]s (dimension `dim`) and a [`ToyServer`], and what
/// the server will see.
pub fn toy_algorithm(silos: u32, dim: usize, private: bool) -> (BuiltAlgorithm, Seen) {
    let seen: Seen = Arc::default();
    let built = BuiltAlgorithm {
        server: Box::new(ToyServer {
            seen: seen.clone(),
            dim,
        }),
        silos: (0..silos)
            .map(|id| Box::new(ToySilo { id, dim, private }) as Box<dyn SiloHalf>)
            .collect(),
        calibration: vec![],
    };
    (built, seen)
}

/// An experiment file on synthetic binary data (test 50 records a silo, shift 0.5, seed 3) with
/// logistic regression and privacy (ε, δ, L) = (2, 10⁻⁵, 1): the set-up of the calibration and
/// wing tests.
#[derive(Debug, Clone, Copy)]
pub struct SyntheticBinary<'a> {
    /// The experiment's name.
    pub name: &'a str,
    /// R.
    pub rounds: usize,
    /// The `participation` table, as TOML (e.g. `{ kind = "all" }`).
    pub participation: &'a str,
    /// N.
    pub silos: usize,
    /// Training records per silo.
    pub train: usize,
    /// Features.
    pub features: usize,
}

impl SyntheticBinary<'_> {
    /// The experiment's TOML: `privacy_extra` is appended to the `[privacy]` table and
    /// `algorithms` (`[[algorithms]]` tables) ends the file.
    pub fn toml(&self, privacy_extra: &str, algorithms: &str) -> String {
        let SyntheticBinary {
            name,
            rounds,
            participation,
            silos,
            train,
            features,
        } = *self;
        experiment::Head {
            name,
            rounds,
            seed: 3,
            participation: Some(participation),
            silos,
            train,
            test: 50,
            features,
            shift: Some(0.5),
            epsilon: 2.0,
            delta: "1e-5",
            ..experiment::Head::default()
        }
        .toml(&format!("{privacy_extra}\n{algorithms}"))
    }
}

/// `silos` silos of `n` records each (train = test), x uniform in [−0.7, 0.7]² (so ‖x‖ ≤ 1)
/// and y = 1[x₀ > 0] (separable), and the public context of `model` on them: R = `rounds`,
/// every silo at (ε, δ) = (`epsilon`, 10⁻⁵), L = 1, the ball of radius 10, start at 0 (the
/// shuffle wing's tests).
pub fn separable_federation(
    model: Arc<dyn Model>,
    silos: usize,
    n: usize,
    rounds: usize,
    epsilon: f64,
) -> (BuildContext, Vec<SiloData>) {
    let mut rng = DpRng::from_seed(11, Purpose::Data, 0);
    let data = (0..silos)
        .map(|_| {
            let u = sampler::uniforms(&mut rng, 2 * n);
            let x: Vec<f64> = u.iter().map(|v| (2.0 * v - 1.0) * 0.7).collect();
            let y: Vec<f64> = (0..n)
                .map(|i| f64::from(u8::from(x[2 * i] > 0.0)))
                .collect();
            let ds = || {
                Dataset::new(
                    Matrix::from_vec(n, 2, x.clone()).expect("n × 2 values"),
                    y.clone(),
                    Target::Classes {
                        names: vec!["0".into(), "1".into()],
                    },
                    vec!["a".into(), "b".into()],
                )
                .expect("a valid data set")
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
            .map(|i| {
                SiloInfo::new(SiloId::new(i as u32), n, Some((epsilon, 1e-5)))
                    .expect("a valid budget")
            })
            .collect(),
        oracle: GradientOracle::new(model, None).expect("an oracle without clipping"),
        lipschitz: 1.0,
        projection: Projection::L2Ball { radius: 10.0 },
        init: vec![0.0; 2],
        noise: Default::default(),
    };
    (ctx, data)
}

/// The shared data sets' directory (MNIST, Fashion-MNIST, w8a, …): `DPFL_DATA` if set, else
/// `../../../shared/datasets` relative to this crate (the development machines' layout), if it
/// is a directory. `None`, with a note on stderr, when neither is there, so that tests and
/// benchmarks of the large sets skip on machines without them.
pub fn shared_datasets() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("DPFL_DATA")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/datasets")
        });
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "note: shared data sets not found at {} (set DPFL_DATA); skipping",
            dir.display()
        );
        None
    }
}

//! Bytes on the wire for DP-NormFedAvg's t-bit messages (issue 14) at the paper's model size,
//! d = 328,810 (the 784-300-300-10 MLP): a server and silos on loopback (TLS 1.3, gRPC, the
//! real codec, durable state), silos answering with `Payload::Packed` integers of t bits as
//! the QTDL silo half does. The server half checks that each message arrives packed at t
//! bits (never widened to f64), and the bytes the server received during the rounds stay
//! within 1.2x of t·d/8 per message.

use crate::common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use dpfl::algo::{
    Broadcast, HalfState, PackedInts, Payload, Round, ServerHalf, SiloHalf, SiloMessage,
};
use dpfl::data::{Dataset, SiloData, Target};
use dpfl::linalg::Matrix;
use dpfl_privacy::{DpRng, PrivacyEvent};

const D: usize = 328_810;
const SILOS: usize = 2;
const ROUNDS: usize = 3;

/// Answers every round with d pseudo-random t-bit integers (what QTDL's silo half sends).
struct PackedSilo {
    bits: u8,
}
impl SiloHalf for PackedSilo {
    fn round_event(&self, _: Round) -> Option<PrivacyEvent> {
        None
    }
    fn respond(&mut self, b: &Broadcast, _: &Dataset, _: &mut DpRng) -> dpfl::Result<SiloMessage> {
        let mask = (1u64 << self.bits) - 1;
        let mut x = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(b.round);
        let values: Vec<u64> = (0..D)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x & mask
            })
            .collect();
        Ok(SiloMessage {
            round: b.round,
            payload: Payload::Packed(PackedInts::pack(self.bits, &values)?),
        })
    }
    fn noise_std(&self) -> f64 {
        0.0
    }
}

/// Records the width of every message it aggregates.
struct Widths {
    point: Vec<f64>,
    seen: Arc<Mutex<Vec<u8>>>,
}
impl ServerHalf for Widths {
    fn broadcast(&mut self, round: Round) -> Broadcast {
        Broadcast {
            round,
            point: self.point.clone(),
            aux: vec![],
        }
    }
    fn aggregate(&mut self, _: Round, messages: &[SiloMessage]) -> dpfl::Result<()> {
        let mut seen = self.seen.lock().unwrap();
        for m in messages {
            match &m.payload {
                Payload::Packed(p) if p.len() == D => seen.push(p.bits()),
                _ => seen.push(0),
            }
        }
        Ok(())
    }
    fn output(&self) -> Vec<f64> {
        self.point.clone()
    }
    fn dim(&self) -> usize {
        D
    }
    fn state(&self) -> HalfState {
        HalfState::default()
    }
    fn restore(&mut self, _: HalfState) -> dpfl::Result<()> {
        Ok(())
    }
}

fn tiny() -> SiloData {
    let d = || {
        Dataset::new(
            Matrix::zeros(1, 1),
            vec![0.0],
            Target::Real,
            vec!["x".into()],
        )
        .unwrap()
    };
    SiloData {
        train: d(),
        test: d(),
    }
}

fn federation(dir: &Path) -> dpfl_net::Federation {
    std::fs::write(
        dir.join("experiment.toml"),
        "name = \"wire\"\nrounds = 3\n[data]\nsource = { kind = \"synthetic\", task = \"regression\", silos = 2, train = 4, test = 2, features = 1 }\n[model]\nkind = \"linear\"\n[[algorithms]]\nkind = \"mb-sgd\"\nstep_size = 0.1\nbatch_size = 1\n",
    )
    .unwrap();
    dpfl_net::certs::dev_pki(&dir.join("certs"), SILOS).unwrap();
    let text = format!(
        "experiment = \"experiment.toml\"\nseed = 1\n[public]\nrecords = {:?}\nfeatures = 1\nlipschitz = 1.0\n\
         [server]\naddress = \"127.0.0.1:0\"\naddress_file = \"server.addr\"\nstate_dir = \"server\"\n\
         round_deadline_ms = 600000\n[silo]\nheartbeat_ms = 60000\n[tls]\ndir = \"certs\"\n",
        vec![1; SILOS]
    );
    let p = dir.join("federation.toml");
    std::fs::write(&p, text).unwrap();
    common::load(&p)
}

/// (bytes the server received in the rounds, messages, widths seen) for t-bit messages.
fn run(bits: u8) -> (u64, usize, Vec<u8>) {
    let tmp = tempfile::tempdir().unwrap();
    let fed = federation(tmp.path());
    assert_eq!(fed.rounds(), ROUNDS);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let half = Widths {
        point: vec![0.0; D],
        seen: seen.clone(),
    };
    let out = rt.block_on(async {
        let server = dpfl_net::server::Server::bind(fed.clone()).await.unwrap();
        let handle = tokio::spawn(server.run_with(Box::new(half)));
        let silos: Vec<_> = (0..SILOS as u32)
            .map(|i| {
                let s = dpfl_net::silo::Silo::with_half(
                    fed.clone(),
                    i,
                    tiny(),
                    Box::new(PackedSilo { bits }),
                    D,
                    dpfl_net::silo::Start::Fresh,
                )
                .unwrap();
                tokio::spawn(s.run())
            })
            .collect();
        let out = handle.await.unwrap().unwrap();
        for s in silos {
            s.await.unwrap().unwrap();
        }
        out
    });
    let messages = out.log.iter().map(|l| l.participants).sum();
    let seen = seen.lock().unwrap().clone();
    (out.received_in_rounds, messages, seen)
}

#[test]
fn t_bit_messages_of_the_paper_mlp_cross_the_wire_packed_within_1_2x_of_t_d_over_8() {
    // t = 8 and 14: the paper's Table 4 widths; 22: what a per-round δ of 1e-9 really needs.
    for bits in [8u8, 14, 22] {
        let (received, messages, seen) = run(bits);
        assert_eq!(messages, SILOS * ROUNDS);
        assert_eq!(
            seen,
            vec![bits; SILOS * ROUNDS],
            "every message arrived packed"
        );
        let payload = (bits as u64 * D as u64).div_ceil(8);
        let per_message = received as f64 / messages as f64;
        let ratio = per_message / payload as f64;
        eprintln!(
            "t = {bits}, d = {D}: {per_message:.0} bytes received per message, t·d/8 = \
             {payload} bytes, ratio {ratio:.4} (f64 would be {} bytes)",
            8 * D
        );
        assert!((1.0..=1.2).contains(&ratio), "t = {bits}: ratio {ratio}");
    }
}

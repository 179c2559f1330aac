//! PVEC inside a federated round (Lowy & Razaviyayn Algorithm 6 lines 6–8, digest
//! `isrl-dp-fl.md` §2.5; the protocol is Cheu, Joseph, Mao & Peng 2022 Algorithm 2 in
//! `dpfl_privacy::shuffle`).
//!
//! * [`PvecSilo`]: one pass over disjoint batches of K records; each record's clipped gradient
//!   at the broadcast point is one PVEC *user* (ℓ₂ ≤ L, no Gaussian noise). The silo sums its
//!   K users' per-label counts (post-processing of what the shuffled multiset reveals anyway)
//!   and sends them in one of two transports with the same analyzer distribution:
//!   - **explicit**: every one-bit message is its own [`SiloMessage`]: a one-hot
//!     `Payload::Sparse { indices: [label], values: [bit] }` (a labelled scalar that passes
//!     the floor's dimension check), d·(g + s)·K per silo — small parameters only;
//!   - **compact**: two `Payload::Labelled` messages of d 64-bit shares modulo 2⁶⁴, label
//!     [`TO_SHUFFLER`] and [`TO_SERVER`] (`dpfl_privacy::shuffle::protocol::share_counts`).
//! * [`PvecServer`]: the analyzer, in front of any server half. It sees only the round's
//!   (shuffled) messages, turns them into the estimate g̃ = PVEC(…)/(M_r K) and hands the inner
//!   server one dense message g̃ (AC-SA for Algorithm 6).
//!
//! Decisions:
//! * **n of the calibration.** PVEC's privacy holds for at least the n users it was
//!   calibrated for (fewer users mean less binomial noise), so the parameters are calibrated
//!   for n = M_min·K with M_min the fewest silos that can answer a round (configured; default
//!   N, which is only right for full participation and is refused otherwise).
//! * **Compact transport in the simulator.** The shuffler's share sum is formed inside the
//!   analyzer (the sum is the same); a real shuffler must sum its shares and forward only the
//!   sum, since pairing a silo's two shares would reveal its counts.
//! * **What the ledger charges.** The round event is the silo's randomizer's own event
//!   ([`PvecRandomizer`], `dpfl_privacy::shuffle::randomizer`), amplified by the silo's
//!   disjoint batch: by default [`Against::OwnCounts`], the guarantee *without* a trusted
//!   shuffler (the silo's own binomial noise, Lemma A.1), or [`Against::HonestShuffler`],
//!   PVEC's Theorem 3.2 (ε, δ), under `shuffler = "trusted"` (see `super::trust`).

// `pub` items here that only `crate::testing` re-exports (other crates' tests) are
// unreachable without the `test-hooks` feature.
#![cfg_attr(not(feature = "test-hooks"), allow(unreachable_pub))]

use dpfl_privacy::event::Sampling;
use dpfl_privacy::sampler::DisjointBatches;
use dpfl_privacy::shuffle::ShuffleError;
use dpfl_privacy::shuffle::protocol::{Message, Pvec, ShareSum, reveal, share_counts};
pub use dpfl_privacy::shuffle::randomizer::Against;
pub(crate) use dpfl_privacy::shuffle::randomizer::PvecRandomizer;
use dpfl_privacy::{DpRng, Mechanism, PrivacyEvent};
use serde::{Deserialize, Serialize};

use crate::algo::gradient::{check_records, next_disjoint_batch};
use crate::algo::half::{HalfState, ServerHalf, SiloHalf};
use crate::algo::message::{Broadcast, PackedInts, Payload, Reply, Round, SiloMessage};
use crate::data::Dataset;
use crate::model::GradientOracle;

/// Label of the compact share that goes to the shuffler.
pub const TO_SHUFFLER: u32 = 0;
/// Label of the compact share that goes (sealed) to the server.
pub const TO_SERVER: u32 = 1;
/// Explicit messages per silo reply (beyond it use the compact transport).
pub(crate) const MAX_EXPLICIT_PER_REPLY: u64 = 1 << 22;

/// How a silo's PVEC counts travel.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// One message per bit.
    Explicit,
    /// Additive shares of the count vector.
    #[default]
    Compact,
}

pub(crate) fn shuffle_err(e: ShuffleError) -> crate::Error {
    match e {
        ShuffleError::Parameter(p) => crate::Error::Privacy(p),
        other => crate::Error::Protocol(other.to_string()),
    }
}

/// The refusal of a silo whose every reply is several messages, asked for one.
pub(crate) fn multi_message_only() -> crate::Error {
    crate::Error::Protocol("a PVEC silo answers with a multi-message reply".into())
}

/// Per-label counts, each at most `max`, as the messages of one reply (module doc): compact,
/// two labelled 64-bit shares of the counts ([`TO_SHUFFLER`], [`TO_SERVER`]); explicit, `max`
/// one-bit messages per label, label j's first `counts[j]` of them 1.
pub(crate) fn count_messages(
    transport: Transport,
    round: Round,
    counts: &[u64],
    max: u64,
    rng: &mut DpRng,
) -> crate::Result<Vec<SiloMessage>> {
    Ok(match transport {
        Transport::Compact => {
            let shares = share_counts(counts, max, rng).map_err(shuffle_err)?;
            [
                (TO_SHUFFLER, shares.to_shuffler),
                (TO_SERVER, shares.to_server),
            ]
            .into_iter()
            .map(|(label, v)| {
                Ok(SiloMessage {
                    round,
                    payload: Payload::Labelled {
                        label,
                        payload: Box::new(Payload::Packed(PackedInts::pack(64, &v)?)),
                    },
                })
            })
            .collect::<crate::Result<Vec<_>>>()?
        }
        Transport::Explicit => {
            let d = counts.len();
            let mut out = Vec::with_capacity(d * max as usize);
            for (j, &ones) in counts.iter().enumerate() {
                for t in 0..max {
                    out.push(SiloMessage {
                        round,
                        payload: Payload::Sparse {
                            dim: d as u32,
                            indices: vec![j as u32],
                            values: vec![if t < ones { 1.0 } else { 0.0 }],
                        },
                    });
                }
            }
            out
        }
    })
}

/// The silo half of SDP one-pass MB-SGD: PVEC over the K clipped per-record gradients.
#[derive(Debug)]
pub struct PvecSilo {
    oracle: GradientOracle,
    randomizer: PvecRandomizer,
    transport: Transport,
    n: usize,
    k: usize,
    /// `None` before the first round of a one-pass silo.
    batches: Option<DisjointBatches>,
    /// Every record every round (PGD, fully interactive) instead of one pass.
    full: bool,
    grad: Vec<f64>,
}

impl PvecSilo {
    /// `pvec` calibrated for the round's users, its reply of K users private `against` the
    /// party the trust model names (its event, module doc).
    pub fn new(
        oracle: GradientOracle,
        pvec: Pvec,
        transport: Transport,
        n: usize,
        k: usize,
        against: Against,
    ) -> crate::Result<Self> {
        let d = oracle.model().num_params();
        if pvec.params().d != d {
            return Err(crate::Error::Dimension(format!(
                "PVEC for d = {}, model has {d} parameters",
                pvec.params().d
            )));
        }
        if k == 0 || k > n {
            return Err(crate::Error::config(
                "algorithm.batch_size",
                format!("K = {k} must lie in [1, n = {n}]"),
            ));
        }
        if transport == Transport::Explicit {
            let per = pvec
                .params()
                .messages_per_user()
                .map_err(shuffle_err)?
                .saturating_mul(k as u64);
            if per > MAX_EXPLICIT_PER_REPLY {
                return Err(crate::Error::config(
                    "algorithm.transport",
                    format!(
                        "explicit PVEC would send {per} messages per silo and round (> {MAX_EXPLICIT_PER_REPLY}); use transport = \"compact\""
                    ),
                ));
            }
        }
        let randomizer = PvecRandomizer::new(pvec, k as u64, against).map_err(shuffle_err)?;
        Ok(PvecSilo {
            oracle,
            randomizer,
            transport,
            n,
            k,
            batches: None,
            full: false,
            grad: vec![0.0; d],
        })
    }

    /// The silo answers every round with all its n records (Cheu et al. Algorithm 5, PGD:
    /// fully interactive, so rounds compose; its per-round event is the randomizer's for n
    /// users, unsampled).
    pub fn full_batch(
        oracle: GradientOracle,
        pvec: Pvec,
        transport: Transport,
        n: usize,
        against: Against,
    ) -> crate::Result<Self> {
        let mut s = Self::new(oracle, pvec, transport, n, n, against)?;
        s.full = true;
        Ok(s)
    }

    /// Summed per-label counts of this round's K users.
    fn counts(
        &mut self,
        b: &Broadcast,
        data: &Dataset,
        rng: &mut DpRng,
    ) -> crate::Result<Vec<u64>> {
        if self.full {
            return self.counts_of(b, data, rng, (0..self.n).collect());
        }
        let batch =
            next_disjoint_batch(&mut self.batches, self.n, self.k, rng, "PVEC silo")?.to_vec();
        self.counts_of(b, data, rng, batch)
    }

    fn counts_of(
        &mut self,
        b: &Broadcast,
        data: &Dataset,
        rng: &mut DpRng,
        batch: Vec<usize>,
    ) -> crate::Result<Vec<u64>> {
        let mut total = vec![0u64; self.grad.len()];
        for i in batch {
            let (x, y) = data.row(i);
            self.oracle.clipped_grad(&b.point, x, y, &mut self.grad);
            let c = self
                .randomizer
                .release(self.grad.as_mut_slice(), rng)
                .map_err(shuffle_err)?;
            // ≤ K·(g + s) per label, checked to fit u64 when the silo was built.
            total.iter_mut().zip(&c).for_each(|(t, v)| *t += v);
        }
        Ok(total)
    }
}

impl SiloHalf for PvecSilo {
    fn round_event(&self, _round: Round) -> Option<PrivacyEvent> {
        if self.full {
            return Some(self.randomizer.privacy_event());
        }
        Some(self.randomizer.sampled_event(Sampling::Disjoint {
            population: self.n as u64,
            size: self.k as u64,
        }))
    }

    fn respond(&mut self, _: &Broadcast, _: &Dataset, _: &mut DpRng) -> crate::Result<SiloMessage> {
        Err(multi_message_only())
    }

    fn respond_reply(
        &mut self,
        b: &Broadcast,
        data: &Dataset,
        rng: &mut DpRng,
    ) -> crate::Result<Reply> {
        b.check_dim(self.grad.len())?;
        check_records(self.n, data)?;
        let counts = self.counts(b, data, rng)?;
        // K users' messages per label (checked to fit when the silo was built).
        let max = self
            .randomizer
            .pvec()
            .params()
            .p1d
            .bits_per_user()
            .saturating_mul(self.k as u64);
        let messages = count_messages(self.transport, b.round, &counts, max, rng)?;
        Ok(Reply {
            round: b.round,
            messages,
        })
    }

    fn noise_std(&self) -> f64 {
        // Per coordinate of the analyzer's sum, for one user (Cheu et al. §2.1).
        let p = self.randomizer.pvec().params();
        (p.variance_bound() / p.d as f64).sqrt()
    }

    /// A one-pass silo's permutation and next batch position: a restarted silo process
    /// continues its pass (the simulator's batches) and never draws a used record again,
    /// which the disjoint round event it charges assumes. Without it a restart began a new
    /// pass: records used twice under a ledger that charges each once.
    fn state(&self) -> HalfState {
        let mut s = HalfState::default();
        if let Some(b) = &self.batches {
            let (perm, _, next) = b.parts();
            s.put(PASS_PERM, perm);
            s.put(PASS_NEXT, &(next as u64));
        }
        s
    }

    fn restore(&mut self, state: HalfState) -> crate::Result<()> {
        if !state.contains(PASS_PERM) {
            return Ok(());
        }
        let perm: Vec<usize> = state.get(PASS_PERM)?;
        let next: u64 = state.get(PASS_NEXT)?;
        if perm.len() != self.n {
            return Err(crate::Error::Protocol(format!(
                "state `{PASS_PERM}`: a pass over {} records, this silo has {}",
                perm.len(),
                self.n
            )));
        }
        let next = usize::try_from(next)
            .map_err(|e| crate::Error::Protocol(format!("state `{PASS_NEXT}`: {e}")))?;
        self.batches = Some(DisjointBatches::from_parts(perm, self.k, next)?);
        Ok(())
    }
}

/// The state keys of a one-pass PVEC silo's position in its pass.
const PASS_PERM: &str = "pass_perm";
const PASS_NEXT: &str = "pass_next";

/// The PVEC analyzer in front of a server half (see the module doc).
pub struct PvecServer {
    inner: Box<dyn ServerHalf>,
    pvec: Pvec,
    transport: Transport,
    users: Users,
}

/// How the compact analyzer learns n' (the explicit one counts messages).
#[derive(Debug, Clone, Copy)]
enum Users {
    /// K per answering silo (one pass).
    PerSilo(u64),
    /// Every user of every silo, every round (PGD with full participation): (users, silos).
    Total(u64, u64),
}

impl PvecServer {
    /// The analyzer of a one-pass protocol: each answering silo contributes K users per
    /// round, so the compact analyzer's n' is K times the number of answering silos; the
    /// estimate (AVEC, Algorithm 2) goes to `inner` as the round's summed gradient.
    pub fn new(inner: Box<dyn ServerHalf>, pvec: Pvec, transport: Transport, k: usize) -> Self {
        PvecServer {
            inner,
            pvec,
            transport,
            users: Users::PerSilo(k as u64),
        }
    }

    /// The analyzer of a full-batch protocol whose rounds hold all `users` users of all
    /// `silos` silos. A compact round with fewer silos' shares is refused: the analyzer
    /// cannot tell which silo (how many users) is missing, so it could not debias.
    pub fn full_batch(
        inner: Box<dyn ServerHalf>,
        pvec: Pvec,
        transport: Transport,
        users: u64,
        silos: u64,
    ) -> Self {
        PvecServer {
            inner,
            pvec,
            transport,
            users: Users::Total(users, silos),
        }
    }

    /// The sum estimate PVEC(…) and the users n' it is over, from the round's messages only.
    pub fn analyze(&self, messages: &[SiloMessage]) -> crate::Result<(Vec<f64>, u64)> {
        let d = self.pvec.params().d;
        match self.transport {
            Transport::Explicit => {
                let bits = messages
                    .iter()
                    .map(|m| match &m.payload {
                        Payload::Sparse {
                            indices, values, ..
                        } if indices.len() == 1 && values.len() == 1 => {
                            let v = values[0];
                            if v != 0.0 && v != 1.0 {
                                return Err(crate::Error::Protocol(format!(
                                    "PVEC bit message holds {v}, not 0 or 1"
                                )));
                            }
                            let bit = v == 1.0;
                            Ok(Message {
                                label: indices[0],
                                bit,
                            })
                        }
                        other => Err(crate::Error::Protocol(format!(
                            "expected a one-bit PVEC message, got {other:?}"
                        ))),
                    })
                    .collect::<crate::Result<Vec<_>>>()?;
                let users = bits.len() as u64 / (d as u64 * self.pvec.params().p1d.bits_per_user());
                let est = self.pvec.analyze_messages(&bits).map_err(shuffle_err)?;
                Ok((est, users))
            }
            Transport::Compact => {
                let (mut shuffler, mut server) = (ShareSum::new(d), ShareSum::new(d));
                for m in messages {
                    let Payload::Labelled { label, payload } = &m.payload else {
                        return Err(crate::Error::Protocol(
                            "expected a labelled PVEC share".into(),
                        ));
                    };
                    let Payload::Packed(p) = payload.as_ref() else {
                        return Err(crate::Error::Protocol("PVEC share is not packed".into()));
                    };
                    if p.bits() != 64 {
                        return Err(crate::Error::Protocol(format!(
                            "PVEC share of {}-bit values, expected 64",
                            p.bits()
                        )));
                    }
                    let side = match *label {
                        TO_SHUFFLER => &mut shuffler,
                        TO_SERVER => &mut server,
                        l => {
                            return Err(crate::Error::Protocol(format!(
                                "PVEC share label {l} is neither {TO_SHUFFLER} nor {TO_SERVER}"
                            )));
                        }
                    };
                    side.add(&p.unpack()).map_err(shuffle_err)?;
                }
                let (ones, silos) = reveal(&shuffler, &server).map_err(shuffle_err)?;
                let users = match self.users {
                    // Debiased with the observed n' = K per silo that sent shares (digest §1.5).
                    Users::PerSilo(k) => silos.saturating_mul(k),
                    Users::Total(u, n) if silos == n => u,
                    Users::Total(_, n) => {
                        return Err(crate::Error::Protocol(format!(
                            "a full-batch PVEC round holds the shares of {silos} of {n} silos: its users are unknown, so it cannot be debiased"
                        )));
                    }
                };
                let est = self
                    .pvec
                    .analyze_counts(&ones, users)
                    .map_err(shuffle_err)?;
                Ok((est, users))
            }
        }
    }
}

impl ServerHalf for PvecServer {
    fn broadcast(&mut self, round: Round) -> Broadcast {
        self.inner.broadcast(round)
    }

    fn aggregate(&mut self, round: Round, messages: &[SiloMessage]) -> crate::Result<()> {
        if let Some(m) = messages.iter().find(|m| m.round != round) {
            return Err(crate::Error::Protocol(format!(
                "message for round {} received in round {round}",
                m.round
            )));
        }
        if messages.is_empty() {
            return self.inner.aggregate(round, &[]);
        }
        let (mut est, users) = self.analyze(messages)?;
        if users == 0 {
            return self.inner.aggregate(round, &[]);
        }
        let inv = 1.0 / users as f64;
        est.iter_mut().for_each(|v| *v *= inv);
        let mean = SiloMessage {
            round,
            payload: Payload::Dense(est),
        };
        self.inner.aggregate(round, std::slice::from_ref(&mean))
    }

    fn output(&self) -> Vec<f64> {
        self.inner.output()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn state(&self) -> HalfState {
        self.inner.state()
    }

    fn restore(&mut self, state: HalfState) -> crate::Result<()> {
        self.inner.restore(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Target;
    use crate::linalg::Matrix;
    use dpfl_privacy::rng::Purpose;
    use dpfl_privacy::shuffle::params::{PvecParams, Scale};

    #[test]
    fn a_restored_one_pass_silo_continues_its_pass_and_never_reuses_a_record() {
        // n = 7 distinct records, K = 2: ⌊7/2⌋ = 3 batches. After round 0 the silo's state
        // goes into a fresh half (a restarted process) with the generator's state.
        let n = 7;
        let x = Matrix::from_vec(n, 2, (0..2 * n).map(|i| 0.1 * i as f64).collect()).unwrap();
        let names = vec!["0".to_string(), "1".to_string()];
        let data = Dataset::new(
            x,
            vec![1.0; n],
            Target::Classes {
                names: names.clone(),
            },
            names,
        )
        .unwrap();
        let model = std::sync::Arc::new(crate::model::LogisticRegression::new(2, None).unwrap());
        let oracle = GradientOracle::new(model, Some(1.0)).unwrap();
        let silo = |records| {
            let params = PvecParams::with_p1d(6, 2, 1.0, Scale::Paper, 4, 20, 0.25).unwrap();
            let pvec = Pvec::new(params).unwrap();
            PvecSilo::new(
                oracle.clone(),
                pvec,
                Transport::Compact,
                records,
                2,
                Against::OwnCounts { delta: 1e-6 },
            )
            .unwrap()
        };
        let b = |r| Broadcast {
            round: Round::new(r),
            point: vec![0.0, 0.0],
            aux: vec![],
        };
        let mut rng = DpRng::from_seed(7, Purpose::Silo, 0);
        let mut first = silo(n);
        assert!(!first.state().contains(PASS_PERM), "no pass before round 0");
        first.respond_reply(&b(0), &data, &mut rng).unwrap();
        let mut restarted = silo(n);
        restarted.restore(first.state()).unwrap();
        let mut rng_again = DpRng::from_snapshot(&rng.snapshot()).unwrap();
        // The same batches (and draws) as the process that was not restarted...
        for r in 1..3 {
            let want = first.respond_reply(&b(r), &data, &mut rng).unwrap();
            let got = restarted
                .respond_reply(&b(r), &data, &mut rng_again)
                .unwrap();
            assert_eq!(got, want, "round {r}");
        }
        // ...and the pass ends where it ends: a new pass would reuse records.
        let e = restarted
            .respond_reply(&b(3), &data, &mut rng_again)
            .unwrap_err();
        assert!(e.to_string().contains("used all"), "{e}");
        // A pass over another number of records is refused, never reinterpreted.
        let e = silo(n + 1).restore(first.state()).unwrap_err();
        assert!(e.to_string().contains("7 records"), "{e}");
    }
}

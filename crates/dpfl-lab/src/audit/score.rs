//! What the auditor reads each round: the released messages, *decoded* the way the server half
//! is allowed to decode them, into one vector u_t ∈ R^d in gradient direction; canary j's score
//! is Σ_t u_t[p_j] (issue 11: every payload kind is auditable). Only released bits are read;
//! anything the auditor reconstructs (SoteriaFL's shift) is a function of earlier messages.
//!
//! Decisions, per kind (module doc of [`super`] for the canaries):
//! * **Dense** (MB-SGD, AC-SA, Noisy MB-SGD, LDP-SGD/SVRG, Shuffled Noisy MB-SGD): the
//!   message itself.
//! * **Sparse / seeded random-k** (SoteriaFL, CDP-SGD with `random-k`): the decoded vector,
//!   (d/k)·x on the k kept coordinates and 0 elsewhere (the indices of a seeded message follow
//!   from its seed, which travels with it). That is the compressor's *unbiased* estimate, so
//!   E[u_t[p_j]] equals the uncompressed message's coordinate; a round in which p_j was not
//!   kept contributes exactly 0 to canary j's score (the canary is simply unobserved then,
//!   and the same holds for both of its states, so no side of the guess is favoured). The
//!   bound needs no correction for this: any score of the released messages gives a valid
//!   lower bound; compression only costs power (fewer observations, variance × d/k).
//! * **Quantised levels / powers of two** (`qsgd`, `natural` compressors): the decoded vector
//!   (stochastic rounding is unbiased), as for random-k.
//! * **SoteriaFL's shifted compression**: silo i sends C(g_t − s_t) and both ends update
//!   s_{t+1} = s_t + γ·C(g_t − s_t); the auditor keeps its own s_t from the messages (γ is in
//!   the public plan) and scores ĝ_t = s_t + C(g_t − s_t), an unbiased estimate of the noised
//!   gradient g_t. Scoring the message alone would telescope to s_T/γ, an average over the
//!   last ≈ 1/γ rounds only.
//! * **Models** (Local SGD, Q-DPSGD-1's C(x_i)): broadcast point − decoded model; a canary
//!   drawn with label 1 pushes its parameter down, so the difference rises.
//! * **DP-NormFedAvg's t-bit integers** (`Payload::Packed`): the raw offset-binary values
//!   z + s + h. The server's decoding is (value − (s + h))/s with s and h fixed for the run,
//!   an increasing affine map with the same coefficients for every canary and round, so
//!   Σ_t raw ranks the canaries exactly as Σ_t decoded does. The canary moves the direction
//!   d/‖d‖ *before* quantisation (a canary drawn with label 1 adds +η·L on its parameter to
//!   d); the quantiser's stochastic rounding and the TDL noise act on what it moved.
//! * **PVEC** (`psgd`, `pgd`): the per-coordinate counts of ones, PVEC's analyzer input (the
//!   analyzer's estimate is an increasing affine map of it with coefficients common to every
//!   coordinate). Compact shares are summed modulo 2⁶⁴ exactly as the analyzer does
//!   (`dpfl_privacy::shuffle::protocol::reveal`); explicit one-bit messages are summed per label.
//! * **Which messages.** Silo 0's own messages, unless the ledger charges the guarantee that
//!   relies on an honest shuffler (`shuffler = "trusted"`): then the auditor sees what that
//!   guarantee lets the server see, the round's messages of all silos summed (the analyzer
//!   input, a function of the shuffled multiset); other silos have no canary and add only
//!   their noise to the canaries' coordinates.

use dpfl_privacy::shuffle::protocol::{ShareSum, reveal};

use dpfl::algo::message::{Broadcast, Payload, SiloMessage};
use dpfl::algo::shuffle::{TO_SERVER, TO_SHUFFLER};
use dpfl::algo::spec::WingPlan;
use dpfl::algo::wing::AuditView;
use dpfl::algo::{AlgorithmSpec, Round};

/// How the auditor decodes a round's released messages (module doc).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum View {
    /// The decoded messages are gradient-like updates (dense, sparse, compressed, packed).
    Gradient {
        /// Sum over every silo's messages (trusted shuffler) instead of silo 0's.
        all_silos: bool,
    },
    /// The decoded message is a model; u_t = broadcast point − model.
    Model,
    /// SoteriaFL's shifted compression: u_t = s_t + decoded, then s_t += γ·decoded.
    Shifted {
        /// γ, the shift step of the plan.
        gamma: f64,
        /// The auditor's copy of silo 0's shift s_t.
        shift: Vec<f64>,
    },
    /// PVEC's per-coordinate counts of ones.
    PvecCounts {
        /// Sum over every silo's messages (trusted shuffler) instead of silo 0's.
        all_silos: bool,
    },
}

impl View {
    /// The view for `spec` as planned in `wing`, for models of `dim` parameters (the wing's
    /// [`dpfl::algo::wing::Wing::audit_view`]).
    pub(crate) fn for_algorithm(
        spec: &AlgorithmSpec,
        wing: &WingPlan,
        dim: usize,
    ) -> dpfl::Result<Self> {
        Ok(match spec.audit_view(wing)? {
            AuditView::Gradient { all_silos } => View::Gradient { all_silos },
            AuditView::Model => View::Model,
            AuditView::Shifted { gamma } => View::Shifted {
                gamma,
                shift: vec![0.0; dim],
            },
            AuditView::PvecCounts { all_silos } => View::PvecCounts { all_silos },
        })
    }

    /// A short description for the report.
    pub(crate) fn describe(&self) -> &'static str {
        match self {
            View::Gradient { all_silos: false } => "silo 0's decoded messages",
            View::Gradient { all_silos: true } => {
                "all silos' decoded messages summed (trusted shuffler)"
            }
            View::Model => "broadcast point minus silo 0's decoded model",
            View::Shifted { .. } => "silo 0's shift plus its decoded compressed difference",
            View::PvecCounts { all_silos: false } => "silo 0's PVEC counts of ones",
            View::PvecCounts { all_silos: true } => {
                "all silos' PVEC counts of ones (analyzer input, trusted shuffler)"
            }
        }
    }

    /// Whether the view reads every silo's messages.
    pub(crate) fn all_silos(&self) -> bool {
        matches!(
            self,
            View::Gradient { all_silos: true } | View::PvecCounts { all_silos: true }
        )
    }

    /// u_t of round `b.round` from `messages` (silo 0's, or all silos' if
    /// [`Self::all_silos`]), written over `out` (length d).
    pub(crate) fn observe(
        &mut self,
        b: &Broadcast,
        messages: &[SiloMessage],
        out: &mut [f64],
    ) -> dpfl::Result<()> {
        out.iter_mut().for_each(|v| *v = 0.0);
        if let Some(m) = messages.iter().find(|m| m.round != b.round) {
            return Err(stale(m.round, b.round));
        }
        match self {
            View::Gradient { .. } => {
                for m in messages {
                    m.payload.add_to(1.0, out)?;
                }
            }
            View::Model => {
                for m in messages {
                    m.payload.add_to(-1.0, out)?;
                    dpfl::linalg::axpy(1.0, &b.point, out);
                }
            }
            View::Shifted { gamma, shift } => {
                for m in messages {
                    let mut decoded = vec![0.0; out.len()];
                    m.payload.add_to(1.0, &mut decoded)?;
                    dpfl::linalg::axpy(1.0, shift, out);
                    dpfl::linalg::axpy(1.0, &decoded, out);
                    dpfl::linalg::axpy(*gamma, &decoded, shift);
                }
            }
            View::PvecCounts { .. } => pvec_counts(messages, out)?,
        }
        Ok(())
    }
}

fn stale(got: Round, want: Round) -> dpfl::Error {
    dpfl::Error::Protocol(format!("message for round {got} audited in round {want}"))
}

fn share_err(e: dpfl_privacy::shuffle::ShuffleError) -> dpfl::Error {
    dpfl::Error::Protocol(format!("PVEC shares: {e}"))
}

/// Counts of ones per coordinate: explicit one-hot bits summed, compact shares revealed.
fn pvec_counts(messages: &[SiloMessage], out: &mut [f64]) -> dpfl::Result<()> {
    let d = out.len();
    let (mut shuffler, mut server) = (ShareSum::new(d), ShareSum::new(d));
    let mut shares = false;
    for m in messages {
        match &m.payload {
            Payload::Labelled { label, payload } => {
                let Payload::Packed(p) = payload.as_ref() else {
                    return Err(dpfl::Error::Protocol("PVEC share is not packed".into()));
                };
                let side = match *label {
                    TO_SHUFFLER => &mut shuffler,
                    TO_SERVER => &mut server,
                    l => {
                        return Err(dpfl::Error::Protocol(format!(
                            "PVEC share label {l} is neither {TO_SHUFFLER} nor {TO_SERVER}"
                        )));
                    }
                };
                side.add(&p.unpack()).map_err(share_err)?;
                shares = true;
            }
            other => other.add_to(1.0, out)?,
        }
    }
    if shares {
        let (ones, _) = reveal(&shuffler, &server).map_err(share_err)?;
        for (o, c) in out.iter_mut().zip(ones) {
            *o += c as f64;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpfl::algo::message::PackedInts;
    use dpfl::algo::message::compressed::Compressed;

    fn msg(payload: Payload) -> SiloMessage {
        SiloMessage {
            round: Round::new(2),
            payload,
        }
    }

    fn bcast(point: Vec<f64>) -> Broadcast {
        Broadcast {
            round: Round::new(2),
            point,
            aux: vec![],
        }
    }

    #[test]
    fn each_payload_kind_decodes_to_what_the_server_may_compute() {
        let b = bcast(vec![1.0, 2.0, 3.0]);
        let mut out = vec![9.0; 3];
        let mut g = View::Gradient { all_silos: false };
        // Sparse: the kept coordinates, 0 elsewhere.
        let sparse = Payload::Sparse {
            dim: 3,
            indices: vec![0, 2],
            values: vec![1.5, -3.0],
        };
        g.observe(&b, &[msg(sparse.clone())], &mut out).unwrap();
        assert_eq!(out, [1.5, 0.0, -3.0]);
        // Levels: scale·(code − s) = 0.5·([0, 2, 4] − 2).
        let levels = Payload::Compressed(Compressed::Levels {
            s: 2,
            scale: 0.5,
            codes: PackedInts::pack(3, &[0, 2, 4]).unwrap(),
        });
        g.observe(&b, &[msg(levels)], &mut out).unwrap();
        assert_eq!(out, [-1.0, 0.0, 1.0]);
        // Packed t-bit integers: the raw values.
        let packed = Payload::Packed(PackedInts::pack(4, &[3, 8, 15]).unwrap());
        g.observe(&b, &[msg(packed)], &mut out).unwrap();
        assert_eq!(out, [3.0, 8.0, 15.0]);
        // A model: point − model.
        View::Model
            .observe(&b, &[msg(Payload::Dense(vec![0.5, 2.0, 4.0]))], &mut out)
            .unwrap();
        assert_eq!(out, [0.5, 0.0, -1.0]);
        // Shifted: u = s + decoded, then s += γ·decoded (γ = 0.5).
        let mut sh = View::Shifted {
            gamma: 0.5,
            shift: vec![1.0, 1.0, 1.0],
        };
        sh.observe(&b, &[msg(sparse)], &mut out).unwrap();
        assert_eq!(out, [2.5, 1.0, -2.0]);
        assert_eq!(
            sh,
            View::Shifted {
                gamma: 0.5,
                shift: vec![1.75, 1.0, -0.5]
            }
        );
        // A message of another round is refused.
        let late = SiloMessage {
            round: Round::new(1),
            payload: Payload::Dense(vec![0.0; 3]),
        };
        assert!(g.observe(&b, &[late], &mut out).is_err());
    }

    #[test]
    fn pvec_counts_come_from_bits_or_revealed_shares() {
        let b = bcast(vec![0.0; 2]);
        let mut out = vec![0.0; 2];
        let bit = |j: u32, v: f64| {
            msg(Payload::Sparse {
                dim: 2,
                indices: vec![j],
                values: vec![v],
            })
        };
        let mut v = View::PvecCounts { all_silos: false };
        v.observe(
            &b,
            &[bit(0, 1.0), bit(0, 1.0), bit(1, 0.0), bit(1, 1.0)],
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [2.0, 1.0]);
        // Counts [5, 7] as shares r and c − r (mod 2⁶⁴).
        let r = [u64::MAX - 1, 40];
        let c = [5u64.wrapping_sub(r[0]), 7u64.wrapping_sub(r[1])];
        let share = |label, v: &[u64]| {
            msg(Payload::Labelled {
                label,
                payload: Box::new(Payload::Packed(PackedInts::pack(64, v).unwrap())),
            })
        };
        v.observe(
            &b,
            &[share(TO_SHUFFLER, &r), share(TO_SERVER, &c)],
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [5.0, 7.0]);
        // One share without its pair is refused.
        assert!(v.observe(&b, &[share(TO_SERVER, &c)], &mut out).is_err());
    }
}

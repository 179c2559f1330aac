//! Q-DPSGD-1 (Ding et al., "Differentially private and communication efficient collaborative
//! learning", AAAI 2021; SoteriaFL's Table 1 baseline [17]), as the SoteriaFL authors' code has
//! it (digest `soteriafl.md` §3.5): every silo keeps its own model x_i and, each round,
//!
//! ```text
//! z_i = C(x_i)                                  (sent; compression of the MODEL, not a gradient)
//! g_i = (1/b)Σ_{j∈I_b} clip_G ∇f_ij(x_i) + N(0, σ²I)
//! x_i ← (1 − ε_c + ε_c/n)·x_i + ε_c·mean_j z_j − (ε_c/n)·z_i − ε_c·η·g_i
//! ```
//!
//! with ε_c the consensus step (`consensus`, default 0.9, the code's; not the privacy ε).
//!
//! Decisions:
//! - The gradient never leaves the silo; x_i, hence every z_i, is post-processing of the noisy
//!   g_i, so a round costs one sampled Gaussian (sensitivity 2G/b under replace-one), the same
//!   event as SoteriaFL-SGD's, calibrated the same way ([`super::calibration::round_event`]).
//! - Per-record clipping (the code clips each silo's minibatch mean: no guarantee).
//! - Halves: the server averages z̄ = mean_j z_j and broadcasts it as the round's point; silo i
//!   applies the update of round t when it receives z̄^t at round t+1 (it keeps its sent
//!   realisation z_i and its noisy g_i until then). The T-th gradient is drawn and charged but
//!   no update uses it (never under-charged).
//! - Output: z̄ of the last round, the only model the server holds (an unbiased estimate of
//!   mean_i x_i; the authors' code evaluates mean_i x_i, which no party holds).
//! - Every silo must answer every round (the mean over j and the −(ε_c/n)z_i term assume n).

use dpfl_privacy::mechanism::Mechanism;
use dpfl_privacy::sampler::BatchSampler;
use dpfl_privacy::{DpRng, PrivacyEvent};

use super::silo::{SiloNoise, float_count};
use crate::algo::half::{HalfState, ServerHalf, SiloHalf};
use crate::algo::message::{Broadcast, Round, SiloMessage};
use crate::algo::server::average_messages;
use crate::compress::Compressor;
use crate::data::Dataset;
use crate::model::GradientOracle;

/// The Q-DPSGD-1 silo half.
#[derive(Debug)]
pub(crate) struct QdpsgdSilo {
    oracle: GradientOracle,
    sampler: BatchSampler,
    m: usize,
    b: usize,
    noise: Option<SiloNoise>,
    compressor: Box<dyn Compressor>,
    /// (ε_c, η, n).
    consensus: f64,
    step_size: f64,
    silos: usize,
    /// x_i; set from the first broadcast (x⁰).
    x: Option<Vec<f64>>,
    /// The last round's sent z_i and noisy g_i, awaiting that round's z̄.
    pending: Option<(Vec<f64>, Vec<f64>)>,
    grad_evals: u64,
    floats_sent: u64,
    idx: Vec<usize>,
    scratch: Vec<f64>,
}

impl QdpsgdSilo {
    /// The half of a silo with m records drawing b per round, with consensus step ε_c =
    /// `consensus` and local step η = `step_size` among `silos` silos.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        oracle: GradientOracle,
        sampler: BatchSampler,
        m: usize,
        b: usize,
        noise: Option<SiloNoise>,
        compressor: Box<dyn Compressor>,
        consensus: f64,
        step_size: f64,
        silos: usize,
    ) -> Self {
        let d = oracle.model().num_params();
        QdpsgdSilo {
            oracle,
            sampler,
            m,
            b,
            noise,
            compressor,
            consensus,
            step_size,
            silos,
            x: None,
            pending: None,
            grad_evals: 0,
            floats_sent: 0,
            idx: Vec::new(),
            scratch: vec![0.0; d],
        }
    }
}

/// x ← (1 − ε + ε/n)·x + ε·z̄ − (ε/n)·z − ε·η·g (digest §3.5).
pub(crate) fn consensus_step(
    x: &mut [f64],
    zbar: &[f64],
    z: &[f64],
    g: &[f64],
    eps: f64,
    eta: f64,
    n: usize,
) {
    let keep = 1.0 - eps + eps / n as f64;
    let own = eps / n as f64;
    for (((xi, zb), zi), gi) in x.iter_mut().zip(zbar).zip(z).zip(g) {
        *xi = keep * *xi + eps * zb - own * zi - eps * eta * gi;
    }
}

impl SiloHalf for QdpsgdSilo {
    fn round_event(&self, _round: Round) -> Option<PrivacyEvent> {
        self.noise
            .as_ref()
            .map(|n| n.round_event(Some(&self.sampler)))
    }

    fn respond(
        &mut self,
        b: &Broadcast,
        data: &Dataset,
        rng: &mut DpRng,
    ) -> crate::Result<SiloMessage> {
        let d = self.scratch.len();
        b.check_dim(d)?;
        crate::algo::gradient::check_records(self.m, data)?;
        let x = match (self.x.take(), self.pending.take()) {
            (None, _) => b.point.clone(),
            (Some(mut x), Some((z, g))) => {
                consensus_step(
                    &mut x,
                    &b.point,
                    &z,
                    &g,
                    self.consensus,
                    self.step_size,
                    self.silos,
                );
                x
            }
            (Some(x), None) => x,
        };
        self.sampler.draw(rng, &mut self.idx);
        let mut g = vec![0.0; d];
        self.oracle
            .mean_grad(&x, data, &self.idx, &mut g, &mut self.scratch);
        // A sum over the drawn records divided by b (Poisson: the expected size).
        let f = self.idx.len() as f64 / self.b as f64;
        if f != 1.0 {
            crate::linalg::scale(f, &mut g);
        }
        self.grad_evals += self.idx.len() as u64;
        if let Some(n) = &mut self.noise {
            let Ok(()) = n.release(g.as_mut_slice(), rng);
        }
        let payload = self.compressor.compress(&x, rng)?;
        let mut z = vec![0.0; d];
        payload.add_to(1.0, &mut z)?;
        self.floats_sent += float_count(&payload);
        self.pending = Some((z, g));
        self.x = Some(x);
        Ok(SiloMessage {
            round: b.round,
            payload,
        })
    }

    fn counters(&self) -> Option<crate::algo::half::SiloCounters> {
        Some(crate::algo::half::SiloCounters {
            grad_evals: self.grad_evals,
            floats_sent: self.floats_sent,
        })
    }

    fn noise_std(&self) -> f64 {
        self.noise.as_ref().map_or(0.0, |n| n.sigma())
    }

    fn state(&self) -> HalfState {
        let mut st = HalfState::default();
        if let Some(x) = &self.x {
            st.put("x", x);
        }
        if let Some((z, g)) = &self.pending {
            st.put("pending_z", z);
            st.put("pending_g", g);
        }
        st.put("grad_evals", &self.grad_evals)
            .put("floats_sent", &self.floats_sent);
        st
    }

    fn restore(&mut self, st: HalfState) -> crate::Result<()> {
        let d = self.scratch.len();
        self.x = if st.contains("x") {
            Some(st.vector("x", d)?)
        } else {
            None
        };
        self.pending = if st.contains("pending_z") {
            Some((st.vector("pending_z", d)?, st.vector("pending_g", d)?))
        } else {
            None
        };
        self.grad_evals = st.get("grad_evals")?;
        self.floats_sent = st.get("floats_sent")?;
        Ok(())
    }
}

/// The Q-DPSGD-1 server half: z̄ = mean_j z_j, broadcast as the next round's point.
#[derive(Debug, Clone)]
pub(crate) struct QdpsgdServer {
    zbar: Vec<f64>,
    silos: usize,
}

impl QdpsgdServer {
    /// From x⁰ and the silo count.
    pub(crate) fn new(init: Vec<f64>, silos: usize) -> Self {
        QdpsgdServer { zbar: init, silos }
    }
}

impl ServerHalf for QdpsgdServer {
    fn broadcast(&mut self, round: Round) -> Broadcast {
        Broadcast {
            round,
            point: self.zbar.clone(),
            aux: Vec::new(),
        }
    }

    fn aggregate(&mut self, round: Round, messages: &[SiloMessage]) -> crate::Result<()> {
        if messages.len() != self.silos {
            return Err(crate::Error::Protocol(format!(
                "round {round}: Q-DPSGD-1 needs all {} silos every round, got {} messages",
                self.silos,
                messages.len()
            )));
        }
        let mut z = vec![0.0; self.zbar.len()];
        average_messages(messages, round, &mut z)?;
        self.zbar = z;
        Ok(())
    }

    fn output(&self) -> Vec<f64> {
        self.zbar.clone()
    }

    fn dim(&self) -> usize {
        self.zbar.len()
    }

    fn state(&self) -> HalfState {
        let mut st = HalfState::default();
        st.put("zbar", &self.zbar);
        st
    }

    fn restore(&mut self, st: HalfState) -> crate::Result<()> {
        self.zbar = st.vector("zbar", self.zbar.len())?;
        Ok(())
    }
}

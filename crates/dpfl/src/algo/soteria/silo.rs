//! SoteriaFL's silo half (Algorithm 2 lines 3–6 with Algorithm 3's estimators; Algorithm 1
//! lines 3–6 for direct compression) and its noise [`SiloNoise`], the mechanism whose two
//! sensitivities follow Lemma 3: local estimator → Gaussian noise → compress (the
//! shifted difference g − s_i, or g itself) → s_i ← s_i + γ·v_i with the very realisation
//! that is sent (the payload is decoded into the shift, so what the server adds and what the
//! silo adds are the same numbers).
//!
//! Per-record clipping (Assumption 2 enforced): every ∇f_ij is clipped to G before it enters
//! an estimator; SVRG and SAGA clip ∇f_ij(x) and ∇f_ij(w) separately (digest ambiguity 2),
//! so ‖φ‖ ≤ 2G and ‖ψ‖ ≤ G as Lemma 1 needs. A sampled term is a sum divided by the expected
//! batch b (Poisson: Lemma 3's normalisation), never by the drawn size.

use dpfl_privacy::event::Sampling;
use dpfl_privacy::mechanism::{GaussianMechanism, Mechanism, VectorMechanism};
use dpfl_privacy::sampler::{BatchSampler, Poisson};
use dpfl_privacy::{DpRng, PrivacyEvent};

use super::calibration::Estimator;
use crate::algo::half::{HalfState, SiloHalf};
use crate::algo::message::compressed::Compressed;
use crate::algo::message::{Broadcast, Payload, Round, SiloMessage};
use crate::compress::Compressor;
use crate::data::Dataset;
use crate::model::GradientOracle;

/// The noise of one silo (a [`Mechanism`]): N(0, σ²I) as one draw (SGD/GD, aggregate
/// clipping) or Lemma 3's two independent parts (SVRG/SAGA: N(0, (2/3)σ²I) on the sampled
/// term A at sensitivity 4G/b, N(0, (1/3)σ²I) on the full-batch term B at 2G/m; module docs
/// of [`super::calibration`]). Each part says whether the round's record sampling amplifies
/// it, so the round event is the parts' events, the sampled ones amplified
/// ([`Mechanism::sampled_event`]), composed.
#[derive(Debug, Clone)]
pub(crate) struct SiloNoise {
    /// One Gaussian per independent draw, with whether record sampling amplifies it.
    parts: Vec<(GaussianMechanism, bool)>,
    /// σ_p, the total standard deviation per coordinate.
    sigma: f64,
}

impl SiloNoise {
    /// One draw N(0, σ²I) at sensitivity `sensitivity`; `sampled`: whether the round's record
    /// sampling amplifies it (not for GD's full batch, nor under aggregate clipping).
    pub(crate) fn single(sigma: f64, sensitivity: f64, sampled: bool) -> crate::Result<Self> {
        Ok(SiloNoise {
            parts: vec![(GaussianMechanism::new(sigma, sensitivity)?, sampled)],
            sigma,
        })
    }
    /// Lemma 3's split of N(0, σ²I) for a silo of m records drawing b with per-record bound
    /// G: A (sampled) N(0, (2/3)σ²I) at 4G/b, then B N(0, (1/3)σ²I) at 2G/m.
    pub(crate) fn split(sigma: f64, g: f64, b: usize, m: usize) -> crate::Result<Self> {
        let (sa, sb) = super::calibration::split_sigma(sigma);
        Ok(SiloNoise {
            parts: vec![
                (GaussianMechanism::new(sa, 4.0 * g / b as f64)?, true),
                (GaussianMechanism::new(sb, 2.0 * g / m as f64)?, false),
            ],
            sigma,
        })
    }
    /// σ_p, the total standard deviation per coordinate.
    pub(crate) fn sigma(&self) -> f64 {
        self.sigma
    }
    /// The round event of a silo whose records are drawn by `sampler` (`None`: every record).
    pub(crate) fn round_event(&self, sampler: Option<&BatchSampler>) -> PrivacyEvent {
        match sampler {
            Some(s) => self.sampled_event(s.sampling()),
            None => self.privacy_event(),
        }
    }
}

impl Mechanism for SiloNoise {
    type Input<'a> = [f64];
    type Output = ();
    type Error = std::convert::Infallible;
    fn release(&mut self, v: &mut [f64], rng: &mut DpRng) -> Result<(), Self::Error> {
        for (m, _) in &self.parts {
            m.privatize(v, rng);
        }
        Ok(())
    }
    fn privacy_event(&self) -> PrivacyEvent {
        match self.parts.as_slice() {
            [(m, _)] => m.privacy_event(),
            parts => PrivacyEvent::Composed(parts.iter().map(|(m, _)| m.privacy_event()).collect()),
        }
    }
    fn sampled_event(&self, sampling: Sampling) -> PrivacyEvent {
        let event = |(m, sampled): &(GaussianMechanism, bool)| {
            if *sampled {
                m.privacy_event().sampled(sampling.clone())
            } else {
                m.privacy_event()
            }
        };
        match self.parts.as_slice() {
            [part] => event(part),
            parts => PrivacyEvent::Composed(parts.iter().map(event).collect()),
        }
    }
}

/// The silo half of CDP-SGD, LDP-SGD/SVRG and SoteriaFL-GD/SGD/SVRG/SAGA.
#[derive(Debug)]
pub(crate) struct SoteriaSilo {
    est: Estimator,
    /// Clips every per-record gradient at G (per-record mode) or not at all (aggregate mode).
    oracle: GradientOracle,
    /// The official code's clipping of the whole estimator at G (no guarantee at the target).
    aggregate_clip: Option<f64>,
    sampler: Option<BatchSampler>,
    m: usize,
    b: usize,
    noise: Option<SiloNoise>,
    compressor: Box<dyn Compressor>,
    /// Shifted compression: (γ, s_i); `None` for direct compression.
    shift: Option<(f64, Vec<f64>)>,
    /// SVRG: (w, ∇f_i(w)) once taken.
    snapshot: Option<(Vec<f64>, Vec<f64>)>,
    /// SAGA: per-record table (m × d) and its mean, once filled at x⁰.
    saga: Option<(Vec<f64>, Vec<f64>)>,
    grad_evals: u64,
    floats_sent: u64,
    all: Vec<usize>,
    idx: Vec<usize>,
    g: Vec<f64>,
    tmp: Vec<f64>,
    scratch: Vec<f64>,
}

impl SoteriaSilo {
    /// The half of a silo with m records drawing b per round (`sampler`: `None` for GD);
    /// `aggregate_clip` is the official code's whole-estimator clip, `shift_step` γ under
    /// shifted compression (`None`: direct compression).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        est: Estimator,
        oracle: GradientOracle,
        aggregate_clip: Option<f64>,
        sampler: Option<BatchSampler>,
        m: usize,
        b: usize,
        noise: Option<SiloNoise>,
        compressor: Box<dyn Compressor>,
        shift_step: Option<f64>,
    ) -> Self {
        let d = oracle.model().num_params();
        SoteriaSilo {
            est,
            oracle,
            aggregate_clip,
            sampler,
            m,
            b,
            noise,
            compressor,
            shift: shift_step.map(|g| (g, vec![0.0; d])),
            snapshot: None,
            saga: None,
            grad_evals: 0,
            floats_sent: 0,
            all: (0..m).collect(),
            idx: Vec::new(),
            g: vec![0.0; d],
            tmp: vec![0.0; d],
            scratch: vec![0.0; d],
        }
    }

    /// out = (1/b)·Σ_{j∈idx} clip ∇f_ij(point), the sum over the drawn batch divided by b.
    fn batch_term(&mut self, point: &[f64], data: &Dataset, out_is_tmp: bool) {
        let out = if out_is_tmp {
            &mut self.tmp
        } else {
            &mut self.g
        };
        self.oracle
            .mean_grad(point, data, &self.idx, out, &mut self.scratch);
        let f = self.idx.len() as f64 / self.b as f64;
        if f != 1.0 {
            crate::linalg::scale(f, out);
        }
        self.grad_evals += self.idx.len() as u64;
    }

    fn full_mean(&mut self, point: &[f64], data: &Dataset) -> Vec<f64> {
        let mut out = vec![0.0; point.len()];
        self.oracle
            .mean_grad(point, data, &self.all, &mut out, &mut self.scratch);
        self.grad_evals += self.m as u64;
        out
    }

    fn draw(&mut self, rng: &mut DpRng) {
        match &self.sampler {
            Some(s) => s.draw(rng, &mut self.idx),
            None => {
                self.idx.clear();
                self.idx.extend(0..self.m);
            }
        }
    }

    /// The estimator g̃_i at x (Algorithm 3 Options I–III) into `self.g`.
    fn estimate(&mut self, b: &Broadcast, data: &Dataset, rng: &mut DpRng) -> crate::Result<()> {
        let x = &b.point;
        match self.est {
            Estimator::Gd | Estimator::Sgd => {
                self.draw(rng);
                self.batch_term(x, data, false);
            }
            Estimator::Svrg => {
                let refresh = svrg_coin(b)?;
                if self.snapshot.is_none() {
                    // w⁰ = x⁰ (Algorithm 3's input).
                    let full = self.full_mean(x, data);
                    self.snapshot = Some((x.clone(), full));
                }
                self.draw(rng);
                self.batch_term(x, data, false);
                let (w, full) = self.snapshot.take().unwrap_or_default();
                self.batch_term(&w, data, true);
                crate::linalg::axpy(-1.0, &self.tmp, &mut self.g);
                crate::linalg::axpy(1.0, &full, &mut self.g);
                // w^{t+1} = x^t on the shared coin (after g̃ used w^t).
                self.snapshot = Some(if refresh {
                    let f = self.full_mean(x, data);
                    (x.clone(), f)
                } else {
                    (w, full)
                });
            }
            Estimator::Saga => self.saga_estimate(x, data, rng)?,
        }
        if let Some(c) = self.aggregate_clip {
            let f = crate::linalg::clip_factor(crate::linalg::norm2(&self.g), c);
            crate::linalg::scale(f, &mut self.g);
        }
        Ok(())
    }

    fn saga_estimate(&mut self, x: &[f64], data: &Dataset, rng: &mut DpRng) -> crate::Result<()> {
        let d = x.len();
        if self.saga.is_none() {
            crate::data::limits::check_params(
                "SAGA table (records × parameters)",
                self.m.checked_mul(d),
            )?;
            // w_ij⁰ = x⁰ for every record.
            let mut table = vec![0.0; self.m * d];
            for j in 0..self.m {
                let (row, y) = data.row(j);
                self.oracle
                    .clipped_grad(x, row, y, &mut table[j * d..(j + 1) * d]);
            }
            self.grad_evals += self.m as u64;
            let mut mean = vec![0.0; d];
            for j in 0..self.m {
                crate::linalg::axpy(1.0 / self.m as f64, &table[j * d..(j + 1) * d], &mut mean);
            }
            self.saga = Some((table, mean));
        }
        self.draw(rng);
        let Some((table, mean)) = self.saga.as_mut() else {
            return Err(crate::Error::Protocol("SAGA table missing".into()));
        };
        // A uses the table before this round's update, also for a record drawn twice.
        let mut fresh = vec![0.0; self.idx.len() * d];
        self.g.copy_from_slice(mean);
        let inv_b = 1.0 / self.b as f64;
        for (k, &j) in self.idx.iter().enumerate() {
            let (row, y) = data.row(j);
            let c = &mut fresh[k * d..(k + 1) * d];
            self.oracle.clipped_grad(x, row, y, c);
            crate::linalg::axpy(inv_b, c, &mut self.g);
            crate::linalg::axpy(-inv_b, &table[j * d..(j + 1) * d], &mut self.g);
        }
        self.grad_evals += self.idx.len() as u64;
        let inv_m = 1.0 / self.m as f64;
        for (k, &j) in self.idx.iter().enumerate() {
            let new = &fresh[k * d..(k + 1) * d];
            let old = &mut table[j * d..(j + 1) * d];
            for ((mu, o), n) in mean.iter_mut().zip(old.iter_mut()).zip(new) {
                *mu += inv_m * (n - *o);
                *o = *n;
            }
        }
        Ok(())
    }
}

/// The f64 values a payload carries (the paper's bit count is 64 per such value): d dense,
/// k for random-k (either index encoding), 1 for a quantisation scale, 0 for powers of two.
pub(crate) fn float_count(p: &Payload) -> u64 {
    match p {
        Payload::Dense(v) => v.len() as u64,
        Payload::Sparse { values, .. } => values.len() as u64,
        Payload::Compressed(Compressed::SeededSparse { values, .. }) => values.len() as u64,
        Payload::Compressed(Compressed::Levels { .. }) => 1,
        Payload::Compressed(Compressed::PowersOfTwo(_)) | Payload::Packed(_) => 0,
        Payload::Labelled { payload, .. } => float_count(payload),
    }
}

/// SVRG's shared coin from the server's broadcast (`aux = [[0 or 1]]`).
pub(crate) fn svrg_coin(b: &Broadcast) -> crate::Result<bool> {
    match b.aux.as_slice() {
        [c] if c.len() == 1 && (c[0] == 0.0 || c[0] == 1.0) => Ok(c[0] == 1.0),
        _ => Err(crate::Error::Protocol(
            "an SVRG broadcast must carry its snapshot coin as aux = [[0 or 1]]".into(),
        )),
    }
}

/// The server's coin for round r: Bernoulli(p) from stream (seed, Server, r), so that a
/// repeated broadcast of the same round repeats its coin.
pub(crate) fn draw_coin(seed: u64, p: f64, round: Round) -> crate::Result<bool> {
    let mut rng = DpRng::from_seed(seed, dpfl_privacy::rng::Purpose::Server, round.get());
    let mut out = Vec::new();
    Poisson::new(1, p)?.draw(&mut rng, &mut out);
    Ok(!out.is_empty())
}

impl SiloHalf for SoteriaSilo {
    fn round_event(&self, _round: Round) -> Option<PrivacyEvent> {
        self.noise
            .as_ref()
            .map(|n| n.round_event(self.sampler.as_ref()))
    }

    fn respond(
        &mut self,
        b: &Broadcast,
        data: &Dataset,
        rng: &mut DpRng,
    ) -> crate::Result<SiloMessage> {
        b.check_dim(self.g.len())?;
        crate::algo::gradient::check_records(self.m, data)?;
        self.estimate(b, data, rng)?;
        if let Some(n) = &mut self.noise {
            let Ok(()) = n.release(self.g.as_mut_slice(), rng);
        }
        let payload = match &mut self.shift {
            Some((gamma, s)) => {
                crate::linalg::axpy(-1.0, s, &mut self.g);
                let p = self.compressor.compress(&self.g, rng)?;
                p.add_to(*gamma, s)?;
                p
            }
            None => self.compressor.compress(&self.g, rng)?,
        };
        self.floats_sent += float_count(&payload);
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
        if let Some((_, s)) = &self.shift {
            st.put("shift", s);
        }
        if let Some((w, f)) = &self.snapshot {
            st.put("svrg_w", w);
            st.put("svrg_full", f);
        }
        if let Some((t, mu)) = &self.saga {
            st.put("saga_table", t);
            st.put("saga_mean", mu);
        }
        st.put("grad_evals", &self.grad_evals)
            .put("floats_sent", &self.floats_sent);
        st
    }

    fn restore(&mut self, st: HalfState) -> crate::Result<()> {
        let d = self.g.len();
        if let Some((_, s)) = &mut self.shift {
            *s = st.vector("shift", d)?;
        }
        self.snapshot = if st.contains("svrg_w") {
            Some((st.vector("svrg_w", d)?, st.vector("svrg_full", d)?))
        } else {
            None
        };
        self.saga = if st.contains("saga_table") {
            Some((
                st.vector("saga_table", self.m * d)?,
                st.vector("saga_mean", d)?,
            ))
        } else {
            None
        };
        self.grad_evals = st.get("grad_evals")?;
        self.floats_sent = st.get("floats_sent")?;
        Ok(())
    }
}

//! Server helpers every wing shares: averaging a round's messages, the iterate a server
//! outputs (average, last, the average of the last k, or the exponential weights of Lowy &
//! Razaviyayn Thm 2.1), the iterates of an AC-SA server ([`AcsaIterates`]), and MB-SGD's
//! server half ([`MbSgdServer`]), which the Lowy and shuffle wings both run.

use serde::{Deserialize, Serialize};

use super::half::{HalfState, ServerHalf};
use super::message::{Broadcast, Round, SiloMessage};
use crate::model::Projection;
use crate::units::StepSize;

/// Which iterate the server outputs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OutputRule {
    /// ŵ_R = (1/R) Σ_{r<R} w_r (Algorithm 2 line 11 with γ_r = 1/R).
    #[default]
    Average,
    /// w_R.
    Last,
    /// ŵ_R = Σ γ_r w_r / Σ γ_r with γ_r = (1 − decay)^{−(r+1)}: Thm 2.1 / D.1's strongly
    /// convex weights (Stich's Lemma D.5) for decay = μη ∈ [0, 1).
    Exponential {
        /// μη ∈ [0, 1).
        decay: f64,
    },
    /// The average of the last k iterates w_{R−k+1}, …, w_R (all of w_1..w_R if R < k; w_0
    /// if R = 0): `output = { average-last = { k = 8 } }`. The official insurance script of
    /// Lowy & Razaviyayn (ICLR 2023) reports its MB-SGD numbers this way (k = 8, issue 11 item
    /// 4); post-processing of the released iterates, so it costs no privacy.
    AverageLast {
        /// How many of the last iterates are averaged (≥ 1).
        k: std::num::NonZeroUsize,
    },
}

/// Running average of iterates (γ_r = 1/R) or the last iterate.
#[derive(Debug, Clone)]
pub(crate) struct IterateOutput {
    rule: OutputRule,
    sum: Vec<f64>,
    count: f64,
    /// [`OutputRule::AverageLast`]: w_1, w_2, … in a ring of k slots (w_j in slot (j−1) mod k).
    ring: Vec<f64>,
}

impl IterateOutput {
    /// An accumulator of d-dimensional iterates under `rule`.
    pub(crate) fn new(rule: OutputRule, d: usize) -> Self {
        let ring = match rule {
            OutputRule::AverageLast { k } => vec![0.0; k.get() * d],
            _ => Vec::new(),
        };
        IterateOutput {
            rule,
            sum: vec![0.0; d],
            count: 0.0,
            ring,
        }
    }
    /// Records the iterate w_r that round r started from.
    pub(crate) fn record(&mut self, w: &[f64]) {
        match self.rule {
            // `sum` holds the running weighted average itself (no overflow for large r).
            OutputRule::Exponential { decay } => {
                let c = exponential_weight(decay, self.count);
                for (s, x) in self.sum.iter_mut().zip(w) {
                    *s += c * (x - *s);
                }
            }
            // w_0 is never among the last k once an update happened; w_j (j ≥ 1) → its slot.
            OutputRule::AverageLast { k } => {
                if self.count >= 1.0 {
                    let d = w.len();
                    let slot = (self.count as usize - 1) % k.get();
                    self.ring[slot * d..(slot + 1) * d].copy_from_slice(w);
                }
            }
            _ => crate::linalg::axpy(1.0, w, &mut self.sum),
        }
        self.count += 1.0;
    }
    /// The output given the current iterate.
    pub(crate) fn output(&self, current: &[f64]) -> Vec<f64> {
        match self.rule {
            OutputRule::Last => current.to_vec(),
            OutputRule::Average if self.count == 0.0 => current.to_vec(),
            OutputRule::Average => self.sum.iter().map(|s| s / self.count).collect(),
            OutputRule::Exponential { .. } if self.count == 0.0 => current.to_vec(),
            OutputRule::Exponential { .. } => self.sum.clone(),
            OutputRule::AverageLast { .. } if self.count == 0.0 => current.to_vec(),
            OutputRule::AverageLast { k } => {
                // Recorded w_1..w_{count−1}, plus the current w_R = w_count.
                let d = current.len();
                let recorded = self.count as usize - 1;
                let take = recorded.min(k.get() - 1);
                let mut out = current.to_vec();
                for i in 0..take {
                    let j = recorded - i; // w_j, newest first
                    let slot = (j - 1) % k.get();
                    crate::linalg::axpy(1.0, &self.ring[slot * d..(slot + 1) * d], &mut out);
                }
                let c = 1.0 / (take + 1) as f64;
                out.iter_mut().for_each(|v| *v *= c);
                out
            }
        }
    }
    /// Writes the accumulator into a half's state.
    pub(crate) fn save(&self, state: &mut HalfState) {
        state.put("iterate_sum", &self.sum);
        state.put("iterate_count", &self.count);
        if !self.ring.is_empty() {
            state.put("iterate_ring", &self.ring);
        }
    }
    /// Reads the accumulator back from a half's state.
    pub(crate) fn load(&mut self, state: &HalfState) -> crate::Result<()> {
        self.sum = state.vector("iterate_sum", self.sum.len())?;
        self.count = state.scalar("iterate_count")?;
        if !self.ring.is_empty() {
            self.ring = state.vector("iterate_ring", self.ring.len())?;
        }
        Ok(())
    }
    /// The state of a server half that is an iterate `w` plus this output rule (MB-SGD's and
    /// Local SGD's servers): one layout, written and read in one place.
    pub(crate) fn state_with(&self, w: &[f64]) -> HalfState {
        let mut s = HalfState::default();
        s.put("w", w);
        self.save(&mut s);
        s
    }
    /// Restores what [`IterateOutput::state_with`] wrote into `w` and this output rule.
    pub(crate) fn restore_with(
        &mut self,
        w: &mut Vec<f64>,
        state: &HalfState,
    ) -> crate::Result<()> {
        *w = state.vector("w", w.len())?;
        self.load(state)
    }
}

/// The running weighted average of iterates with weights γ_r = (1 − ρ)^{−(r+1)}, r = 0, 1, …,
/// kept as an average so that nothing overflows: after r+1 iterates the newest one has relative
/// weight γ_r/Γ_r = (1 − q)/(1 − q^{r+1}) with q = 1 − ρ, computed with `ln_1p`/`exp_m1`.
pub(crate) fn exponential_weight(decay: f64, count: f64) -> f64 {
    if decay <= 0.0 {
        return 1.0 / (count + 1.0);
    }
    if decay >= 1.0 {
        return 1.0;
    }
    let ln_q = (-decay).ln_1p();
    // 1 − q^{r+1} = −expm1((r+1) ln q).
    decay / -((count + 1.0) * ln_q).exp_m1()
}

/// g = (1/M_r) Σ messages, checked. Returns false if there were no messages.
pub(crate) fn average_messages(
    messages: &[SiloMessage],
    round: Round,
    g: &mut [f64],
) -> crate::Result<bool> {
    g.iter_mut().for_each(|v| *v = 0.0);
    if messages.is_empty() {
        return Ok(false);
    }
    let s = 1.0 / messages.len() as f64;
    for m in messages {
        if m.round != round {
            return Err(crate::Error::Protocol(format!(
                "message for round {} received in round {round}",
                m.round
            )));
        }
        m.payload.add_to(s, g)?;
    }
    Ok(true)
}

/// MB-SGD's server half (Lowy & Razaviyayn Algorithm 2 lines 9–11; also the server of the
/// shuffle wing's SDP MB-SGD, PSGD and PGD): average, projected step, iterate averaging.
#[derive(Debug, Clone)]
pub(crate) struct MbSgdServer {
    w: Vec<f64>,
    step_size: StepSize,
    projection: Projection,
    out: IterateOutput,
    g: Vec<f64>,
}

impl MbSgdServer {
    /// The server half: w_{r+1} = Π_W(w_r − η·mean of the round's messages), starting at `init`;
    /// `rule` says which iterate is output.
    pub(crate) fn new(
        init: Vec<f64>,
        step_size: StepSize,
        projection: Projection,
        rule: OutputRule,
    ) -> Self {
        let d = init.len();
        let mut w = init;
        projection.apply(&mut w);
        MbSgdServer {
            w,
            step_size,
            projection,
            out: IterateOutput::new(rule, d),
            g: vec![0.0; d],
        }
    }
}

impl ServerHalf for MbSgdServer {
    fn broadcast(&mut self, round: Round) -> Broadcast {
        Broadcast {
            round,
            point: self.w.clone(),
            aux: Vec::new(),
        }
    }

    fn aggregate(&mut self, round: Round, messages: &[SiloMessage]) -> crate::Result<()> {
        self.out.record(&self.w);
        if average_messages(messages, round, &mut self.g)? {
            crate::linalg::axpy(-self.step_size.get(), &self.g, &mut self.w);
            self.projection.apply(&mut self.w);
        }
        Ok(())
    }

    fn output(&self) -> Vec<f64> {
        self.out.output(&self.w)
    }

    fn dim(&self) -> usize {
        self.w.len()
    }

    fn state(&self) -> HalfState {
        self.out.state_with(&self.w)
    }

    fn restore(&mut self, state: HalfState) -> crate::Result<()> {
        self.out.restore_with(&mut self.w, &state)
    }
}

/// The iterates of an AC-SA server (Ghadimi & Lan 2012): Lowy & Razaviyayn's Algorithm 1
/// (`lowy/acsa.rs`) and Cheu et al.'s Algorithm 4 (`shuffle/pagd.rs`). Each of them forms
/// w_md and the step to the new w by its own paper's formula, in its own file; what the two
/// share is here: the start Π_W(w₀), the round's mean gradient, the projection w ← Π_W(w)
/// and the aggregate w_ag ← α w + (1 − α) w_ag after the step, the restart w := w_ag, the
/// output w_ag and the state entries `w` and `w_ag`.
#[derive(Debug, Clone)]
pub(crate) struct AcsaIterates {
    /// w (θ in Cheu et al.).
    pub w: Vec<f64>,
    /// w_ag, the output.
    pub w_ag: Vec<f64>,
    /// w_md, the point broadcast.
    pub md: Vec<f64>,
    /// The round's mean gradient g.
    pub g: Vec<f64>,
    projection: Projection,
}

impl AcsaIterates {
    /// w = w_ag = Π_W(`init`).
    pub(crate) fn new(init: Vec<f64>, projection: Projection) -> Self {
        let mut w = init;
        projection.apply(&mut w);
        let d = w.len();
        AcsaIterates {
            w_ag: w.clone(),
            w,
            md: vec![0.0; d],
            g: vec![0.0; d],
            projection,
        }
    }

    /// w_md as the round's broadcast.
    pub(crate) fn broadcast(&self, round: Round) -> Broadcast {
        Broadcast {
            round,
            point: self.md.clone(),
            aux: Vec::new(),
        }
    }

    /// g = the mean of the round's messages ([`average_messages`]); false for an empty round.
    pub(crate) fn mean_gradient(
        &mut self,
        round: Round,
        messages: &[SiloMessage],
    ) -> crate::Result<bool> {
        average_messages(messages, round, &mut self.g)
    }

    /// After the step to w: w ← Π_W(w), then w_ag ← α w + (1 − α) w_ag.
    pub(crate) fn project_and_aggregate(&mut self, alpha: f64) {
        self.projection.apply(&mut self.w);
        for (ag, w) in self.w_ag.iter_mut().zip(&self.w) {
            *ag = alpha * w + (1.0 - alpha) * *ag;
        }
    }

    /// A restart from the aggregate: w := w_ag.
    pub(crate) fn restart(&mut self) {
        self.w.copy_from_slice(&self.w_ag);
    }

    /// The output w_ag.
    pub(crate) fn output(&self) -> Vec<f64> {
        self.w_ag.clone()
    }

    /// The dimension d.
    pub(crate) fn dim(&self) -> usize {
        self.w.len()
    }

    /// Puts `w` and `w_ag` into `state`.
    pub(crate) fn put(&self, state: &mut HalfState) {
        state.put("w", &self.w);
        state.put("w_ag", &self.w_ag);
    }

    /// Reads `w` and `w_ag` (each of dimension d) back.
    pub(crate) fn restore(&mut self, state: &HalfState) -> crate::Result<()> {
        let d = self.w.len();
        self.w = state.vector("w", d)?;
        self.w_ag = state.vector("w_ag", d)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn average_last_k_by_hand() {
        // w_0 = (0, 0), w_1 = (1, 10), w_2 = (3, 30), current w_3 = (6, 60).
        let k = |k| OutputRule::AverageLast {
            k: std::num::NonZeroUsize::new(k).unwrap(),
        };
        let run = |rule| {
            let mut o = IterateOutput::new(rule, 2);
            for w in [[0.0, 0.0], [1.0, 10.0], [3.0, 30.0]] {
                o.record(&w);
            }
            o
        };
        // k = 2: (3 + 6)/2 = 4.5; k = 3: (1 + 3 + 6)/3 = 10/3; k = 8 (R < k): w_1..w_3 only.
        assert_eq!(run(k(2)).output(&[6.0, 60.0]), vec![4.5, 45.0]);
        let close = |a: Vec<f64>, b: [f64; 2]| {
            assert!(
                a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12),
                "{a:?} vs {b:?}"
            );
        };
        close(run(k(3)).output(&[6.0, 60.0]), [10.0 / 3.0, 100.0 / 3.0]);
        close(run(k(8)).output(&[6.0, 60.0]), [10.0 / 3.0, 100.0 / 3.0]);
        // k = 1 is the last iterate; no rounds yet: w_0.
        assert_eq!(run(k(1)).output(&[6.0, 60.0]), vec![6.0, 60.0]);
        assert_eq!(
            IterateOutput::new(k(3), 2).output(&[7.0, 8.0]),
            vec![7.0, 8.0]
        );
        // The ring wraps: w_1..w_5 = 1..5 and current 6, k = 3: (4 + 5 + 6)/3 = 5.
        let mut o = IterateOutput::new(k(3), 1);
        for w in 0..6 {
            o.record(&[w as f64]);
        }
        assert_eq!(o.output(&[6.0]), vec![5.0]);
        // Saved and restored mid-run, the output is unchanged.
        let mut back = IterateOutput::new(k(3), 1);
        let mut w = vec![0.0];
        back.restore_with(&mut w, &o.state_with(&[6.0])).unwrap();
        assert_eq!((back.output(&w), w), (vec![5.0], vec![6.0]));
        // k = 0 is refused when the config is read.
        let e = toml::from_str::<std::collections::HashMap<String, OutputRule>>(
            "o = { average-last = { k = 0 } }",
        );
        assert!(e.is_err());
    }

    #[test]
    fn exponential_weights_are_stable_and_match_the_definition() {
        // ρ = 0.1, q = 0.9: γ_r ∝ q^{−(r+1)}. After 3 iterates the newest has weight
        // q^{-3}/(q^{-1} + q^{-2} + q^{-3}) = 1/(q² + q + 1) = 1/2.71 = 0.369004.
        assert!((exponential_weight(0.1, 2.0) - 1.0 / 2.71).abs() < 1e-12);
        assert_eq!(exponential_weight(0.0, 3.0), 0.25);
        // Huge counts do not overflow: the weight tends to 1 − q = ρ.
        let w = exponential_weight(0.01, 1e7);
        assert!((w - 0.01).abs() < 1e-12, "{w}");
        // Tiny decays approach the uniform 1/(r+1).
        assert!((exponential_weight(1e-14, 9.0) - 0.1).abs() < 1e-9);
    }
}

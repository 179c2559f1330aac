//! Server helpers every wing shares: averaging a round's messages and the iterate a server
//! outputs (average, last, or the exponential weights of Lowy & Razaviyayn Thm 2.1).

#![warn(missing_docs)]

use serde::{Deserialize, Serialize};

use super::half::HalfState;
use super::message::{Round, SiloMessage};

/// Which iterate the server outputs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, Default)]
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
}

/// Running average of iterates (γ_r = 1/R) or the last iterate.
#[derive(Debug, Clone)]
pub struct IterateOutput {
    rule: OutputRule,
    sum: Vec<f64>,
    count: f64,
}

impl IterateOutput {
    /// An accumulator of d-dimensional iterates under `rule`.
    pub fn new(rule: OutputRule, d: usize) -> Self {
        IterateOutput {
            rule,
            sum: vec![0.0; d],
            count: 0.0,
        }
    }
    /// Records the iterate w_r that round r started from.
    pub fn record(&mut self, w: &[f64]) {
        match self.rule {
            // `sum` holds the running weighted average itself (no overflow for large r).
            OutputRule::Exponential { decay } => {
                let c = exponential_weight(decay, self.count);
                for (s, x) in self.sum.iter_mut().zip(w) {
                    *s += c * (x - *s);
                }
            }
            _ => crate::linalg::axpy(1.0, w, &mut self.sum),
        }
        self.count += 1.0;
    }
    /// The output given the current iterate.
    pub fn output(&self, current: &[f64]) -> Vec<f64> {
        match self.rule {
            OutputRule::Last => current.to_vec(),
            OutputRule::Average if self.count == 0.0 => current.to_vec(),
            OutputRule::Average => self.sum.iter().map(|s| s / self.count).collect(),
            OutputRule::Exponential { .. } if self.count == 0.0 => current.to_vec(),
            OutputRule::Exponential { .. } => self.sum.clone(),
        }
    }
    /// Writes the accumulator into a half's state.
    pub fn save(&self, state: &mut HalfState) {
        state.put("iterate_sum", &self.sum);
        state.put("iterate_count", &self.count);
    }
    /// Reads the accumulator back from a half's state.
    pub fn load(&mut self, state: &HalfState) -> crate::Result<()> {
        self.sum = state.vector("iterate_sum", self.sum.len())?;
        self.count = state.scalar("iterate_count")?;
        Ok(())
    }
    /// The state of a server half that is an iterate `w` plus this output rule (MB-SGD's and
    /// Local SGD's servers): one layout, written and read in one place.
    pub fn state_with(&self, w: &[f64]) -> HalfState {
        let mut s = HalfState::default();
        s.put("w", w);
        self.save(&mut s);
        s
    }
    /// Restores what [`IterateOutput::state_with`] wrote into `w` and this output rule.
    pub fn restore_with(&mut self, w: &mut Vec<f64>, state: &HalfState) -> crate::Result<()> {
        *w = state.vector("w", w.len())?;
        self.load(state)
    }
}

/// The running weighted average of iterates with weights γ_r = (1 − ρ)^{−(r+1)}, r = 0, 1, …,
/// kept as an average so that nothing overflows: after r+1 iterates the newest one has relative
/// weight γ_r/Γ_r = (1 − q)/(1 − q^{r+1}) with q = 1 − ρ, computed with `ln_1p`/`exp_m1`.
pub fn exponential_weight(decay: f64, count: f64) -> f64 {
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
pub fn average_messages(
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

#[cfg(test)]
mod tests {
    use super::*;

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

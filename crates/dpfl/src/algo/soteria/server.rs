//! SoteriaFL's server half (Algorithm 2 lines 7–10; Algorithm 1 lines 7–8 for direct
//! compression): v = s + (1/n)Σ v_i, x ← x − ηv, s ← s + γ(1/n)Σ v_i, which keeps
//! s = (1/n)Σ s_i exactly when every silo answers. The SVRG snapshot coin is drawn here and
//! broadcast, so all silos share it (digest ambiguity 8).
//!
//! Participation: the framework assumes all n silos answer every round (digest §0). A round
//! with fewer messages is refused (an error, the model and the shift unchanged), so the
//! server's shift can never drift from the silos' mean; building refuses a participation
//! rule with expected M < N.

use crate::algo::half::{HalfState, ServerHalf};
use crate::algo::message::{Broadcast, Round, SiloMessage};
use crate::algo::server::average_messages;

/// The server half of the wing (module doc): x ← x − η(s + mean v_i), s ← s + γ·mean v_i.
#[derive(Debug, Clone)]
pub(crate) struct SoteriaServer {
    x: Vec<f64>,
    step_size: f64,
    /// (γ, s) under shifted compression.
    shift: Option<(f64, Vec<f64>)>,
    /// SVRG's (p, coin seed).
    coin: Option<(f64, u64)>,
    silos: usize,
    v: Vec<f64>,
}

impl SoteriaServer {
    /// From x⁰, η, γ (`None`: direct compression), SVRG's coin (p, seed) and the silo count.
    pub(crate) fn new(
        init: Vec<f64>,
        step_size: f64,
        shift_step: Option<f64>,
        coin: Option<(f64, u64)>,
        silos: usize,
    ) -> Self {
        let d = init.len();
        SoteriaServer {
            x: init,
            step_size,
            shift: shift_step.map(|g| (g, vec![0.0; d])),
            coin,
            silos,
            v: vec![0.0; d],
        }
    }
}

impl ServerHalf for SoteriaServer {
    fn broadcast(&mut self, round: Round) -> Broadcast {
        let aux = match self.coin {
            // A coin that cannot be drawn (p outside (0, 1], checked at build) never refreshes.
            Some((p, seed)) => {
                let c = super::silo::draw_coin(seed, p, round).unwrap_or(false);
                vec![vec![if c { 1.0 } else { 0.0 }]]
            }
            None => Vec::new(),
        };
        Broadcast {
            round,
            point: self.x.clone(),
            aux,
        }
    }

    fn aggregate(&mut self, round: Round, messages: &[SiloMessage]) -> crate::Result<()> {
        if messages.len() != self.silos {
            return Err(crate::Error::Protocol(format!(
                "round {round}: SoteriaFL needs all {} silos every round (shifts would drift), got {} messages",
                self.silos,
                messages.len()
            )));
        }
        average_messages(messages, round, &mut self.v)?;
        match &mut self.shift {
            Some((gamma, s)) => {
                // x ← x − η(s + v̄), then s ← s + γ v̄ (the official code's order).
                crate::linalg::axpy(-self.step_size, s, &mut self.x);
                crate::linalg::axpy(-self.step_size, &self.v, &mut self.x);
                crate::linalg::axpy(*gamma, &self.v, s);
            }
            None => crate::linalg::axpy(-self.step_size, &self.v, &mut self.x),
        }
        Ok(())
    }

    fn output(&self) -> Vec<f64> {
        self.x.clone()
    }

    fn dim(&self) -> usize {
        self.x.len()
    }

    fn state(&self) -> HalfState {
        let mut st = HalfState::default();
        st.put("x", &self.x);
        if let Some((_, s)) = &self.shift {
            st.put("shift", s);
        }
        st
    }

    fn restore(&mut self, st: HalfState) -> crate::Result<()> {
        let d = self.x.len();
        self.x = st.vector("x", d)?;
        if let Some((_, s)) = &mut self.shift {
            *s = st.vector("shift", d)?;
        }
        Ok(())
    }
}

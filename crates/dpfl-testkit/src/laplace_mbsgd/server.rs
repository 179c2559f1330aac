//! The Laplace wing's server half: Lowy & Razaviyayn's Algorithm 2 lines 9–10 (the unweighted
//! average g̃_r of the M_r messages, w_{r+1} = Π_W(w_r − η g̃_r)), outputting the last
//! iterate w_R. It holds the model and reads only the messages.

use dpfl::algo::{Broadcast, HalfState, Payload, Round, ServerHalf, SiloMessage};
use dpfl::model::Projection;

/// The server half of `laplace-mb-sgd` (module doc).
#[derive(Debug)]
pub struct LaplaceServer {
    w: Vec<f64>,
    step_size: f64,
    projection: Projection,
}

impl LaplaceServer {
    /// From w_0, η and the set W.
    pub fn new(init: Vec<f64>, step_size: f64, projection: Projection) -> Self {
        LaplaceServer {
            w: init,
            step_size,
            projection,
        }
    }
}

impl ServerHalf for LaplaceServer {
    fn broadcast(&mut self, round: Round) -> Broadcast {
        Broadcast {
            round,
            point: self.w.clone(),
            aux: Vec::new(),
        }
    }

    fn aggregate(&mut self, round: Round, messages: &[SiloMessage]) -> dpfl::Result<()> {
        if messages.is_empty() {
            return Ok(());
        }
        let d = self.w.len();
        let mut mean = vec![0.0; d];
        for m in messages {
            if m.round != round {
                return Err(dpfl::Error::Protocol(format!(
                    "a message of round {} in round {round}",
                    m.round
                )));
            }
            let Payload::Dense(g) = &m.payload else {
                return Err(dpfl::Error::Protocol(
                    "laplace-mb-sgd takes dense gradients".into(),
                ));
            };
            if g.len() != d {
                return Err(dpfl::Error::Dimension(format!(
                    "a gradient of length {}, the model has {d}",
                    g.len()
                )));
            }
            mean.iter_mut().zip(g).for_each(|(s, x)| *s += x);
        }
        let m = messages.len() as f64;
        for (w, s) in self.w.iter_mut().zip(&mean) {
            *w -= self.step_size * s / m;
        }
        self.projection.apply(&mut self.w);
        if self.w.iter().any(|x| !x.is_finite()) {
            return Err(dpfl::Error::Diverged(format!(
                "round {round}: the iterate left the finite numbers"
            )));
        }
        Ok(())
    }

    fn output(&self) -> Vec<f64> {
        self.w.clone()
    }

    fn dim(&self) -> usize {
        self.w.len()
    }

    fn state(&self) -> HalfState {
        let mut s = HalfState::default();
        s.put("w", &self.w);
        s
    }

    fn restore(&mut self, state: HalfState) -> dpfl::Result<()> {
        self.w = state.vector("w", self.w.len())?;
        Ok(())
    }
}

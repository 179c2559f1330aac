//! The calibration search's memory of what it has evaluated (issue 30).
//!
//! The calibration bisection ([`super::bracket`] then [`super::shrink`]) asks "does z meet the
//! target?" at a fixed sequence of points, each answer one accountant evaluation (a PLD
//! evaluation costs tens to hundreds of milliseconds). ε is non-increasing in z (the premise
//! of the bisection itself), so once some z_b is known to meet the target, so does every
//! z ≥ z_b, and once some z_a is known to fail, so does every z ≤ z_a. [`Search`] answers
//! from those facts and evaluates only the points that fall between the largest failing and
//! the smallest meeting z evaluated so far.
//!
//! Before the bisection, [`Search::guess`] estimates the crossing by the secant method on
//! log ε against log z (ε is smooth in z), runs the bisection on paper with that estimate,
//! and evaluates the two points that decide it: its answer and the last point below it.
//! When they agree with the estimate, the real bisection visits the same points and takes
//! the same branches as without the guesses, so it returns the same z, bit for bit, after
//! three or four evaluations instead of twenty or more. Its answer is always evaluated
//! before it is returned ([`Search::verify`]); if that evaluation were ever to fail (ε not
//! monotone at this resolution), the caller repeats the plain bisection.
//!
//! With an estimate of the crossing instead of a first point ([`Search::guess_crossing`], fed
//! by coarser grids corrected for their discretisation), the deciding points are known before
//! any evaluation: they are asked for together, and a [`Search::batched`] caller evaluates them
//! on separate cores. `dpfl calibrate` at the demo's shape went from three fine-grid
//! evaluations one after another to two at once (BENCHMARKS.md, "Issue 30 item 1 …").

use crate::error::Result;

/// The one answer of a batch of one.
fn single(v: Vec<f64>) -> Result<f64> {
    match v[..] {
        [e] => Ok(e),
        _ => Err(crate::error::PrivacyError::Numerical {
            context: "noise calibration",
            reason: format!("{} answers for 1 point", v.len()),
        }),
    }
}

/// The relative error assumed of a crossing estimate ([`Search::guess_crossing`]): the
/// grid-corrected estimate of the demo's calibration was 3.6e-7 from the fine crossing.
const CROSSING_ERROR: f64 = 4e-7;

/// Evaluations [`Search::guess`] may spend before leaving the rest to the bisection.
const MAX_GUESSES: usize = 10;

/// ε at each z of a batch, in the order asked (a caller may evaluate them concurrently).
type EvalMany<'a> = dyn FnMut(&[f64]) -> Result<Vec<f64>> + 'a;

/// What a calibration search has evaluated, and how to evaluate more.
pub(super) struct Search<'a> {
    /// ε at each z asked (∞ when the accountant cannot certify z), in the order asked; an
    /// error ends the search.
    eval: Box<EvalMany<'a>>,
    target: f64,
    /// Every (z, ε) evaluated, in evaluation order.
    seen: Vec<(f64, f64)>,
}

impl<'a> Search<'a> {
    pub(super) fn new(eval: &'a mut dyn FnMut(f64) -> Result<f64>, target: f64) -> Self {
        Search {
            eval: Box::new(move |zs: &[f64]| zs.iter().map(|&z| eval(z)).collect()),
            target,
            seen: Vec::new(),
        }
    }

    /// A search whose points can be evaluated several at once ([`Self::guess_crossing`]
    /// asks for two or three).
    pub(super) fn batched(
        eval: &'a mut dyn FnMut(&[f64]) -> Result<Vec<f64>>,
        target: f64,
    ) -> Self {
        Search {
            eval: Box::new(eval),
            target,
            seen: Vec::new(),
        }
    }

    fn seen_at(&self, z: f64) -> Option<f64> {
        self.seen
            .iter()
            .find(|(x, _)| x.to_bits() == z.to_bits())
            .map(|p| p.1)
    }

    /// ε at z, evaluated once per distinct z.
    pub(super) fn epsilon(&mut self, z: f64) -> Result<f64> {
        if let Some(e) = self.seen_at(z) {
            return Ok(e);
        }
        let e = single((self.eval)(&[z])?)?;
        self.seen.push((z, e));
        Ok(e)
    }

    /// ε at every z of `zs` not evaluated yet, in one batch.
    fn epsilons(&mut self, zs: &[f64]) -> Result<()> {
        let mut new: Vec<f64> = Vec::new();
        for &z in zs {
            if self.seen_at(z).is_none() && !new.iter().any(|x| x.to_bits() == z.to_bits()) {
                new.push(z);
            }
        }
        if new.is_empty() {
            return Ok(());
        }
        let es = (self.eval)(&new)?;
        if es.len() != new.len() {
            return Err(crate::error::PrivacyError::Numerical {
                context: "noise calibration",
                reason: format!("{} answers for {} points", es.len(), new.len()),
            });
        }
        self.seen.extend(new.into_iter().zip(es));
        Ok(())
    }

    /// Starts [`Self::guess`] from an estimate `r` of the crossing (e.g. a coarser
    /// accountant's, corrected for its grid) instead of from a point: the points that decide
    /// the bisection if the crossing is within [`CROSSING_ERROR`] of `r` — its answer and its
    /// last failing point, or three when that range straddles a step — are evaluated at once,
    /// then [`Self::guess`] goes on from them. The
    /// answer is the same as from any other start (only evaluated points decide the
    /// bisection); a good estimate saves the evaluations that would have found them.
    pub(super) fn guess_crossing(
        &mut self,
        from: f64,
        r: f64,
        slope: Option<f64>,
        tolerance: f64,
    ) -> Result<()> {
        if !(r.is_finite() && r > 0.0) {
            return self.guess((from, from, slope), tolerance);
        }
        // The deciding points for the crossing anywhere within the estimate's error: two
        // when that error stays inside one step of the bisection, three (the step's two ends
        // and the point between the steps) when it straddles one.
        let mut points: Vec<f64> = Vec::new();
        for x in [r * (1.0 - CROSSING_ERROR), r * (1.0 + CROSSING_ERROR)] {
            let mut on_paper = |z: f64| -> Result<bool> { Ok(z >= x) };
            if let Some((lo, hi)) = super::bisection_pair(&mut on_paper, from, tolerance)? {
                points.extend(lo);
                points.push(hi);
            }
        }
        let Some(&hi) = points.iter().max_by(|a, b| a.total_cmp(b)) else {
            return self.guess((from, from, slope), tolerance);
        };
        self.epsilons(&points)?;
        self.guess((from, hi, slope), tolerance)
    }

    /// Whether z meets the target, by evaluating it.
    pub(super) fn meets(&mut self, z: f64) -> Result<bool> {
        Ok(self.epsilon(z)? <= self.target)
    }

    /// Whether z meets the target, from the points evaluated so far where monotonicity
    /// decides it, else by evaluating z.
    pub(super) fn decide(&mut self, z: f64) -> Result<bool> {
        match self.known(z) {
            Some(m) => Ok(m),
            None => self.meets(z),
        }
    }

    /// Whether `z` was evaluated and met the target: the check of the bisection's answer.
    pub(super) fn verify(&mut self, z: f64) -> Result<bool> {
        self.meets(z)
    }

    /// (largest failing z, smallest meeting z) evaluated so far.
    fn closest(&self) -> (Option<f64>, Option<f64>) {
        let mut fail: Option<f64> = None;
        let mut meet: Option<f64> = None;
        for &(z, e) in &self.seen {
            if e <= self.target {
                meet = Some(meet.map_or(z, |m| m.min(z)));
            } else {
                fail = Some(fail.map_or(z, |f| f.max(z)));
            }
        }
        (fail, meet)
    }

    /// Evaluates the points that decide the bisection (bracket from `start.0`, shrink to
    /// `tolerance`), starting with `start.1`, `start.2` the slope d log ε / d log z near the
    /// crossing if known (e.g. from a coarser accountant; −1 is assumed without it).
    ///
    /// After each evaluation the secant method estimates the crossing r, and the bisection is
    /// run on paper with "z meets iff z ≥ r" (points already evaluated answer for
    /// themselves). Its answer and its last failing point are the next points evaluated: once
    /// both are evaluated and agree (the answer meets, the failing point fails), every point
    /// the real bisection visits is decided by them (each lies at or below the failing point
    /// or at or above the answer), so it runs without another evaluation. Stops after
    /// [`MAX_GUESSES`] evaluations, leaving the rest to the bisection.
    pub(super) fn guess(&mut self, start: (f64, f64, Option<f64>), tolerance: f64) -> Result<()> {
        let slope = start.2;
        let mut z = start.1;
        for _ in 0..MAX_GUESSES {
            let e = self.epsilon(z)?;
            let (fail, meet) = self.closest();
            let mut r = self.secant(z, e, slope);
            // The crossing lies between the closest failing and meeting points.
            if let (Some(a), Some(b)) = (fail, meet)
                && !(r > a && r < b)
            {
                r = 0.5 * (a + b);
            }
            if !(r.is_finite() && r > 0.0) {
                return Ok(());
            }
            let mut on_paper = |x: f64| -> Result<bool> {
                Ok(match self.known(x) {
                    Some(m) => m,
                    None => x >= r,
                })
            };
            let Some((lo, hi)) = super::bisection_pair(&mut on_paper, start.0, tolerance)? else {
                return Ok(());
            };
            z = match (self.known(hi), lo.map(|l| self.known(l))) {
                (None, _) => hi,
                (Some(true), Some(None)) => lo.unwrap_or(hi),
                // Both decided (or no failing point): the bisection needs nothing more.
                _ => return Ok(()),
            };
        }
        Ok(())
    }

    /// Whether z meets the target, if monotonicity and the points evaluated decide it.
    fn known(&self, z: f64) -> Option<bool> {
        let (fail, meet) = self.closest();
        if meet.is_some_and(|b| b <= z) {
            Some(true)
        } else if fail.is_some_and(|a| a >= z) {
            Some(false)
        } else {
            None
        }
    }

    /// The next point of the secant method on g(u) = log ε(e^u) − log target, from the last
    /// point (z, ε) and the previous finite one (or `slope`, else −1, without one).
    fn secant(&self, z: f64, e: f64, slope: Option<f64>) -> f64 {
        if e.is_infinite() || e.is_nan() {
            return 2.0 * z;
        }
        if e <= 0.0 {
            return 0.5 * z;
        }
        let g = e.ln() - self.target.ln();
        let previous = self
            .seen
            .iter()
            .rev()
            .filter(|(x, y)| *x != z && y.is_finite() && *y > 0.0)
            .map(|&(x, y)| (x.ln(), y.ln() - self.target.ln()))
            .next();
        let u = z.ln();
        let mut s = match previous {
            Some((u0, g0)) if u0 != u => (g - g0) / (u - u0),
            _ => slope.unwrap_or(-1.0),
        };
        // ε decreases in z: a flat or rising secant (round-off) falls back to the model.
        if !(s.is_finite() && s < 0.0) {
            s = slope.filter(|s| s.is_finite() && *s < 0.0).unwrap_or(-1.0);
        }
        (u - g / s).exp()
    }

    /// d log ε / d log z between the two evaluated points closest to the crossing, if both
    /// are finite and positive.
    pub(super) fn slope(&self) -> Option<f64> {
        let (fail, meet) = self.closest();
        let at = |z: f64| self.seen.iter().find(|(x, _)| *x == z).map(|p| p.1);
        let (a, b) = (fail?, meet?);
        let (ea, eb) = (at(a)?, at(b)?);
        let s = (eb.ln() - ea.ln()) / (b.ln() - a.ln());
        (s.is_finite() && s < 0.0).then_some(s)
    }

    /// The evaluated point closest to the crossing that meets the target.
    pub(super) fn best(&self) -> Option<f64> {
        self.closest().1
    }
}

//! The fine calibration search's starting estimate (issue 30): where the PLD on the default
//! grid crosses the target, from cheap coarse grids corrected for their discretisation
//! (Richardson extrapolation). Only a hint: [`super::search::Search`] decides the answer from
//! fine-grid evaluations alone.

use super::CALIBRATION_PLD_DISCRETIZATION;
use super::search::Search;
use crate::event::{Neighbouring, PrivacyEvent};
use crate::params::{Delta, Epsilon};

/// An estimate of where the PLD on the default grid ([`DEFAULT_DISCRETIZATION`](crate::accountant::pld::DEFAULT_DISCRETIZATION)) crosses the
/// target, and d log ε / d log z there, searched from `start`; `None`s where it cannot tell.
///
/// Coarse grids are cheap (an evaluation on a grid 10x coarser costs a tenth), and their
/// error shrinks as the square of the grid width H: at the demo's shape ε_H − ε₀ was 1.25e-3,
/// 3.1e-4, 7.7e-5 for H = 4e-3, 2e-3, 1e-3, 5e-4. So:
/// 1. the crossing on the 4e-3 grid, to a relative 1e-3, with its slope;
/// 2. at that z, ε on the 1e-3 and 5e-4 grids (on two threads), carried to the default grid h
///    by Richardson extrapolation, ε_h ≈ ε_{H/2} − (ε_H − ε_{H/2})·((H/2)² − h²)/(H² −
///    (H/2)²) (within 1e-7–3e-7 of the fine value at the demo's shape), and along the slope to
///    an estimate of the fine crossing;
/// 3. the same at that estimate, with the slope between the two extrapolated points.
///
/// An estimate only: it picks which points the fine search evaluates first
/// ([`Search::guess_crossing`](super::search::Search::guess_crossing)), never its answer. Before it, the fine search spent its first
/// evaluation (a tenth of a second) finding the coarse grid's offset.
pub(super) fn coarse_pld_guess(
    make_event: &dyn Fn(f64) -> PrivacyEvent,
    neighbouring: Neighbouring,
    target: Epsilon,
    delta: Delta,
    start: f64,
) -> (Option<f64>, Option<f64>) {
    use crate::accountant::pld::{DEFAULT_DISCRETIZATION, PldAccountant};
    let h_coarse = CALIBRATION_PLD_DISCRETIZATION;
    let grid = |h: f64| PldAccountant::with_discretization(neighbouring, h);
    let (Ok(rough), Ok(coarse), Ok(half)) =
        (grid(4.0 * h_coarse), grid(h_coarse), grid(h_coarse / 2.0))
    else {
        return (None, None);
    };
    let mut eval = |z: f64| rough.epsilon(&make_event(z), delta);
    let mut s = Search::new(&mut eval, target.get());
    if s.guess((start, start, None), 1e-3).is_err() {
        return (None, None);
    }
    let (Some(z0), Some(slope0)) = (s.best(), s.slope()) else {
        return (None, None);
    };
    // ε on the default grid at z, extrapolated from the two coarse grids.
    let (hh, hh2, h2) = (
        h_coarse * h_coarse,
        h_coarse * h_coarse / 4.0,
        DEFAULT_DISCRETIZATION * DEFAULT_DISCRETIZATION,
    );
    let fine = |z: f64| -> Option<f64> {
        let event = make_event(z);
        let (a, b) = crate::accountant::par::join(
            true,
            || coarse.epsilon(&event, delta),
            || half.epsilon(&event, delta),
        );
        let (e_h, e_half) = (a.ok()?, b.ok()?);
        let e = e_half - (e_h - e_half) * (hh2 - h2) / (hh - hh2);
        (e.is_finite() && e > 0.0).then_some(e)
    };
    let along = |z: f64, e: f64, k: f64| {
        let r = z * (target.get() / e).powf(1.0 / k);
        (r.is_finite() && r > 0.0).then_some(r)
    };
    let Some(e0) = fine(z0) else {
        return (Some(z0), Some(slope0));
    };
    let Some(z1) = along(z0, e0, slope0) else {
        return (Some(z0), Some(slope0));
    };
    let Some(e1) = fine(z1) else {
        return (Some(z1), Some(slope0));
    };
    let k = (e1.ln() - e0.ln()) / (z1.ln() - z0.ln());
    let k = if k.is_finite() && k < 0.0 { k } else { slope0 };
    (along(z1, e1, k).or(Some(z1)), Some(k))
}

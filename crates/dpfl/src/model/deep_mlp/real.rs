//! The two arithmetics of [`super::DeepMlp`]'s products: the network code is written once,
//! generic over [`Real`], and instantiated for f32 (the default: BENCHMARKS.md, "DP-NormFedAvg:
//! f32 against f64, session 8") and f64. Parameters, gradients and data stay f64 at the
//! [`crate::model::Model`] boundary: f32 converts on the way in and out.

use std::cell::RefCell;
use std::ops::{Add, AddAssign, Mul, MulAssign, Sub};

use faer::traits::ComplexField;

/// A real scalar faer multiplies, with the few conversions the network needs.
pub(super) trait Real:
    ComplexField
    + Copy
    + Default
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + AddAssign
    + MulAssign
    + 'static
{
    /// The value `v` rounded to this type (exact for f64).
    fn of(v: f64) -> Self;
    /// This value as f64 (exact).
    fn wide(self) -> f64;
    /// max(self, 0), as `f64::max` (so the f64 path keeps its bits).
    fn relu(self) -> Self;
    /// The parameters as this type: f64 borrows `w`, f32 converts into `buf`.
    fn params<'a>(w: &'a [f64], buf: &'a mut Vec<Self>) -> &'a [Self];
    /// Runs `f` on a gradient accumulator and adds it to `out`: f64 accumulates into `out`
    /// itself (as before session 8), f32 into a zeroed `buf` then added once.
    fn accumulate(out: &mut [f64], buf: &mut Vec<Self>, f: impl FnOnce(&mut [Self]));
    /// Runs `f` on this thread's buffers of this type.
    fn with_work<R>(f: impl FnOnce(&mut Work<Self>) -> R) -> R;
}

/// Per-thread buffers of one batched pass (rayon runs silos on several threads): activations
/// per layer, the back-propagated δ and its successor, labels, the sorted batch, the
/// parameters and gradient in this type (f32 only), one row of logits in f64.
#[derive(Default)]
pub(super) struct Work<T> {
    pub acts: Vec<Vec<T>>,
    pub delta: Vec<T>,
    pub prev: Vec<T>,
    pub y: Vec<f64>,
    pub order: Vec<usize>,
    pub w: Vec<T>,
    pub grad: Vec<T>,
    pub row: Vec<f64>,
}

thread_local! {
    static WORK64: RefCell<Work<f64>> = RefCell::new(Work::default());
    static WORK32: RefCell<Work<f32>> = RefCell::new(Work::default());
}

impl Real for f64 {
    fn of(v: f64) -> Self {
        v
    }
    fn wide(self) -> f64 {
        self
    }
    fn relu(self) -> Self {
        self.max(0.0)
    }
    fn params<'a>(w: &'a [f64], _buf: &'a mut Vec<Self>) -> &'a [Self] {
        w
    }
    fn accumulate(out: &mut [f64], _buf: &mut Vec<Self>, f: impl FnOnce(&mut [Self])) {
        f(out)
    }
    fn with_work<R>(f: impl FnOnce(&mut Work<Self>) -> R) -> R {
        WORK64.with_borrow_mut(f)
    }
}

impl Real for f32 {
    fn of(v: f64) -> Self {
        v as f32
    }
    fn wide(self) -> f64 {
        f64::from(self)
    }
    fn relu(self) -> Self {
        self.max(0.0)
    }
    fn params<'a>(w: &'a [f64], buf: &'a mut Vec<Self>) -> &'a [Self] {
        buf.clear();
        buf.extend(w.iter().map(|&v| v as f32));
        buf
    }
    fn accumulate(out: &mut [f64], buf: &mut Vec<Self>, f: impl FnOnce(&mut [Self])) {
        buf.clear();
        buf.resize(out.len(), 0.0);
        f(buf);
        out.iter_mut()
            .zip(buf.iter())
            .for_each(|(o, &g)| *o += f64::from(g));
    }
    fn with_work<R>(f: impl FnOnce(&mut Work<Self>) -> R) -> R {
        WORK32.with_borrow_mut(f)
    }
}

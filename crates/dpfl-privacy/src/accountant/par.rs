//! Pointwise evaluations split over the machine's cores (issue 30: a sampled PLD evaluates
//! its privacy profile, several special functions, at every point of a grid of 10⁴–10⁵
//! points). Each value is computed by itself and stored at its own index, so the split
//! changes no bit of the result; only the wall time.

/// Below this many points the threads cost more than they save.
const MIN_PARALLEL: usize = 2048;

thread_local! {
    /// Set on the threads [`map_each`] starts: their work (whole PLD evaluations of about
    /// equal cost) already fills the cores, so the splits inside it run sequentially (no
    /// oversubscription; the same bits). [`join`]'s two halves may differ in cost (a coarse
    /// and a finer grid), so the longer one keeps its splits.
    static SPLIT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The threads a split may use here: the machine's cores, or 1 inside a split.
fn threads() -> usize {
    if SPLIT.with(|s| s.get()) {
        return 1;
    }
    std::thread::available_parallelism().map_or(1, |t| t.get())
}

/// Runs `f` with the splits inside it sequential (see [`SPLIT`]).
fn inside<R>(f: impl FnOnce() -> R) -> R {
    let before = SPLIT.with(|s| s.replace(true));
    let r = f();
    SPLIT.with(|s| s.set(before));
    r
}

/// `[f(0), f(1), …, f(n − 1)]`, computed in contiguous chunks on up to
/// `available_parallelism()` scoped threads.
pub(crate) fn map_indices(n: usize, f: &(dyn Fn(usize) -> f64 + Sync)) -> Vec<f64> {
    let threads = threads();
    if threads < 2 || n < MIN_PARALLEL {
        return (0..n).map(f).collect();
    }
    let mut out = vec![0.0; n];
    let chunk = n.div_ceil(threads);
    std::thread::scope(|s| {
        for (j, part) in out.chunks_mut(chunk).enumerate() {
            s.spawn(move || {
                for (k, x) in part.iter_mut().enumerate() {
                    *x = f(j * chunk + k);
                }
            });
        }
    });
    out
}

/// Applies `f` to every element of `data` in place, in contiguous chunks on up to
/// `available_parallelism()` scoped threads; each element is updated by itself, so the split
/// changes no bit of the result.
pub(crate) fn update_each<T: Send>(data: &mut [T], f: &(dyn Fn(&mut T) + Sync)) {
    let threads = threads();
    if threads < 2 || data.len() < MIN_PARALLEL {
        data.iter_mut().for_each(f);
        return;
    }
    let chunk = data.len().div_ceil(threads);
    std::thread::scope(|s| {
        for part in data.chunks_mut(chunk) {
            s.spawn(move || part.iter_mut().for_each(f));
        }
    });
}

/// `(a(), b())`, `b` on a scoped thread of its own when the machine has a second core and
/// `big` says the work is worth a thread.
pub(crate) fn join<A: Send, B: Send>(
    big: bool,
    a: impl FnOnce() -> A + Send,
    b: impl FnOnce() -> B + Send,
) -> (A, B) {
    if threads() < 2 || !big {
        return (a(), b());
    }
    std::thread::scope(|s| {
        let hb = s.spawn(b);
        let ra = a();
        // A panic in `b` is a bug in the caller's closure: re-raise it here.
        let rb = match hb.join() {
            Ok(v) => v,
            Err(p) => std::panic::resume_unwind(p),
        };
        (ra, rb)
    })
}

/// `[f(&items[0]), …]`, each item on a scoped thread of its own (the first on the caller's),
/// for a few expensive items (e.g. the PLD evaluations a calibration asks for at once).
pub(crate) fn map_each<T: Sync, R: Send>(items: &[T], f: &(dyn Fn(&T) -> R + Sync)) -> Vec<R> {
    if threads() < 2 || items.len() < 2 {
        return items.iter().map(f).collect();
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = items[1..]
            .iter()
            .map(|x| s.spawn(move || inside(|| f(x))))
            .collect();
        let mut out = vec![inside(|| f(&items[0]))];
        for h in handles {
            // A panic in `f` is a bug in the caller's closure: re-raise it here.
            out.push(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        out
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_split_is_the_sequential_map_bit_for_bit() {
        let f = |i: usize| ((i as f64) * 1e-3).exp().ln_1p().sin();
        for n in [0, 1, 100, 2048, 5001] {
            let got = super::map_indices(n, &f);
            let want: Vec<f64> = (0..n).map(f).collect();
            assert_eq!(got.len(), n);
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
            );
        }
    }

    #[test]
    fn the_split_update_is_the_sequential_update_bit_for_bit() {
        for n in [0, 1, 100, 2048, 5001] {
            let mut got: Vec<f64> = (0..n).map(|i| i as f64 * 1e-3).collect();
            let mut want = got.clone();
            let f = |x: &mut f64| *x = x.exp().ln_1p().sin();
            super::update_each(&mut got, &f);
            want.iter_mut().for_each(f);
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits())
            );
        }
        assert_eq!(super::join(true, || 1 + 1, || "b"), (2, "b"));
        assert_eq!(super::join(false, || 3, || 4), (3, 4));
        let sq = |x: &u64| x * x;
        assert_eq!(super::map_each(&[1u64, 2, 3], &sq), vec![1, 4, 9]);
        assert_eq!(super::map_each(&[5u64], &sq), vec![25]);
    }
}

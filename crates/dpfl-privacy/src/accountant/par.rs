//! Pointwise evaluations split over the machine's cores (issue 30: a sampled PLD evaluates
//! its privacy profile, several special functions, at every point of a grid of 10⁴–10⁵
//! points). Each value is computed by itself and stored at its own index, so the split
//! changes no bit of the result; only the wall time.

/// Below this many points the threads cost more than they save.
const MIN_PARALLEL: usize = 2048;

/// `[f(0), f(1), …, f(n − 1)]`, computed in contiguous chunks on up to
/// `available_parallelism()` scoped threads.
pub(crate) fn map_indices(n: usize, f: &(dyn Fn(usize) -> f64 + Sync)) -> Vec<f64> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get());
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
}

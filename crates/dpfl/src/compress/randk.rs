//! Unbiased random-k sparsification (SoteriaFL Example 1): C(x) = (d/k)·(ξ ⊙ x) with ξ
//! uniform over the 0/1 vectors with exactly k ones, so E[C(x)] = x and
//! E‖C(x) − x‖² = (d/k − 1)‖x‖²: ω = d/k − 1, exactly.

use serde::{Deserialize, Serialize};

use super::{Compressed, Compressor, check_input};
use crate::algo::message::Payload;
use dpfl_privacy::DpRng;

/// How the k kept coordinates are named in the message.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum IndexEncoding {
    /// The k indices themselves, 32 bits each (`Payload::Sparse`).
    #[default]
    Explicit,
    /// A 64-bit seed from which the receiver regenerates them (`Compressed::SeededSparse`).
    Seed,
}

/// Unbiased random-k (SoteriaFL Def. 1 example): k coordinates uniform without replacement, scaled
/// by d/k; ω = d/k − 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RandomK {
    dim: usize,
    k: usize,
    encoding: IndexEncoding,
}

use crate::algo::checked::{at_least_one, at_most};

impl RandomK {
    /// Needs 1 ≤ k ≤ d and d < 2^32 (indices travel as u32).
    pub fn new(dim: usize, k: usize, encoding: IndexEncoding) -> crate::Result<Self> {
        // k ≤ d, the model dimension.
        at_least_one("compressor.k", k)?;
        at_most("compressor.k", k, "d", dim)?;
        if u32::try_from(dim).is_err() {
            return Err(crate::Error::config(
                "compressor.k",
                format!("random-k needs a dimension below 2^32, got {dim}"),
            ));
        }
        Ok(RandomK { dim, k, encoding })
    }
    /// k, the coordinates kept.
    pub fn k(&self) -> usize {
        self.k
    }
    /// How the kept indices travel.
    pub fn encoding(&self) -> IndexEncoding {
        self.encoding
    }
}

pub use crate::algo::message::compressed::indices_from_seed;

impl Compressor for RandomK {
    fn name(&self) -> &'static str {
        "random-k"
    }
    fn dim(&self) -> usize {
        self.dim
    }
    fn omega(&self) -> f64 {
        self.dim as f64 / self.k as f64 - 1.0
    }
    fn message_bits(&self) -> u64 {
        let k = self.k as u64;
        match self.encoding {
            // dimension + index + value (Payload::Sparse's count).
            IndexEncoding::Explicit => 32 + 32 * k + 64 * k,
            IndexEncoding::Seed => 64 + 64 * k,
        }
    }
    fn compress(&self, x: &[f64], rng: &mut DpRng) -> crate::Result<Payload> {
        check_input(x, self.dim)?;
        // Both encodings draw the indices the same way, so one draw has one meaning whichever
        // way it travels.
        let seed = rng.next_seed();
        let indices = indices_from_seed(seed, self.dim, self.k)?;
        let scale = self.dim as f64 / self.k as f64;
        let values = indices.iter().map(|&i| scale * x[i as usize]).collect();
        Ok(match self.encoding {
            IndexEncoding::Explicit => Payload::Sparse {
                dim: self.dim as u32,
                indices,
                values,
            },
            IndexEncoding::Seed => Payload::Compressed(Compressed::SeededSparse {
                dim: self.dim as u32,
                seed,
                values,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_util::{monte_carlo, vector};
    use super::*;
    use dpfl_privacy::rng::Purpose;

    #[test]
    fn random_k_is_unbiased_with_omega_d_over_k_minus_one() {
        let x = vector(40);
        for enc in [IndexEncoding::Explicit, IndexEncoding::Seed] {
            let c = RandomK::new(40, 8, enc).unwrap();
            assert_eq!(c.omega(), 4.0);
            let (bias, var) = monte_carlo(&c, &x, 40_000, 11);
            // Per coordinate the mean's sd is |x_j|·sqrt((d/k − 1)/n) ≤ 2.6·0.01 = 0.026,
            // i.e. ≤ 0.0023·‖x‖; 0.012·‖x‖ is five such sds.
            assert!(bias < 0.012, "bias {bias}");
            // E‖C(x) − x‖²/‖x‖² = ω exactly; MC error of the ratio is ≈ 1%.
            assert!((var - 4.0).abs() < 0.1, "ratio {var} vs ω = 4");
        }
    }

    #[test]
    fn both_encodings_carry_the_same_draw_with_exact_bit_counts() {
        let x: Vec<f64> = (0..100).map(|j| j as f64 - 50.0).collect();
        let ex = RandomK::new(100, 5, IndexEncoding::Explicit).unwrap();
        let sd = RandomK::new(100, 5, IndexEncoding::Seed).unwrap();
        let mut r1 = DpRng::from_seed(3, Purpose::Silo, 1);
        let mut r2 = DpRng::from_seed(3, Purpose::Silo, 1);
        let (a, b) = (
            ex.compress(&x, &mut r1).unwrap(),
            sd.compress(&x, &mut r2).unwrap(),
        );
        // 32 (dimension) + 5·32 (indices) + 5·64 (values); 64 (seed) + 5·64.
        assert_eq!((a.bits(), b.bits()), (512, 384));
        assert_eq!((ex.message_bits(), sd.message_bits()), (512, 384));
        let (mut va, mut vb) = (vec![0.0; 100], vec![0.0; 100]);
        a.add_to(1.0, &mut va).unwrap();
        b.add_to(1.0, &mut vb).unwrap();
        assert_eq!(va, vb);
        let Payload::Sparse {
            indices, values, ..
        } = &a
        else {
            panic!("explicit random-k travels as Payload::Sparse")
        };
        assert_eq!(indices.len(), 5);
        assert!(indices.windows(2).all(|w| w[0] < w[1]));
        for (&i, &v) in indices.iter().zip(values) {
            assert_eq!(v, 20.0 * x[i as usize], "scaled by d/k = 20");
        }
        // Successive draws from one stream differ (a fresh draw per round).
        let a2 = ex.compress(&x, &mut r1).unwrap();
        assert_ne!(a, a2);
    }

    #[test]
    fn each_coordinate_is_kept_with_probability_k_over_d() {
        // Chi-square-free check: over 20_000 draws of 3 of 12, each index appears
        // 5_000 ± 5·sd (sd = sqrt(20_000·0.25·0.75) ≈ 61).
        let mut counts = [0usize; 12];
        let mut rng = DpRng::from_seed(5, Purpose::Silo, 0);
        for _ in 0..20_000 {
            for i in indices_from_seed(rng.next_seed(), 12, 3).unwrap() {
                counts[i as usize] += 1;
            }
        }
        for c in counts {
            assert!((c as f64 - 5_000.0).abs() < 310.0, "{counts:?}");
        }
    }
}

//! The quantized message of DP-NormFedAvg (Algorithm 1; digest §2.5, §2.7): the silo sends
//! z_i = q_i + e_i ∈ {−(s+h)..s+h} per coordinate — q = s·Q_s(u), e integer noise on
//! {−h..h} (TDL: h = m; Binomial: Bin(N, ½) − N/2, h = N/2) — as offset binary z + s + h in
//! t = ⌈log₂(2(s+h)+1)⌉ bits ([`PackedInts`]), never widened to f64 on the way. The server
//! sums the integers of the round's valid messages (i64, exact) and scales once:
//! Σ_i g^{(i)} = (Σ_i z^{(i)})/s.
//!
//! The [`Encoder`] is the silo's mechanism ([`Mechanism`]): its event is derived from the
//! noise it draws and the silo's [`MessageAccounting`] (the per-round (ε, δ) it was calibrated
//! for and its grid sensitivities): QTDL's (ε, correct δ) by Das et al. Theorem 1 with dpfl's
//! corrected δ (`dpfl_privacy::qtdl::accounting::release_event`), the Binomial's (ε, δ) by
//! cpSGD Theorem 1 plus the sampler's total-variation distance (checked to hold at the N
//! drawn when the encoder is built).
//!
//! Decisions: the wire format (offset binary, least-significant bit first) is ours — the paper
//! has none. All silos of one run share h (the largest of their calibrations: a wider support
//! at the same α only lowers the TDL's δ), so the server decodes without knowing who sent a
//! message. The Binomial's packed width uses the centred noise's h = N/2 (the paper's t counts
//! m = N, one bit more; the calibration report gives both).

use serde::{Deserialize, Serialize};

use dpfl_privacy::binomial::Binomial;
use dpfl_privacy::qtdl::accounting::release_event;
use dpfl_privacy::qtdl::theorem1::Theorem1;
use dpfl_privacy::qtdl::{LogProb, StochasticQuantizer, TruncatedDiscreteLaplace, binomial_mech};
use dpfl_privacy::{DpRng, Mechanism, PrivacyEvent};

use super::config::TdlCalibration;
use super::sensitivity::Sensitivities;
use crate::algo::message::{PackedInts, Payload};

/// The integer noise added to the quantized vector.
#[derive(Debug, Clone)]
pub enum IntNoise {
    /// TDL(m, α).
    Tdl(TruncatedDiscreteLaplace),
    /// Bin(N, ½) − N/2, N even.
    Binomial(Binomial),
}

impl IntNoise {
    /// h: the noise lies in {−h..h}.
    pub fn half_width(&self) -> u64 {
        match self {
            IntNoise::Tdl(t) => t.m(),
            IntNoise::Binomial(b) => b.n() / 2,
        }
    }
    /// Fills `out` with independent draws (TDL: one bit reader for the whole vector).
    fn fill(&self, rng: &mut DpRng, out: &mut [i64]) {
        match self {
            IntNoise::Tdl(t) => t.fill(rng, out),
            IntNoise::Binomial(b) => {
                for o in out {
                    *o = b.sample(rng) as i64 - (b.n() / 2) as i64;
                }
            }
        }
    }
    /// Per-coordinate variance in real units at resolution s.
    pub fn variance(&self, s: u64) -> f64 {
        let v = match self {
            IntNoise::Tdl(t) => t.variance(),
            IntNoise::Binomial(b) => b.n() as f64 / 4.0,
        };
        v / (s as f64 * s as f64)
    }
}

/// What a silo's message is accounted from besides its noise: the per-round (ε, δ) its noise
/// was calibrated for, its sensitivities in grid units, and the TDL calibration mode.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageAccounting {
    /// ε per round: Theorem 1's pure part (TDL) or cpSGD's ε (Binomial).
    pub epsilon: f64,
    /// δ per round (the Binomial's; the TDL's δ is computed from the noise and d).
    pub delta: f64,
    /// Δ₁, Δ₂, Δ∞ and the probability that they fail (Theorem 3, added to δ).
    pub sensitivities: Sensitivities,
    /// The TDL's m rule (paper claim: the correct δ may be 1, reported as such).
    pub calibration: TdlCalibration,
}

impl MessageAccounting {
    /// The event of one message of `d` coordinates noised by `noise`.
    pub fn event(&self, noise: &IntNoise, d: usize) -> crate::Result<PrivacyEvent> {
        let sens = &self.sensitivities;
        match noise {
            IntNoise::Tdl(tdl) => {
                // The likelihood-ratio bound of the noise drawn is e^{α⌊Δ₁⌋}: when the run's
                // shared α is above this silo's own (its Δ₁ is larger), that is its ε.
                let epsilon = self.epsilon.max(tdl.alpha() * sens.l1.floor());
                let th = Theorem1 {
                    epsilon,
                    delta_1: sens.l1,
                    delta_inf: sens.linf,
                    tdl: *tdl,
                };
                tdl_event(&th, d as u64, sens.failure, self.calibration)
            }
            IntNoise::Binomial(b) => {
                let tv = b.tv_bound();
                Ok(PrivacyEvent::EpsilonDelta {
                    epsilon: self.epsilon,
                    delta: (self.delta + (1.0 + self.epsilon.exp()) * tv).min(1.0),
                })
            }
        }
    }

    /// Checks that `noise` on `d` coordinates has the event [`Self::event`] reports: the
    /// TDL's is computed from the noise itself; the Binomial's N must meet cpSGD Theorem 1's
    /// condition and ε(N) ≤ ε at the silo's sensitivities.
    fn check(&self, noise: &IntNoise, d: usize) -> crate::Result<()> {
        if let IntNoise::Binomial(b) = noise {
            let sens = binomial_mech::Sensitivities {
                l1: self.sensitivities.l1,
                l2: self.sensitivities.l2,
                linf: self.sensitivities.linf,
            };
            let e = binomial_mech::cpsgd_epsilon(b.n(), self.delta, sens, d as u64);
            if !e.is_some_and(|e| e <= self.epsilon) {
                return Err(crate::Error::config(
                    "algorithm.privacy",
                    format!(
                        "Bin({}, 1/2) does not give epsilon = {} at delta = {} (cpSGD Theorem 1: {e:?})",
                        b.n(),
                        self.epsilon,
                        self.delta
                    ),
                ));
            }
        }
        self.event(noise, d).map(|_| ())
    }
}

/// The round event of a TDL message: the correct δ (plus Theorem 3's failure probability); in
/// paper-claim mode that δ may be 1, reported as such (no guarantee).
fn tdl_event(
    th: &Theorem1,
    d: u64,
    failure: f64,
    mode: TdlCalibration,
) -> crate::Result<PrivacyEvent> {
    let base = match mode {
        TdlCalibration::Corrected => release_event(th, d)?,
        TdlCalibration::PaperClaim => PrivacyEvent::TruncatedDiscreteLaplace {
            epsilon: th.epsilon.max(th.alpha() * th.delta_1.floor()),
            delta: th.delta(d)?.upper_f64(),
        },
    };
    Ok(match base {
        PrivacyEvent::TruncatedDiscreteLaplace { epsilon, delta } if failure > 0.0 => {
            PrivacyEvent::TruncatedDiscreteLaplace {
                epsilon,
                delta: LogProb::from_prob(delta)
                    .plus(LogProb::from_prob(failure))
                    .upper_f64()
                    .min(1.0),
            }
        }
        e => e,
    })
}

/// The packed layout shared by the silo's encoder and the server's decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The quantizer's resolution.
    pub s: u64,
    /// s + h: z + offset ∈ [0, 2·offset].
    pub offset: u64,
    /// t, bits per coordinate.
    pub bits: u8,
    /// d, coordinates per message.
    pub dim: usize,
}

impl Layout {
    /// The layout of resolution s, noise half-width h and dimension d; errs if s + h
    /// overflows.
    pub fn new(s: u64, half_width: u64, dim: usize) -> crate::Result<Self> {
        let offset = s
            .checked_add(half_width)
            .filter(|o| *o <= u64::MAX / 4)
            .ok_or_else(|| crate::Error::config("algorithm.privacy", "s + m overflows"))?;
        let bits = dpfl_privacy::qtdl::theorem1::bits_per_coordinate(s, half_width)?;
        Ok(Layout {
            s,
            offset,
            bits: bits as u8,
            dim,
        })
    }
    /// Exact message size, t·d bits.
    pub fn message_bits(&self) -> u64 {
        u64::from(self.bits) * self.dim as u64
    }

    /// Adds the decoded integers z of `payload` into `sum`, or says why the message is
    /// malformed (leaving `sum` untouched): not packed, another width or length, or a value
    /// outside {−(s+h)..s+h}.
    pub fn add_decoded(&self, payload: &Payload, sum: &mut [i64]) -> Result<(), String> {
        let Payload::Packed(p) = payload else {
            return Err("not a packed-integer message".into());
        };
        if p.bits() != self.bits || p.len() != self.dim || sum.len() != self.dim {
            return Err(format!(
                "{} values of {} bits where {} of {} bits ({} bits) are expected",
                p.len(),
                p.bits(),
                self.dim,
                self.bits,
                self.message_bits()
            ));
        }
        let top = 2 * self.offset;
        // Two decoding passes (check, then add) so a malformed message leaves `sum` untouched
        // without materialising d values.
        if let Some((i, v)) = p.iter().enumerate().find(|&(_, v)| v > top) {
            return Err(format!(
                "coordinate {i} decodes to {}, outside -(s+m)..s+m = ±{}",
                v as i128 - self.offset as i128,
                self.offset
            ));
        }
        let off = self.offset as i64;
        for (acc, v) in sum.iter_mut().zip(p.iter()) {
            *acc += v as i64 - off;
        }
        Ok(())
    }
}

/// The silo's mechanism: quantize, add integer noise, pack (module docs).
#[derive(Debug, Clone)]
pub struct Encoder {
    /// The message layout.
    pub layout: Layout,
    quantizer: StochasticQuantizer,
    noise: IntNoise,
    accounting: MessageAccounting,
    q: Vec<i64>,
    e: Vec<i64>,
}

impl Encoder {
    /// An encoder at resolution `s` with `noise`, for d-dimensional updates, accounted by
    /// `accounting`; an error if the noise does not have the event it would report.
    pub fn new(
        s: u64,
        noise: IntNoise,
        dim: usize,
        accounting: MessageAccounting,
    ) -> crate::Result<Self> {
        let layout = Layout::new(s, noise.half_width(), dim)?;
        accounting.check(&noise, dim)?;
        Ok(Encoder {
            layout,
            quantizer: StochasticQuantizer::power_of_two(s)?,
            noise,
            accounting,
            q: Vec::with_capacity(dim),
            e: vec![0; dim],
        })
    }
    /// The integer noise.
    pub fn noise(&self) -> &IntNoise {
        &self.noise
    }

    /// The t-bit message of u (coordinates in [−1, 1]).
    pub fn encode(&mut self, u: &[f64], rng: &mut DpRng) -> crate::Result<Payload> {
        if u.len() != self.layout.dim {
            return Err(crate::Error::Protocol(format!(
                "vector of dimension {} for a {}-dimensional message",
                u.len(),
                self.layout.dim
            )));
        }
        self.quantizer.quantize(u, rng, &mut self.q)?;
        self.noise.fill(rng, &mut self.e);
        let off = self.layout.offset as i64;
        // |q| ≤ s and |e| ≤ h, so z + s + h ∈ [0, 2(s+h)].
        let z = self
            .q
            .iter()
            .zip(&self.e)
            .map(|(&q, &e)| (q + e + off) as u64);
        Ok(Payload::Packed(PackedInts::pack_iter(self.layout.bits, z)?))
    }
}

impl Mechanism for Encoder {
    /// The direction u (coordinates in [−1, 1]).
    type Input<'a> = [f64];
    /// The t-bit packed message.
    type Output = Payload;
    type Error = crate::Error;
    fn release(&mut self, u: &mut [f64], rng: &mut DpRng) -> crate::Result<Payload> {
        self.encode(u, rng)
    }
    fn privacy_event(&self) -> PrivacyEvent {
        // Checked when the encoder was built; never under-reported should it fail now.
        self.accounting
            .event(&self.noise, self.layout.dim)
            .unwrap_or(PrivacyEvent::EpsilonDelta {
                epsilon: f64::INFINITY,
                delta: 1.0,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use dpfl_privacy::rng::Purpose;

    /// Unit sensitivities at ε = 1: the TDL event is computed in the paper's mode (its δ
    /// may be 1), the Binomial's checked by cpSGD Theorem 1.
    fn unit(calibration: TdlCalibration) -> MessageAccounting {
        MessageAccounting {
            epsilon: 1.0,
            delta: 0.5,
            sensitivities: Sensitivities {
                l1: 2.0,
                l2: 2.0,
                linf: 2.0,
                failure: 0.0,
            },
            calibration,
        }
    }

    #[test]
    fn messages_are_t_bit_integers_summed_exactly_then_scaled_once() {
        // s = 4, TDL m = 3: offset 7, t = ⌈log₂(15)⌉ = 4 bits, d = 5 → exactly 20 bits.
        let tdl = TruncatedDiscreteLaplace::new(3, 0.5).unwrap();
        let mut enc =
            Encoder::new(4, IntNoise::Tdl(tdl), 5, unit(TdlCalibration::PaperClaim)).unwrap();
        assert_eq!((enc.layout.offset, enc.layout.bits), (7, 4));
        assert_eq!(enc.layout.message_bits(), 20);
        let mut rng = DpRng::from_seed(3, Purpose::Silo, 0);
        let u = [1.0, -1.0, 0.5, 0.0, -0.25];
        let p = enc.encode(&u, &mut rng).unwrap();
        assert_eq!(p.bits(), 20);
        let Payload::Packed(ref packed) = p else {
            panic!("not packed")
        };
        assert_eq!(packed.as_bytes().len(), 3);
        // Grid points quantize deterministically: z − q is the noise, within ±3.
        let q = [4i64, -4, 2, 0, -1];
        let mut sum = vec![0i64; 5];
        enc.layout.add_decoded(&p, &mut sum).unwrap();
        for (z, q) in sum.iter().zip(q) {
            assert!((z - q).abs() <= 3, "{z} vs {q}");
        }
        // Hand-built messages: z = (3, −7, 0, 7, 1) and (−2, 0, 5, −7, 1) sum to
        // (1, −7, 5, 0, 2); the real-valued sum is that /s = (0.25, −1.75, 1.25, 0, 0.5).
        let pack =
            |z: [i64; 5]| Payload::Packed(PackedInts::pack(4, &z.map(|v| (v + 7) as u64)).unwrap());
        let mut sum = vec![0i64; 5];
        enc.layout
            .add_decoded(&pack([3, -7, 0, 7, 1]), &mut sum)
            .unwrap();
        enc.layout
            .add_decoded(&pack([-2, 0, 5, -7, 1]), &mut sum)
            .unwrap();
        assert_eq!(sum, vec![1, -7, 5, 0, 2]);
        let real: Vec<f64> = sum.iter().map(|&z| z as f64 / 4.0).collect();
        assert_eq!(real, vec![0.25, -1.75, 1.25, 0.0, 0.5]);
        // Malformed: a value 15 − 7 = 8 > 7, another width, another length, a dense vector.
        let before = sum.clone();
        let bad = Payload::Packed(PackedInts::pack(4, &[15, 7, 7, 7, 7]).unwrap());
        let e = enc.layout.add_decoded(&bad, &mut sum).unwrap_err();
        assert!(e.contains("coordinate 0 decodes to 8"), "{e}");
        let wide = Payload::Packed(PackedInts::pack(5, &[7; 5]).unwrap());
        assert!(enc.layout.add_decoded(&wide, &mut sum).is_err());
        let short = Payload::Packed(PackedInts::pack(4, &[7; 4]).unwrap());
        assert!(enc.layout.add_decoded(&short, &mut sum).is_err());
        assert!(
            enc.layout
                .add_decoded(&Payload::Dense(vec![0.0; 5]), &mut sum)
                .is_err()
        );
        assert_eq!(sum, before, "a refused message must not touch the sum");
    }

    #[test]
    fn paper_bit_counts() {
        // FMNIST s = 2^12 with Theorem 1's m = 413: t = 14; s = 2^6, m = 9: t = 8 (Table 4).
        assert_eq!(Layout::new(4096, 413, 10).unwrap().bits, 14);
        assert_eq!(Layout::new(64, 9, 10).unwrap().bits, 8);
        // The corrected m = 1,993,383 at s = 2^12: t = 22; d = 328,810 → 7,233,820 bits.
        let l = Layout::new(4096, 1_993_383, 328_810).unwrap();
        assert_eq!(l.bits, 22);
        assert_eq!(l.message_bits(), 7_233_820);
    }

    #[test]
    fn binomial_noise_is_centred_and_bounded() {
        // Bin(1000, ½) − 500 at d = 2000, δ = ½: Npq = 250 ≥ 23 ln(10d/δ) = 243.7 (cpSGD
        // Theorem 1's condition), so the encoder is built; ε = 100 is met.
        let b = Binomial::new(1000, 0.5).unwrap();
        let accounting = MessageAccounting {
            epsilon: 100.0,
            ..unit(TdlCalibration::Corrected)
        };
        let mut enc = Encoder::new(2, IntNoise::Binomial(b.clone()), 2000, accounting).unwrap();
        // h = 500, offset 502, t = ⌈log₂ 1005⌉ = 10.
        assert_eq!((enc.layout.offset, enc.layout.bits), (502, 10));
        let mut rng = DpRng::from_seed(9, Purpose::Silo, 1);
        let p = enc.release(&mut vec![0.0; 2000], &mut rng).unwrap();
        let mut sum = vec![0i64; 2000];
        enc.layout.add_decoded(&p, &mut sum).unwrap();
        let mean = sum.iter().sum::<i64>() as f64 / 2000.0;
        let var = sum.iter().map(|&z| (z as f64 - mean).powi(2)).sum::<f64>() / 1999.0;
        // Bin(1000, ½) − 500: mean 0, variance 250; 2000 draws: sd of the mean ≈ 0.35, of
        // the variance ≈ 250·√(2/1999) ≈ 7.9.
        assert!(mean.abs() < 1.8, "{mean}");
        assert!((var - 250.0).abs() < 40.0, "{var}");
        assert!(sum.iter().all(|z| z.abs() <= 500));
        // The event: cpSGD's (ε, δ) plus (1 + e^ε)·TV of the sampler, from the noise drawn.
        assert_eq!(
            enc.privacy_event(),
            PrivacyEvent::EpsilonDelta {
                epsilon: 100.0,
                delta: (0.5 + (1.0 + 100f64.exp()) * b.tv_bound()).min(1.0),
            }
        );
        // Too few trials for the ε claimed: refused (the event would not hold).
        let tight = MessageAccounting {
            epsilon: 0.01,
            ..accounting
        };
        let e = Encoder::new(2, IntNoise::Binomial(b), 2000, tight).unwrap_err();
        assert!(e.to_string().contains("cpSGD"), "{e}");
        // Below the theorem's condition (Npq = 10): refused whatever the ε.
        let small = Binomial::new(40, 0.5).unwrap();
        assert!(Encoder::new(2, IntNoise::Binomial(small), 2000, accounting).is_err());
    }

    #[test]
    fn the_tdl_event_follows_the_noise_drawn() {
        // TDL(3, α) at d = 5, Δ₁ = Δ∞ = 2, ε = 1: α = 0.5 has α⌊Δ₁⌋ = 1 = ε; α = 0.75 (a
        // wider α than this silo's calibration) reports its own bound 1.5, never ε = 1.
        let enc = |alpha| {
            let tdl = TruncatedDiscreteLaplace::new(3, alpha).unwrap();
            Encoder::new(4, IntNoise::Tdl(tdl), 5, unit(TdlCalibration::PaperClaim)).unwrap()
        };
        let eps = |e: PrivacyEvent| match e {
            PrivacyEvent::TruncatedDiscreteLaplace { epsilon, delta } => {
                assert!(delta > 0.0 && delta <= 1.0, "{delta}");
                epsilon
            }
            other => panic!("{other:?}"),
        };
        assert_eq!(eps(enc(0.5).privacy_event()), 1.0);
        assert_eq!(eps(enc(0.75).privacy_event()), 1.5);
        // A wider support (more noise) lowers the correct δ at the same α.
        let delta = |m| match Encoder::new(
            4,
            IntNoise::Tdl(TruncatedDiscreteLaplace::new(m, 0.5).unwrap()),
            5,
            unit(TdlCalibration::PaperClaim),
        )
        .unwrap()
        .privacy_event()
        {
            PrivacyEvent::TruncatedDiscreteLaplace { delta, .. } => delta,
            other => panic!("{other:?}"),
        };
        assert!(delta(12) < delta(3), "{} vs {}", delta(12), delta(3));
    }
}

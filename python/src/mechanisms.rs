//! Seedable mechanisms on arrays: the Gaussian mechanism (continuous, or exact discrete
//! Gaussian on a grid), QTDL's truncated discrete Laplace and stochastic quantizer. Each owns
//! a `DpRng` (ChaCha20): seeded as `DpRng::from_seed(seed, Purpose::Silo, stream)`, the stream
//! a silo's noise uses in the simulator, or from the OS without a seed.
//!
//! Arrays cross as little-endian bytes (f64 in, f64 or i64 out); the Python layer makes them
//! numpy arrays.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use dpfl_privacy::mechanism::{
    GaussianMechanism as Inner, GaussianNoise, Mechanism, VectorMechanism,
};
use dpfl_privacy::qtdl::{quantizer, tdl, theorem1};
use dpfl_privacy::rng::{DpRng, Purpose};

use crate::errors::{config, privacy};

fn rng(seed: Option<u64>, stream: u32) -> PyResult<DpRng> {
    DpRng::new(seed, Purpose::Silo, stream).map_err(|e| privacy("seed", e))
}

fn f64s(field: &str, bytes: &[u8]) -> PyResult<Vec<f64>> {
    if !bytes.len().is_multiple_of(8) {
        return Err(config(field, "not a whole number of float64 values"));
    }
    Ok(bytes
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect())
}

fn f64_bytes<'py>(py: Python<'py>, v: &[f64]) -> Bound<'py, PyBytes> {
    let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    PyBytes::new(py, &b)
}

fn i64_bytes<'py>(py: Python<'py>, v: &[i64]) -> Bound<'py, PyBytes> {
    let b: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    PyBytes::new(py, &b)
}

/// v + N(0, σ² I), or its discrete version γ·(round(v/γ) + N_ℤ(0, (σ'/γ)²)) with
/// σ' = σ(Δ + γ√d)/Δ (`dpfl_privacy::mechanism` docs).
#[pyclass(module = "dpfl._core")]
pub struct GaussianMechanism {
    inner: Inner,
    /// The vector length the discrete mechanism's rounding was accounted for.
    dim: Option<usize>,
    rng: DpRng,
}

#[pymethods]
impl GaussianMechanism {
    #[new]
    #[pyo3(signature = (sigma, sensitivity, seed=None, stream=0, granularity=None, dim=None))]
    fn new(
        sigma: f64,
        sensitivity: f64,
        seed: Option<u64>,
        stream: u32,
        granularity: Option<f64>,
        dim: Option<usize>,
    ) -> PyResult<Self> {
        let inner = match granularity {
            None => Inner::new(sigma, sensitivity).map_err(|e| privacy("sigma", e))?,
            Some(granularity) => {
                let dim = dim.ok_or_else(|| {
                    config("dim", "required with granularity (the vector length)")
                })?;
                Inner::with_noise(
                    GaussianNoise::DiscreteGaussian { granularity },
                    sigma,
                    sensitivity,
                    dim,
                )
                .map_err(|e| privacy("granularity", e))?
            }
        };
        Ok(GaussianMechanism {
            dim: granularity.and(dim),
            inner,
            rng: rng(seed, stream)?,
        })
    }

    /// Adds noise to a copy of the float64 values in `data`; returns their bytes.
    fn privatize<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let mut v = f64s("data", data)?;
        if let Some(dim) = self.dim
            && v.len() > dim
        {
            return Err(config(
                "data",
                format!(
                    "{} values, more than the dim = {dim} the grid rounding was accounted for",
                    v.len()
                ),
            ));
        }
        self.inner.privatize(&mut v, &mut self.rng);
        Ok(f64_bytes(py, &v))
    }

    /// The event one call spends (JSON).
    fn event(&self) -> String {
        self.inner.privacy_event().describe()
    }

    #[getter]
    fn sigma(&self) -> f64 {
        self.inner.sigma()
    }
    #[getter]
    fn sensitivity(&self) -> f64 {
        self.inner.sensitivity()
    }
    #[getter]
    fn noise_multiplier(&self) -> f64 {
        self.inner.noise_multiplier()
    }
    #[getter]
    fn granularity(&self) -> Option<f64> {
        self.inner.granularity()
    }
}

/// QTDL's truncated discrete Laplace TDL(m, α) on {−m..m}, exact sampler (Das et al.,
/// DP-NormFedAvg, eq. 3; `dpfl_privacy::qtdl::tdl`).
#[pyclass(module = "dpfl._core")]
pub struct TruncatedDiscreteLaplace {
    inner: tdl::TruncatedDiscreteLaplace,
    rng: DpRng,
}

#[pymethods]
impl TruncatedDiscreteLaplace {
    #[new]
    #[pyo3(signature = (m, alpha, seed=None, stream=0))]
    fn new(m: u64, alpha: f64, seed: Option<u64>, stream: u32) -> PyResult<Self> {
        Ok(TruncatedDiscreteLaplace {
            inner: tdl::TruncatedDiscreteLaplace::new(m, alpha).map_err(|e| privacy("alpha", e))?,
            rng: rng(seed, stream)?,
        })
    }
    /// `n` draws as int64 bytes.
    fn sample<'py>(&mut self, py: Python<'py>, n: usize) -> Bound<'py, PyBytes> {
        let mut out = vec![0i64; n];
        self.inner.fill(&mut self.rng, &mut out);
        i64_bytes(py, &out)
    }
    fn pmf(&self, y: i64) -> f64 {
        self.inner.pmf(y)
    }
    fn variance(&self) -> f64 {
        self.inner.variance()
    }
    #[getter]
    fn m(&self) -> u64 {
        self.inner.m()
    }
    #[getter]
    fn alpha(&self) -> f64 {
        self.inner.alpha()
    }
    #[getter]
    fn normaliser(&self) -> f64 {
        self.inner.normaliser()
    }
}

/// QTDL's stochastic quantizer Q_s: x ∈ [−1, 1] to an integer in {−s..s}, unbiased
/// (`dpfl_privacy::qtdl::quantizer`).
#[pyclass(module = "dpfl._core")]
pub struct StochasticQuantizer {
    inner: quantizer::StochasticQuantizer,
    rng: DpRng,
}

#[pymethods]
impl StochasticQuantizer {
    #[new]
    #[pyo3(signature = (s, seed=None, stream=0))]
    fn new(s: u64, seed: Option<u64>, stream: u32) -> PyResult<Self> {
        Ok(StochasticQuantizer {
            inner: quantizer::StochasticQuantizer::new(s).map_err(|e| privacy("s", e))?,
            rng: rng(seed, stream)?,
        })
    }
    /// Quantizes float64 bytes; returns int64 bytes (levels k, the value k/s).
    fn quantize<'py>(&mut self, py: Python<'py>, data: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let u = f64s("data", data)?;
        let mut out = Vec::with_capacity(u.len());
        self.inner
            .quantize(&u, &mut self.rng, &mut out)
            .map_err(|e| privacy("data", e))?;
        Ok(i64_bytes(py, &out))
    }
    #[getter]
    fn s(&self) -> u64 {
        self.inner.s()
    }
    fn variance_bound(&self) -> f64 {
        self.inner.variance_bound()
    }
}

/// DP-NormFedAvg's Theorem 1: (ε, Δ₁, Δ∞) → (m, α), and the correct δ for dimension `d`
/// (`worst_case_delta`; the paper's 2^−d is wrong for d ≥ 2). Returns (m, α, ln δ).
#[pyfunction]
pub fn qtdl_theorem1(
    epsilon: f64,
    delta_1: f64,
    delta_inf: f64,
    d: u64,
) -> PyResult<(u64, f64, f64)> {
    let t = theorem1::calibrate(epsilon, delta_1, delta_inf).map_err(|e| privacy("epsilon", e))?;
    let delta = t.delta(d).map_err(|e| privacy("d", e))?;
    Ok((t.m(), t.alpha(), delta.ln()))
}

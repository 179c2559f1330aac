//! A user's own model (issue 29 item 2): `gradients(indices, params)` in Python as the
//! gradient provider of `dpfl::model::ExternalModel`. dpfl calls it with the record indices of
//! a batch (numpy int64) and the parameters (numpy float64, d), and reads back
//! `(len(indices), d)` float64 per-example gradients, which it clips, noises and accounts as a
//! built-in model's (see `dpfl::model::external` and `dpfl/halves.py` for the contract).
//!
//! The silo step runs with the GIL released (`Python::detach`), so an algorithm's worker
//! threads (rayon) may call the provider: each call takes the GIL with `Python::attach`. A
//! Python exception, a wrong shape or a non-finite value is returned as the provider's error;
//! the silo half then discards the step's message and raises.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use dpfl::model::GradientProvider;

/// A Python callable `gradients(indices, params) -> array (len(indices), d)`.
#[derive(Debug)]
pub struct PyGradients {
    callable: Py<PyAny>,
    dim: usize,
}

impl PyGradients {
    /// `callable` for a model of `dim` parameters.
    pub fn new(callable: Py<PyAny>, dim: usize) -> Self {
        PyGradients { callable, dim }
    }

    fn call(&self, py: Python<'_>, indices: &[usize], w: &[f64]) -> PyResult<Vec<f64>> {
        let np = py.import("numpy")?;
        let idx: Vec<u8> = indices
            .iter()
            .flat_map(|&i| (i as i64).to_le_bytes())
            .collect();
        let params: Vec<u8> = w.iter().flat_map(|v| v.to_le_bytes()).collect();
        // Fresh, writable arrays: the callable may keep nothing that aliases dpfl's buffers.
        let idx = np
            .call_method1("frombuffer", (PyBytes::new(py, &idx), "<i8"))?
            .call_method1("astype", ("int64",))?;
        let params = np
            .call_method1("frombuffer", (PyBytes::new(py, &params), "<f8"))?
            .call_method1("astype", ("float64",))?;
        let out = self.callable.call1(py, (idx, params))?;
        let arr = np.call_method1("asarray", (out, "<f8"))?;
        let shape: Vec<usize> = arr.getattr("shape")?.extract()?;
        if shape != [indices.len(), self.dim] {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "gradients(indices, params) returned shape {shape:?}, expected ({}, {}): one \
                 row of d = {} per-example gradients per index",
                indices.len(),
                self.dim,
                self.dim
            )));
        }
        let bytes: Vec<u8> = np
            .call_method1("ascontiguousarray", (arr,))?
            .call_method0("tobytes")?
            .extract()?;
        Ok(bytes
            .chunks_exact(8)
            .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect())
    }
}

impl GradientProvider for PyGradients {
    fn gradients(&self, indices: &[usize], w: &[f64], out: &mut [f64]) -> Result<(), String> {
        Python::attach(|py| match self.call(py, indices, w) {
            Ok(g) if g.len() == out.len() => {
                out.copy_from_slice(&g);
                Ok(())
            }
            Ok(g) => Err(format!(
                "the gradients callable returned {} values, expected {}",
                g.len(),
                out.len()
            )),
            Err(e) => Err(format!("the gradients callable failed: {e}")),
        })
    }
}

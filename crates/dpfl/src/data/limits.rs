//! Limits on dense allocations whose size comes from user input (a declared feature count, IDX
//! dimensions, a synthetic data shape, a model's parameter count). Each is checked *before*
//! allocating, so a typo such as `num_features = 1e12` is an error naming the field and the
//! limit rather than an allocation abort or a machine swapping to death.
//!
//! The limits are generous for the papers' data (MNIST is 47 M values, w8a 15 M) and can be
//! raised for a bigger machine with `DPFL_MAX_VALUES` (dense values of one data set, 8 bytes
//! each).

use crate::{Error, Result};

/// Default cap on the values of one dense data set: 2^28 values = 2 GiB of f64.
pub const DEFAULT_MAX_VALUES: usize = 1 << 28;

/// Cap on features (and so on one dense row): 2^24 = 16.8 M features = 128 MiB per row.
pub const MAX_FEATURES: usize = 1 << 24;

/// Cap on a model's parameters: 2^26 = 67 M (512 MiB per copy; the simulator keeps several).
pub const MAX_PARAMS: usize = 1 << 26;

/// The environment variable raising [`DEFAULT_MAX_VALUES`].
pub const MAX_VALUES_ENV: &str = "DPFL_MAX_VALUES";

/// The cap on values of one dense data set (`DPFL_MAX_VALUES` if set to a positive integer).
pub fn max_values() -> usize {
    std::env::var(MAX_VALUES_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&v| v > 0)
        .unwrap_or(DEFAULT_MAX_VALUES)
}

/// Checks a feature count given in `field`.
pub fn check_features(field: &str, d: usize) -> Result<()> {
    if d > MAX_FEATURES {
        return Err(Error::config(
            field,
            format!(
                "{d} features exceed the limit of {MAX_FEATURES} (dense rows of 8-byte values)"
            ),
        ));
    }
    Ok(())
}

/// Checks that `rows × cols` dense values (named by `what`) fit under [`max_values`].
pub fn check_dense(what: &str, rows: usize, cols: usize) -> Result<()> {
    let limit = max_values();
    match rows.checked_mul(cols) {
        Some(n) if n <= limit => Ok(()),
        n => Err(Error::data(
            what,
            format!(
                "{rows} rows x {cols} values = {} dense values exceed the limit of {limit} \
                 ({} MiB; raise it with {MAX_VALUES_ENV})",
                n.map_or("more than 2^64".into(), |n| n.to_string()),
                (limit * 8) >> 20
            ),
        )),
    }
}

/// Checks a model's parameter count (`field` names what set it).
pub fn check_params(field: &str, params: Option<usize>) -> Result<()> {
    match params {
        Some(p) if p <= MAX_PARAMS => Ok(()),
        p => Err(Error::config(
            field,
            format!(
                "the model would have {} parameters, above the limit of {MAX_PARAMS}",
                p.map_or("more than 2^64".into(), |p| p.to_string())
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_name_field_and_limit() {
        let e = check_features("num_features", 1_000_000_000_000)
            .unwrap_err()
            .to_string();
        assert!(e.contains("num_features") && e.contains("16777216"), "{e}");
        let e = check_dense("x.svm", 13, 100_000_000)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("x.svm") && e.contains("1300000000") && e.contains("268435456"),
            "{e}"
        );
        assert!(check_dense("x", usize::MAX, 2).is_err());
        check_dense("x", 60_000, 784).unwrap();
        let e = check_params("model", None).unwrap_err().to_string();
        assert!(e.contains("2^64"), "{e}");
    }
}

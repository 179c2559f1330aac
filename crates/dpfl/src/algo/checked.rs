//! Checked parameter blocks (issue 28 item 4), after linfa's `ParamGuard`: a wing's config is
//! read by serde as it stands in the file (unchecked), checked once by
//! [`ParamGuard::check`] into the wing's validated type, and only that type reaches the wing's
//! `plan()` ([`crate::algo::wing::Wing::plan`]). Checks that need the federation (K ≤ n_i,
//! k ≤ d) stay in planning but refuse with the same [`ParamError`].
//!
//! The blocks the wings share, each checked here once:
//! - the **step rule** ([`StepRule`]): η given (finite, > 0) or left to the wing's rule
//!   (Lowy & Razaviyayn's `params = "theory"`, Cheu et al.'s presets);
//! - the **batch rule** ([`BatchRule`]): K given (≥ 1) or the wing's default rule;
//! - **smoothing** ([`CheckedSmoothing`]): a Moreau β > 0 or the theorems' rule (Lowy &
//!   Razaviyayn Thm D.2 / F.2, Cheu et al. Thm 4.7);
//! - the **problem constants**: Lowy & Razaviyayn's `constants` table is checked by its own
//!   guard (`lowy::inputs`), PAGD's and pan-private AC-SA's flat β, λ, D by [`positive`];
//! - the **objective weights** p_i ([`weights`]; their count is checked against N at planning);
//! - numeric domains ([`positive`], [`non_negative`], [`unit_interval`], [`at_least_one`]).
//!
//! Field names are relative to the algorithm's table (`step_size`, `constants.diameter`):
//! the experiment names the algorithm (`algorithms[2] "CDP-SGD": …`, `crate::Error::Algorithm`),
//! and outside an experiment `crate::Error::Param` shows them as `algorithm.<field>`.

use crate::algo::gradient::{Smoothing, SmoothingRule};
use crate::units::StepSize;

/// Why an algorithm's parameter is refused. `field` is relative to the algorithm's table.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ParamError {
    /// Not finite, or not > 0.
    #[error("{field} must be finite and > 0, got {value}")]
    NotPositive {
        /// The field.
        field: String,
        /// The value given.
        value: f64,
    },
    /// Not finite, or negative.
    #[error("{field} must be finite and >= 0, got {value}")]
    Negative {
        /// The field.
        field: String,
        /// The value given.
        value: f64,
    },
    /// A count of 0 where at least 1 is needed.
    #[error("{field} must be at least 1")]
    Zero {
        /// The field.
        field: String,
    },
    /// Outside an interval.
    #[error("{field} must lie in {range}, got {value}")]
    OutOfRange {
        /// The field.
        field: String,
        /// The interval, as the message writes it (`(0, 1]`).
        range: &'static str,
        /// The value given.
        value: f64,
    },
    /// A count above a bound set by the federation (k ≤ d, K ≤ n_i).
    #[error("{field} must be ≤ {bound_name} = {bound}, got {value}")]
    TooLarge {
        /// The field.
        field: String,
        /// The bound's name (`d`, `min n_i`).
        bound_name: String,
        /// The bound.
        bound: usize,
        /// The value given.
        value: usize,
    },
    /// Missing where the wing has no rule for it.
    #[error("{field} is required: {why}")]
    Missing {
        /// The field.
        field: String,
        /// Why, and what to give.
        why: String,
    },
    /// Refused for this algorithm or in combination with another field.
    #[error("{field}: {why}")]
    Refused {
        /// The field.
        field: String,
        /// Why.
        why: String,
    },
}

impl ParamError {
    /// The field, relative to the algorithm's table.
    pub fn field(&self) -> &str {
        match self {
            ParamError::NotPositive { field, .. }
            | ParamError::Negative { field, .. }
            | ParamError::Zero { field }
            | ParamError::OutOfRange { field, .. }
            | ParamError::TooLarge { field, .. }
            | ParamError::Missing { field, .. }
            | ParamError::Refused { field, .. } => field,
        }
    }

    /// The message without the field (what "config field `algorithm.<field>`: …" shows).
    pub fn reason(&self) -> String {
        let full = self.to_string();
        let rest = &full[self.field().len()..];
        rest.strip_prefix(": ")
            .or_else(|| rest.strip_prefix(' '))
            .unwrap_or(rest)
            .to_string()
    }

    /// The same error with its field under `prefix` (`compressor` + `k` → `compressor.k`).
    pub fn under(mut self, prefix: &str) -> Self {
        let field = match &mut self {
            ParamError::NotPositive { field, .. }
            | ParamError::Negative { field, .. }
            | ParamError::Zero { field }
            | ParamError::OutOfRange { field, .. }
            | ParamError::TooLarge { field, .. }
            | ParamError::Missing { field, .. }
            | ParamError::Refused { field, .. } => field,
        };
        *field = format!("{prefix}.{field}");
        self
    }

    /// [`ParamError::Refused`].
    pub fn refused(field: impl Into<String>, why: impl Into<String>) -> Self {
        ParamError::Refused {
            field: field.into(),
            why: why.into(),
        }
    }

    /// [`ParamError::Missing`].
    pub fn missing(field: impl Into<String>, why: impl Into<String>) -> Self {
        ParamError::Missing {
            field: field.into(),
            why: why.into(),
        }
    }

    /// [`ParamError::TooLarge`].
    pub fn too_large(
        field: impl Into<String>,
        value: usize,
        bound_name: impl Into<String>,
        bound: usize,
    ) -> Self {
        ParamError::TooLarge {
            field: field.into(),
            bound_name: bound_name.into(),
            bound,
            value,
        }
    }
}

/// Unchecked parameters (as a config file gives them) and their one check (linfa's
/// `ParamGuard`): the checked type is what planning takes, so nothing downstream re-checks.
pub trait ParamGuard {
    /// The validated parameters.
    type Checked;
    /// Checks every field that can be checked without the federation.
    fn check(&self) -> Result<Self::Checked, ParamError>;
}

/// `value`, finite and > 0.
pub fn positive(field: &str, value: f64) -> Result<f64, ParamError> {
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(ParamError::NotPositive {
            field: field.into(),
            value,
        })
    }
}

/// `value`, finite and ≥ 0.
pub fn non_negative(field: &str, value: f64) -> Result<f64, ParamError> {
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(ParamError::Negative {
            field: field.into(),
            value,
        })
    }
}

/// `value` in (0, 1].
pub fn unit_interval(field: &str, value: f64) -> Result<f64, ParamError> {
    if value > 0.0 && value <= 1.0 {
        Ok(value)
    } else {
        Err(ParamError::OutOfRange {
            field: field.into(),
            range: "(0, 1]",
            value,
        })
    }
}

/// `value` ≥ 1.
pub fn at_least_one(field: &str, value: usize) -> Result<usize, ParamError> {
    match value {
        0 => Err(ParamError::Zero {
            field: field.into(),
        }),
        k => Ok(k),
    }
}

/// `value` ≤ `bound` (a count the federation bounds: k ≤ d, R·K ≤ min n_i).
pub fn at_most(
    field: &str,
    value: usize,
    bound_name: &str,
    bound: usize,
) -> Result<usize, ParamError> {
    if value <= bound {
        Ok(value)
    } else {
        Err(ParamError::too_large(field, value, bound_name, bound))
    }
}

/// K of a one-pass run over disjoint batches: 1 ≤ K and R·K ≤ min n_i, so that no record is
/// used twice (Lowy & Razaviyayn Thm E.1; Cheu et al.'s sequentially interactive protocols).
pub fn one_pass_batch(k: usize, rounds: usize, n_min: usize) -> Result<usize, ParamError> {
    at_least_one("batch_size", k)?;
    at_most("batch_size", k, "min n_i / R", n_min / rounds.max(1))
}

/// η, checked.
pub fn step_size(value: f64) -> Result<StepSize, ParamError> {
    positive("step_size", value)?;
    StepSize::new(value).map_err(|_| ParamError::NotPositive {
        field: "step_size".into(),
        value,
    })
}

/// The step rule: η given, or the wing's own rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StepRule {
    /// η as configured.
    Given(StepSize),
    /// The wing computes η (the theorems' rules, a preset).
    Rule,
}

impl StepRule {
    /// `step_size = …` or none.
    pub fn check(value: Option<f64>) -> Result<Self, ParamError> {
        value.map_or(Ok(StepRule::Rule), |v| step_size(v).map(StepRule::Given))
    }

    /// η, if given.
    pub fn given(self) -> Option<f64> {
        match self {
            StepRule::Given(s) => Some(s.get()),
            StepRule::Rule => None,
        }
    }
}

/// The batch rule: K given (≥ 1), or the wing's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchRule {
    /// K as configured.
    Given(usize),
    /// The wing's default rule.
    Rule,
}

impl BatchRule {
    /// `field = …` (`batch_size`, `local_steps`) or none.
    pub fn check(field: &str, value: Option<usize>) -> Result<Self, ParamError> {
        value.map_or(Ok(BatchRule::Rule), |k| {
            at_least_one(field, k).map(BatchRule::Given)
        })
    }

    /// K, if given.
    pub fn given(self) -> Option<usize> {
        match self {
            BatchRule::Given(k) => Some(k),
            BatchRule::Rule => None,
        }
    }
}

/// Moreau smoothing, checked: β > 0 or the theorems' rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CheckedSmoothing {
    /// β, finite and > 0.
    Beta(f64),
    /// β by the wing's theorem.
    Theory,
}

impl CheckedSmoothing {
    /// `smoothing = β | "theory"` or none.
    pub fn check(value: Option<Smoothing>) -> Result<Option<Self>, ParamError> {
        Ok(match value {
            None => None,
            Some(Smoothing::Beta(b)) => Some(CheckedSmoothing::Beta(positive("smoothing", b)?)),
            Some(Smoothing::Rule(SmoothingRule::Theory)) => Some(CheckedSmoothing::Theory),
        })
    }
}

/// The objective weights p_i: each finite and > 0, Σ p_i = 1 within 1e-9 (their count is
/// checked against N when the federation is known).
pub fn weights(p: Option<&[f64]>) -> Result<Option<Vec<f64>>, ParamError> {
    let Some(p) = p else {
        return Ok(None);
    };
    if let Some(i) = p.iter().position(|&x| !(x.is_finite() && x > 0.0)) {
        return Err(ParamError::NotPositive {
            field: format!("weights[{i}]"),
            value: p[i],
        });
    }
    let s: f64 = p.iter().sum();
    if (s - 1.0).abs() > 1e-9 {
        return Err(ParamError::refused(
            "weights",
            format!("must sum to 1, got {s}"),
        ));
    }
    Ok(Some(p.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One message per kind of refusal, as a user reads it.
    #[test]
    fn each_kind_of_refusal_reads_as_field_then_reason() {
        let cases: [(ParamError, &str); 7] = [
            (
                positive("step_size", 0.0).unwrap_err(),
                "step_size must be finite and > 0, got 0",
            ),
            (
                non_negative("constants.variance", -1.0).unwrap_err(),
                "constants.variance must be finite and >= 0, got -1",
            ),
            (
                BatchRule::check("batch_size", Some(0)).unwrap_err(),
                "batch_size must be at least 1",
            ),
            (
                unit_interval("shift_step", 1.5).unwrap_err(),
                "shift_step must lie in (0, 1], got 1.5",
            ),
            (
                at_most("k", 200, "d", 124).unwrap_err(),
                "k must be ≤ d = 124, got 200",
            ),
            (
                ParamError::missing("step_size", "for convex losses unless params = \"theory\""),
                "step_size is required: for convex losses unless params = \"theory\"",
            ),
            (
                ParamError::refused("consensus", "only q-dpsgd-1 takes a consensus step"),
                "consensus: only q-dpsgd-1 takes a consensus step",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(e.to_string(), want);
            assert!(
                want.starts_with(e.field()) && want.ends_with(&e.reason()),
                "{want}"
            );
        }
        // Outside an experiment the field is shown under `algorithm.`, as config fields are.
        let e: crate::Error = positive("step_size", -1.0).unwrap_err().into();
        assert_eq!(
            e.to_string(),
            "config field `algorithm.step_size`: must be finite and > 0, got -1"
        );
        assert!(e.is_config());
        // In an experiment the algorithm's index and label come first, then the field.
        let e = crate::Error::from(at_most("compressor.k", 200, "d", 124).unwrap_err())
            .in_algorithm(2, "CDP-SGD");
        assert_eq!(
            e.to_string(),
            "algorithms[2] \"CDP-SGD\": compressor.k must be ≤ d = 124, got 200"
        );
        assert!(e.is_config());
        let e = crate::Error::config("rounds", "R = 0").in_algorithm(0, "MB-SGD");
        assert_eq!(e.to_string(), "algorithms[0] \"MB-SGD\": rounds: R = 0");
        // A failed run is not the configuration's: it passes unchanged.
        let e = crate::Error::Diverged("NaN".into()).in_algorithm(0, "MB-SGD");
        assert!(matches!(e, crate::Error::Diverged(_)) && !e.is_config());
    }

    #[test]
    fn shared_blocks_accept_what_they_should() {
        assert_eq!(StepRule::check(None), Ok(StepRule::Rule));
        assert_eq!(
            StepRule::check(Some(0.5)).map(StepRule::given),
            Ok(Some(0.5))
        );
        assert!(StepRule::check(Some(f64::NAN)).is_err());
        assert_eq!(
            BatchRule::check("batch_size", Some(3)),
            Ok(BatchRule::Given(3))
        );
        assert_eq!(
            CheckedSmoothing::check(Some(Smoothing::Beta(2.0))),
            Ok(Some(CheckedSmoothing::Beta(2.0)))
        );
        assert_eq!(
            CheckedSmoothing::check(Some(Smoothing::Beta(-2.0))).map_err(|e| e.to_string()),
            Err("smoothing must be finite and > 0, got -2".to_string())
        );
        assert_eq!(
            weights(Some(&[0.5, 0.25, 0.0])).unwrap_err().to_string(),
            "weights[2] must be finite and > 0, got 0"
        );
        assert_eq!(
            weights(Some(&[0.5, 0.25])).unwrap_err().to_string(),
            "weights: must sum to 1, got 0.75"
        );
    }
}

//! Checked privacy parameters. A value of these types has passed its domain check once, so
//! code that receives one never re-validates it. They serialise as the bare number and are
//! checked again when deserialised, so a stored ledger or plan with a bad ε or δ is refused
//! where it is read.

use serde::{Deserialize, Serialize};

use crate::error::{PrivacyError, Result};

/// ε > 0, finite.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Epsilon(f64);

impl Epsilon {
    /// Checked: finite and > 0.
    pub fn new(eps: f64) -> Result<Self> {
        if eps.is_finite() && eps > 0.0 {
            Ok(Epsilon(eps))
        } else {
            Err(PrivacyError::invalid(
                "epsilon",
                eps,
                "must be finite and > 0",
            ))
        }
    }
    /// The value.
    pub fn get(self) -> f64 {
        self.0
    }
}

/// δ ∈ (0, 1).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Delta(f64);

impl Delta {
    /// Checked: in (0, 1).
    pub fn new(delta: f64) -> Result<Self> {
        if delta > 0.0 && delta < 1.0 {
            Ok(Delta(delta))
        } else {
            Err(PrivacyError::invalid("delta", delta, "must lie in (0, 1)"))
        }
    }
    /// The value.
    pub fn get(self) -> f64 {
        self.0
    }
}

macro_rules! bare_number {
    ($t:ident) => {
        impl TryFrom<f64> for $t {
            type Error = PrivacyError;
            fn try_from(x: f64) -> Result<Self> {
                $t::new(x)
            }
        }
        impl From<$t> for f64 {
            fn from(x: $t) -> f64 {
                x.0
            }
        }
    };
}
bare_number!(Epsilon);
bare_number!(Delta);

/// Checks that `x` is finite and strictly positive, naming the parameter otherwise.
pub fn positive(name: &'static str, x: f64) -> Result<f64> {
    if x.is_finite() && x > 0.0 {
        Ok(x)
    } else {
        Err(PrivacyError::invalid(name, x, "must be finite and > 0"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_enforced() {
        assert!(Epsilon::new(0.0).is_err());
        assert!(Epsilon::new(-1.0).is_err());
        assert!(Epsilon::new(f64::NAN).is_err());
        assert!(Epsilon::new(f64::INFINITY).is_err());
        assert_eq!(Epsilon::new(1.5).map(Epsilon::get), Ok(1.5));
        assert!(Delta::new(0.0).is_err());
        assert!(Delta::new(1.0).is_err());
        assert!(Delta::new(f64::NAN).is_err());
        assert_eq!(Delta::new(1e-5).map(Delta::get), Ok(1e-5));
    }

    #[test]
    fn serialised_bare_and_checked_when_read() {
        let e = Epsilon::new(2.5).unwrap();
        assert_eq!(serde_json::to_string(&e).unwrap(), "2.5");
        assert_eq!(serde_json::from_str::<Epsilon>("2.5").unwrap(), e);
        assert!(serde_json::from_str::<Epsilon>("0.0").is_err());
        assert!(serde_json::from_str::<Epsilon>("-1.0").is_err());
        assert_eq!(
            serde_json::to_string(&Delta::new(1e-5).unwrap()).unwrap(),
            "0.00001"
        );
        assert!(serde_json::from_str::<Delta>("1.0").is_err());
        assert!(serde_json::from_str::<Delta>("0.0").is_err());
    }
}

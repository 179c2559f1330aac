//! Numbers that carry meaning, as checked newtypes (issue 10, "newtypes where numbers carry
//! meaning"): a silo's index, a step size, a clip norm. ε and δ are `dpfl_privacy`'s
//! [`Epsilon`](dpfl_privacy::Epsilon) and [`Delta`](dpfl_privacy::Delta).
//!
//! Each value passes its domain check once, in its constructor or when it is deserialised
//! (`serde(try_from)`), so a plan or a federation file with a NaN step size or a negative clip
//! is refused where it is read, and code that receives one never re-validates it. They
//! serialise as the bare number, so files, plans and golden outputs are unchanged.
//!
//! Where they are used: the plan's public facts ([`crate::plan::Setup::clip`]), the
//! per-party builders ([`crate::plan::silo_half`]), the Lowy wing's plans (η) and
//! [`crate::algo::SiloInfo`]. [`Round`] is the round of every message, half signature, round
//! core call and stored state (re-exported as `crate::algo::Round`).
//! Numbers become rounds through `Round::new` / `Round::checked`, the next round through the
//! checked `Round::next`; `dpfl-net` turns a round into a `u32` only at the wire.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The index of a silo, 0..N, in silo order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SiloId(u32);

impl SiloId {
    /// Silo `id`.
    pub const fn new(id: u32) -> Self {
        SiloId(id)
    }

    /// Silo number `index` of `silos`; an error naming the silo when it is out of range (or
    /// does not fit a `u32`).
    pub fn checked(index: usize, silos: usize) -> crate::Result<Self> {
        match u32::try_from(index) {
            Ok(id) if index < silos => Ok(SiloId(id)),
            _ => Err(crate::Error::config(
                "silo",
                format!("silo {index} does not exist: the federation has {silos}"),
            )),
        }
    }

    /// The id as a number.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The id as an index into per-silo vectors.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for SiloId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<SiloId> for u32 {
    fn from(s: SiloId) -> u32 {
        s.0
    }
}

/// A round r, counted from 0: round r opens with the r-th broadcast (0-based), and a model
/// after round r has seen r + 1 aggregations. A separate type so that a round cannot be mixed
/// up with a silo id, a release count or a number of rounds done; numbers become rounds only
/// through [`Round::new`] or the checked [`Round::checked`], and arithmetic on them is checked
/// ([`Round::next`]). Serialised as the bare `u32`, so stored state and files are unchanged.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Round(u32);

impl Round {
    /// Round 0, the first.
    pub const FIRST: Round = Round(0);

    /// Round `r`.
    pub const fn new(r: u32) -> Self {
        Round(r)
    }

    /// Round number `index` (a loop counter, a count of rounds done); an error naming it
    /// when it does not fit the `u32` every message carries.
    pub fn checked(index: impl TryInto<u32> + Copy + fmt::Display) -> crate::Result<Self> {
        index.try_into().map(Round).map_err(|_| {
            crate::Error::config("rounds", format!("round {index} does not fit in 32 bits"))
        })
    }

    /// The round as a number.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// The round as an index into per-round vectors (0-based).
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// How many rounds are done once this one is aggregated: r + 1.
    pub const fn done(self) -> usize {
        self.0 as usize + 1
    }

    /// The round after this one; `None` past `u32::MAX` (never wraps to round 0).
    pub const fn next(self) -> Option<Round> {
        match self.0.checked_add(1) {
            Some(r) => Some(Round(r)),
            None => None,
        }
    }
}

impl fmt::Display for Round {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl From<Round> for u32 {
    fn from(r: Round) -> u32 {
        r.0
    }
}

impl From<Round> for u64 {
    fn from(r: Round) -> u64 {
        u64::from(r.0)
    }
}

/// Checks `x` finite and > 0, naming `field`.
fn positive(field: &'static str, x: f64) -> crate::Result<f64> {
    if x.is_finite() && x > 0.0 {
        Ok(x)
    } else {
        Err(crate::Error::config(
            field,
            format!("must be finite and > 0, got {x}"),
        ))
    }
}

macro_rules! positive_newtype {
    ($(#[$doc:meta])* $name:ident, $field:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Serialize, Deserialize)]
        #[serde(try_from = "f64", into = "f64")]
        pub struct $name(f64);

        impl $name {
            /// Checked: finite and > 0.
            pub fn new(x: f64) -> crate::Result<Self> {
                positive($field, x).map($name)
            }

            /// The value.
            pub const fn get(self) -> f64 {
                self.0
            }
        }

        impl TryFrom<f64> for $name {
            type Error = crate::Error;
            fn try_from(x: f64) -> crate::Result<Self> {
                $name::new(x)
            }
        }

        impl From<$name> for f64 {
            fn from(x: $name) -> f64 {
                x.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

positive_newtype!(
    /// A step size η > 0, finite.
    StepSize,
    "algorithm.step_size"
);

positive_newtype!(
    /// A per-example clip norm C > 0, finite: every per-example gradient is scaled to norm ≤ C.
    ClipNorm,
    "clip"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_are_enforced() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(StepSize::new(bad).is_err(), "{bad}");
            assert!(ClipNorm::new(bad).is_err(), "{bad}");
        }
        assert_eq!(StepSize::new(0.25).unwrap().get(), 0.25);
        assert_eq!(
            ClipNorm::new(f64::MIN_POSITIVE).unwrap().get(),
            f64::MIN_POSITIVE
        );
        let e = StepSize::new(-2.0).unwrap_err().to_string();
        assert!(e.contains("algorithm.step_size") && e.contains("-2"), "{e}");
        assert_eq!(SiloId::checked(2, 3).unwrap(), SiloId::new(2));
        assert!(SiloId::checked(3, 3).is_err());
        assert!(SiloId::checked(usize::MAX, usize::MAX).is_err());
        assert_eq!(Round::checked(7usize).unwrap(), Round::new(7));
        assert_eq!(Round::checked(u32::MAX as u64).unwrap().get(), u32::MAX);
        let e = Round::checked(u32::MAX as u64 + 1).unwrap_err().to_string();
        assert!(e.contains("4294967296"), "{e}");
        assert_eq!(Round::new(3).next(), Some(Round::new(4)));
        assert_eq!(Round::new(u32::MAX).next(), None);
        assert_eq!((Round::new(3).done(), Round::new(3).index()), (4, 3));
    }

    #[test]
    fn serialised_as_the_bare_number_and_checked_when_read() {
        #[derive(Debug, PartialEq, Serialize, Deserialize)]
        struct T {
            eta: StepSize,
            clip: Option<ClipNorm>,
            silo: SiloId,
            round: Round,
        }
        let t = T {
            eta: StepSize::new(0.1).unwrap(),
            clip: Some(ClipNorm::new(2.5).unwrap()),
            silo: SiloId::new(4),
            round: Round::new(9),
        };
        let s = toml::to_string(&t).unwrap();
        assert_eq!(s, "eta = 0.1\nclip = 2.5\nsilo = 4\nround = 9\n");
        assert_eq!(toml::from_str::<T>(&s).unwrap(), t);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, r#"{"eta":0.1,"clip":2.5,"silo":4,"round":9}"#);
        // postcard (checkpoints, silo state): the same bytes as the bare u32.
        assert_eq!(
            postcard::to_allocvec(&Round::new(300)).unwrap(),
            postcard::to_allocvec(&300u32).unwrap()
        );
        let err = toml::from_str::<T>("eta = -0.1\nsilo = 0\nround = 0\n").unwrap_err();
        assert!(err.to_string().contains("must be finite and > 0"), "{err}");
        assert!(toml::from_str::<T>("eta = 0.1\nclip = 0.0\nsilo = 0\nround = 0\n").is_err());
    }
}

//! Numbers for people: fixed notation in the everyday range, scientific notation for very
//! large or very small magnitudes (never a 300-digit integer or a row of zeros). The rules
//! live beside the privacy guarantee's text, which uses them too.

pub use dpfl_lab::experiment::guarantee::{num, short};

//! How raw rows became features (issue 16 item 4): recorded with a run's data and saved with
//! its models so that `predict` repeats it. Its own file so that `context` (which carries it)
//! does not import `saved` (which imports the summary, which imports `context`).

use serde::{Deserialize, Serialize};

use crate::data::csv::CsvSchema;
use crate::data::preprocess::Standardizer;

/// How raw rows became features: what `predict` repeats on a new file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Preprocessing {
    /// The source kind of the experiment (`csv`, `csv-silos`, `obesity`, …).
    pub source: String,
    /// The CSV schema fitted on the training file(s); `None` for non-CSV sources.
    pub csv: Option<CsvSchema>,
    /// The standardisation fitted on the pooled training rows, if any.
    pub standardizer: Option<Standardizer>,
}

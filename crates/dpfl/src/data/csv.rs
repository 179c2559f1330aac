//! CSV loader with categorical encoding, for the tabular sets of Lowy & Razaviyayn §6 /
//! App. I.2 (Medical Cost, "insurance") and App. I.3 (UCI obesity).
//!
//! A [`CsvSpec`] says which column is the target, which columns are categorical (label-encoded
//! or one-hot) and which are dropped; every other column must be numeric. Loading a file
//! *fits* a [`CsvSchema`]: the header, and for every categorical column and a class target the
//! exact category order. The schema can be applied to a second file (a separate test file),
//! where a category it has not seen is an error rather than a silently new code.
//!
//! Category order is the order given in the spec, or else sorted (byte order), which is what
//! scikit-learn's `LabelEncoder` and the paper's code produce. One-hot columns are named
//! `column=value`, in the category order.
//!
//! Standardisation is deliberately *not* done here: its statistics must come from the training
//! part only, which exists after partitioning and splitting. [`CsvSpec::standardize`] records
//! the columns so the caller can build a [`crate::data::preprocess::Standardizer`] later.
//!
//! Every error names the file and the 1-based line, and for a bad field the 1-based column
//! and its header name. Fields are trimmed; empty fields, unparsable numbers and NaN/±inf are
//! refused.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use super::csv_table::{Table, read_table};
use super::{Dataset, Target};
use crate::linalg::Matrix;
use crate::{Error, Result};

/// Which column is the target and how to read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum TargetSpec {
    /// Class names in `column`, label-encoded 0..C in `order` (if given; values outside it are errors)
    /// or else in sorted order.
    Class {
        /// The header name of the target column.
        column: String,
        /// The classes in label order 0..C; values outside it are errors. Sorted order when absent.
        #[serde(default)]
        order: Option<Vec<String>>,
    },
    /// A real-valued target.
    Real {
        /// The header name of the target column.
        column: String,
    },
}

impl TargetSpec {
    /// The header name of the target column.
    pub fn column(&self) -> &str {
        match self {
            TargetSpec::Class { column, .. } | TargetSpec::Real { column } => column,
        }
    }
}

/// How a categorical column becomes numbers.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Encoding {
    /// One column holding the category's index 0..k (the paper's choice).
    #[default]
    Label,
    /// k indicator columns `column=value`.
    OneHot,
}

/// A categorical feature column.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CategoricalSpec {
    /// The header name of the column.
    pub column: String,
    /// Label (one column of indices) or one-hot (an indicator column per category).
    #[serde(default)]
    pub encoding: Encoding,
    /// Category order; values outside it are errors. Sorted order when absent.
    #[serde(default)]
    pub order: Option<Vec<String>>,
}

impl CategoricalSpec {
    /// Label-encoded, sorted order.
    pub fn label(column: &str) -> Self {
        CategoricalSpec {
            column: column.into(),
            encoding: Encoding::Label,
            order: None,
        }
    }
    /// One-hot, sorted order.
    pub fn one_hot(column: &str) -> Self {
        CategoricalSpec {
            column: column.into(),
            encoding: Encoding::OneHot,
            order: None,
        }
    }
}

/// What to make of a CSV file with a header row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CsvSpec {
    /// Which column is the target and how its values become labels or reals.
    pub target: TargetSpec,
    /// The categorical feature columns and their encodings; every other non-target column must be
    /// numeric.
    #[serde(default)]
    pub categorical: Vec<CategoricalSpec>,
    /// Numeric feature columns to standardise after splitting (fit on training rows only).
    #[serde(default)]
    pub standardize: Vec<String>,
    /// Columns to ignore.
    #[serde(default)]
    pub drop: Vec<String>,
    /// Append a constant-1 column named `intercept`.
    #[serde(default)]
    pub intercept: bool,
    /// Public standardisation statistics of `standardize` columns, used instead of fitting
    /// them on the training rows: (x − mean)/scale. A silo making its own shard needs them
    /// (`dpfl data shard`), so that every silo and the saved model scale a feature alike.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub scaling: BTreeMap<String, Scaling>,
    /// Cell values that mean "missing" besides an empty cell (e.g. `["NA", "?"]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub na_values: Vec<String>,
    /// What a missing value does: refuse the file (default), drop its row, or impute it from
    /// the silo's own rows (the mean of a numeric column, the most frequent category).
    #[serde(default, skip_serializing_if = "Missing::is_refuse")]
    pub missing: Missing,
}

/// What a missing feature value (an empty cell, or one of `na_values`) does. A missing label
/// drops its row under `drop` and `impute`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Missing {
    /// An error naming the file, line and column.
    #[default]
    Refuse,
    /// The row is left out.
    Drop,
    /// The value is imputed from the rows of its own silo only (training and test rows of
    /// that silo; no other silo's data): a numeric column's mean, a categorical column's most
    /// frequent category. With a random partition (no silo column or files), the whole file.
    Impute,
}

impl Missing {
    fn is_refuse(&self) -> bool {
        *self == Missing::Refuse
    }
}

/// A column's public standardisation: x ↦ (x − mean)/scale.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scaling {
    /// Subtracted from every value.
    pub mean: f64,
    /// Divides every centred value; finite and > 0.
    pub scale: f64,
}

/// What one file column becomes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Role {
    Target,
    Drop,
    Numeric,
    Categorical {
        encoding: Encoding,
        categories: Vec<String>,
    },
}

/// A spec fitted to a file: header and category orders, reusable on other files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CsvSchema {
    spec: CsvSpec,
    header: Vec<String>,
    roles: Vec<Role>,
    /// Class names of a class target, in code order.
    classes: Option<Vec<String>>,
    feature_names: Vec<String>,
}

/// Loads `path` according to `spec`, fitting category orders on this file.
pub fn load_csv(path: &Path, spec: &CsvSpec) -> Result<(Dataset, CsvSchema)> {
    let table = read_table(path)?;
    let schema = CsvSchema::fit(path, spec, &table)?;
    let data = schema.encode(path, &table)?;
    Ok((data, schema))
}

impl CsvSchema {
    /// Loads another file with this schema: same header, no new categories.
    pub fn load(&self, path: &Path) -> Result<Dataset> {
        let table = read_table(path)?;
        if table.header != self.header {
            return Err(Error::Parse {
                path: path.to_path_buf(),
                line: table.header_line,
                reason: format!(
                    "header {:?} differs from the fitted header {:?}",
                    table.header, self.header
                ),
            });
        }
        self.encode(path, &table)
    }

    /// This schema refusing missing values whatever the spec says (`dpfl predict`: one
    /// prediction per row of the file, none left out or filled from the new file's rows).
    pub fn refusing_missing(&self) -> Self {
        let mut s = self.clone();
        s.spec.missing = Missing::Refuse;
        s
    }

    /// The spec this schema was fitted with.
    pub fn spec(&self) -> &CsvSpec {
        &self.spec
    }
    /// The file's header row.
    pub fn header(&self) -> &[String] {
        &self.header
    }
    /// Names of the encoded feature columns (one-hot expanded, intercept last if any).
    pub fn feature_names(&self) -> &[String] {
        &self.feature_names
    }
    /// Class names of a class target, in code order.
    pub fn classes(&self) -> Option<&[String]> {
        self.classes.as_deref()
    }
    /// The category order of a categorical column.
    pub fn categories(&self, column: &str) -> Option<&[String]> {
        self.header
            .iter()
            .zip(&self.roles)
            .find(|(h, _)| h.as_str() == column)
            .and_then(|(_, r)| match r {
                Role::Categorical { categories, .. } => Some(categories.as_slice()),
                _ => None,
            })
    }

    pub(crate) fn fit(path: &Path, spec: &CsvSpec, table: &Table) -> Result<Self> {
        let find = |field: &str, name: &str| -> Result<usize> {
            table.header.iter().position(|h| h == name).ok_or_else(|| {
                Error::config(
                    field,
                    format!(
                        "column `{name}` is not in the header of {} (columns: {})",
                        path.display(),
                        table.header.join(", ")
                    ),
                )
            })
        };
        let mut roles = vec![Role::Numeric; table.header.len()];
        let mut assigned: Vec<Option<&'static str>> = vec![None; table.header.len()];
        let mut claim =
            |col: usize, what: &'static str, roles: &mut Vec<Role>, role: Role| -> Result<()> {
                if let Some(prev) = assigned[col] {
                    return Err(Error::config(
                        what,
                        format!(
                            "column `{}` is already the {prev} column",
                            table.header[col]
                        ),
                    ));
                }
                assigned[col] = Some(what);
                roles[col] = role;
                Ok(())
            };

        let t = find("target.column", spec.target.column())?;
        claim(t, "target", &mut roles, Role::Target)?;
        let classes = match &spec.target {
            TargetSpec::Real { .. } => None,
            TargetSpec::Class { order, .. } => Some(categories_of(
                path,
                table,
                t,
                order.as_deref(),
                "target.order",
                spec,
            )?),
        };
        for c in &spec.categorical {
            let col = find("categorical.column", &c.column)?;
            let categories = categories_of(
                path,
                table,
                col,
                c.order.as_deref(),
                "categorical.order",
                spec,
            )?;
            claim(
                col,
                "categorical",
                &mut roles,
                Role::Categorical {
                    encoding: c.encoding,
                    categories,
                },
            )?;
        }
        for d in &spec.drop {
            let col = find("drop", d)?;
            claim(col, "dropped", &mut roles, Role::Drop)?;
        }
        for s in &spec.standardize {
            let col = find("standardize", s)?;
            if roles[col] != Role::Numeric {
                return Err(Error::config(
                    "standardize",
                    format!("column `{s}` is not a numeric feature column"),
                ));
            }
        }

        let mut feature_names = Vec::new();
        for (name, role) in table.header.iter().zip(&roles) {
            match role {
                Role::Numeric => feature_names.push(name.clone()),
                Role::Categorical {
                    encoding: Encoding::Label,
                    ..
                } => feature_names.push(name.clone()),
                Role::Categorical {
                    encoding: Encoding::OneHot,
                    categories,
                } => feature_names.extend(categories.iter().map(|c| format!("{name}={c}"))),
                Role::Target | Role::Drop => {}
            }
        }
        if spec.intercept {
            feature_names.push("intercept".into());
        }
        Ok(CsvSchema {
            spec: spec.clone(),
            header: table.header.clone(),
            roles,
            classes,
            feature_names,
        })
    }

    /// Encodes every row of `table` (read from `path`, named in errors) into a data set.
    pub fn encode(&self, path: &Path, table: &Table) -> Result<Dataset> {
        Ok(self.encode_rows(path, table, None)?.0)
    }

    /// Whether a (trimmed) cell is missing: empty, or one of the spec's `na_values`.
    fn is_missing(&self, field: &str) -> bool {
        field.is_empty() || self.spec.na_values.iter().any(|v| v == field)
    }

    /// Encodes `table`'s rows; returns the data set and the indices of the rows kept (rows
    /// with a missing value are left out under `missing = "drop"`, rows with a missing label
    /// under `"impute"` too). `groups` (one per row) says which rows are one silo's, for
    /// imputation from that silo's rows only; `None`: one group.
    pub(crate) fn encode_rows(
        &self,
        path: &Path,
        table: &Table,
        groups: Option<&[usize]>,
    ) -> Result<(Dataset, Vec<usize>)> {
        /// A feature cell before imputation.
        #[derive(Clone, Copy)]
        enum Cell {
            Num(f64),
            Cat(usize),
            Missing,
        }
        let missing = self.spec.missing;
        let mut cells: Vec<Vec<Cell>> = Vec::with_capacity(table.rows.len());
        let mut y = Vec::with_capacity(table.rows.len());
        let mut kept = Vec::with_capacity(table.rows.len());
        for (r, (line, record)) in table.rows.iter().enumerate() {
            let at = |col: usize, reason: String| Error::Parse {
                path: path.to_path_buf(),
                line: *line,
                reason: format!("column {} (`{}`): {reason}", col + 1, self.header[col]),
            };
            let gap = |col: usize, field: &str| {
                let what = if field.is_empty() {
                    "empty value".to_string()
                } else {
                    format!("missing value `{field}`")
                };
                at(
                    col,
                    format!(
                        "{what} (set data.source.spec.missing = \"drop\" or \"impute\" to accept \
                         missing values)"
                    ),
                )
            };
            let mut row = Vec::with_capacity(self.roles.len());
            let mut target = None;
            let mut drop_row = false;
            for (col, role) in self.roles.iter().enumerate() {
                let field = record.get(col).unwrap_or("").trim();
                let absent = self.is_missing(field);
                if absent && !matches!(role, Role::Drop) {
                    match (missing, role) {
                        (Missing::Refuse, _) => return Err(gap(col, field)),
                        (Missing::Drop, _) | (Missing::Impute, Role::Target) => {
                            drop_row = true;
                            continue;
                        }
                        (Missing::Impute, _) => {
                            row.push(Cell::Missing);
                            continue;
                        }
                    }
                }
                match role {
                    Role::Drop => {}
                    Role::Numeric => {
                        row.push(Cell::Num(parse_number(field).map_err(|r| at(col, r))?))
                    }
                    Role::Target => {
                        target = Some(match &self.classes {
                            None => parse_number(field).map_err(|r| at(col, r))?,
                            Some(classes) => {
                                code_of(classes, field).map_err(|r| at(col, r))? as f64
                            }
                        })
                    }
                    Role::Categorical { categories, .. } => row.push(Cell::Cat(
                        code_of(categories, field).map_err(|r| at(col, r))?,
                    )),
                }
            }
            if drop_row {
                continue;
            }
            let Some(target) = target else {
                return Err(Error::Parse {
                    path: path.to_path_buf(),
                    line: *line,
                    reason: "no target value".into(),
                });
            };
            cells.push(row);
            y.push(target);
            kept.push(r);
        }
        // The feature columns in `cells` order (every role but target and drop).
        let features: Vec<(usize, &Role)> = self
            .roles
            .iter()
            .enumerate()
            .filter(|(_, r)| !matches!(r, Role::Target | Role::Drop))
            .collect();
        if missing == Missing::Impute {
            let group_of = |i: usize| groups.and_then(|g| g.get(kept[i]).copied()).unwrap_or(0);
            let n_groups = (0..cells.len()).map(group_of).max().map_or(0, |g| g + 1);
            for (k, (col, role)) in features.iter().enumerate() {
                if !cells.iter().any(|c| matches!(c[k], Cell::Missing)) {
                    continue;
                }
                for g in 0..n_groups {
                    let rows: Vec<usize> = (0..cells.len()).filter(|&i| group_of(i) == g).collect();
                    let fill = match role {
                        Role::Categorical { categories, .. } => {
                            let mut counts = vec![0usize; categories.len()];
                            for &i in &rows {
                                if let Cell::Cat(c) = cells[i][k] {
                                    counts[c] += 1;
                                }
                            }
                            // The most frequent category; ties go to the first in order.
                            let best = counts.iter().max().copied().unwrap_or(0);
                            (best > 0).then(|| {
                                Cell::Cat(counts.iter().position(|&c| c == best).unwrap_or(0))
                            })
                        }
                        _ => {
                            let xs: Vec<f64> = rows
                                .iter()
                                .filter_map(|&i| match cells[i][k] {
                                    Cell::Num(v) => Some(v),
                                    _ => None,
                                })
                                .collect();
                            (!xs.is_empty())
                                .then(|| Cell::Num(xs.iter().sum::<f64>() / xs.len() as f64))
                        }
                    };
                    for &i in &rows {
                        if matches!(cells[i][k], Cell::Missing) {
                            cells[i][k] = fill.ok_or_else(|| {
                                Error::data(
                                    path.display().to_string(),
                                    format!(
                                        "column {} (`{}`): every value of this silo's rows is \
                                         missing; there is nothing to impute from",
                                        col + 1,
                                        self.header[*col]
                                    ),
                                )
                            })?;
                        }
                    }
                }
            }
        }
        let p = self.feature_names.len();
        let n = cells.len();
        let mut x = Vec::with_capacity(n * p);
        for row in &cells {
            for ((_, role), cell) in features.iter().zip(row) {
                match (role, *cell) {
                    (
                        Role::Categorical {
                            encoding: Encoding::OneHot,
                            categories,
                        },
                        Cell::Cat(k),
                    ) => x.extend((0..categories.len()).map(|j| f64::from(u8::from(j == k)))),
                    (_, Cell::Cat(k)) => x.push(k as f64),
                    (_, Cell::Num(v)) => x.push(v),
                    (_, Cell::Missing) => x.push(f64::NAN),
                }
            }
            if self.spec.intercept {
                x.push(1.0);
            }
        }
        let x = Matrix::from_vec(n, p, x).ok_or_else(|| {
            Error::Dimension(format!(
                "{}: encoded rows do not have {p} features",
                path.display()
            ))
        })?;
        let target = match &self.classes {
            Some(names) => Target::Classes {
                names: names.clone(),
            },
            None => Target::Real,
        };
        if n == 0 && !table.rows.is_empty() {
            return Err(Error::data(
                path.display().to_string(),
                "every row has a missing value: no row is left",
            ));
        }
        Ok((
            Dataset::new(x, y, target, self.feature_names.clone())?,
            kept,
        ))
    }
}

/// The fitted category list of column `col`: `order` if given (checked for repeats and for
/// values the file holds outside it), else the sorted distinct values.
fn categories_of(
    path: &Path,
    table: &Table,
    col: usize,
    order: Option<&[String]>,
    field: &str,
    spec: &CsvSpec,
) -> Result<Vec<String>> {
    // A missing value is no category; under `missing = "refuse"` encoding reports it.
    let skip_missing = |v: &str| {
        (v.is_empty() && spec.missing != Missing::Refuse) || spec.na_values.iter().any(|n| n == v)
    };
    match order {
        Some(order) => {
            let set: BTreeSet<&str> = order.iter().map(String::as_str).collect();
            if set.len() != order.len() || order.is_empty() {
                return Err(Error::config(
                    field,
                    format!(
                        "order for `{}` is empty or repeats a value",
                        table.header[col]
                    ),
                ));
            }
            for (line, r) in &table.rows {
                let v = r.get(col).unwrap_or("").trim();
                if !set.contains(v) && !skip_missing(v) {
                    return Err(Error::Parse {
                        path: path.to_path_buf(),
                        line: *line,
                        reason: format!(
                            "column {} (`{}`): value `{v}` is not one of the given categories {order:?}",
                            col + 1,
                            table.header[col]
                        ),
                    });
                }
            }
            Ok(order.to_vec())
        }
        None => {
            let mut set = BTreeSet::new();
            for (line, r) in &table.rows {
                let v = r.get(col).unwrap_or("").trim();
                if skip_missing(v) {
                    continue;
                }
                if v.is_empty() {
                    return Err(Error::Parse {
                        path: path.to_path_buf(),
                        line: *line,
                        reason: format!(
                            "column {} (`{}`): empty value",
                            col + 1,
                            table.header[col]
                        ),
                    });
                }
                set.insert(v);
            }
            Ok(set.into_iter().map(String::from).collect())
        }
    }
}

fn code_of(categories: &[String], field: &str) -> std::result::Result<usize, String> {
    categories.iter().position(|c| c == field).ok_or_else(|| {
        format!(
            "unknown category `{field}` (known: {})",
            categories.join(", ")
        )
    })
}

fn parse_number(field: &str) -> std::result::Result<f64, String> {
    if field.is_empty() {
        return Err("empty value".into());
    }
    let v: f64 = field
        .parse()
        .map_err(|_| format!("cannot parse `{field}` as a number"))?;
    if !v.is_finite() {
        return Err(format!("value `{field}` is not finite"));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &tempfile::TempDir, name: &str, content: &str) -> std::path::PathBuf {
        let p = dir.path().join(name);
        std::fs::write(&p, content).unwrap();
        p
    }

    fn spec() -> CsvSpec {
        CsvSpec {
            target: TargetSpec::Class {
                column: "y".into(),
                order: None,
            },
            categorical: vec![CategoricalSpec::label("c"), CategoricalSpec::one_hot("h")],
            standardize: vec!["a".into()],
            drop: vec!["id".into()],
            intercept: true,
            scaling: Default::default(),
            na_values: vec![],
            missing: Default::default(),
        }
    }

    #[test]
    fn encodes_label_one_hot_target_and_intercept() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            &dir,
            "t.csv",
            "id,a,c,h,y\n1, 2.5 ,b,u,no\n2,-1,a,v,yes\n3,0,b,v,no\n",
        );
        let (d, schema) = load_csv(&p, &spec()).unwrap();
        assert_eq!(d.feature_names(), &["a", "c", "h=u", "h=v", "intercept"]);
        assert_eq!(d.row(0), (&[2.5, 1.0, 1.0, 0.0, 1.0][..], 0.0));
        assert_eq!(d.row(1), (&[-1.0, 0.0, 0.0, 1.0, 1.0][..], 1.0));
        assert_eq!(
            d.target(),
            &Target::Classes {
                names: vec!["no".into(), "yes".into()]
            }
        );
        assert_eq!(schema.categories("h").unwrap(), &["u", "v"]);
        assert_eq!(schema.classes().unwrap(), &["no", "yes"]);

        // The fitted schema refuses a category it has not seen, naming file, line and column.
        let q = write(&dir, "u.csv", "id,a,c,h,y\n1,0,a,u,no\n2,0,z,u,no\n");
        let err = schema.load(&q).unwrap_err().to_string();
        assert!(
            err.contains("u.csv:3:") && err.contains("column 3 (`c`)") && err.contains("`z`"),
            "{err}"
        );
    }

    #[test]
    fn given_orders_are_kept_and_enforced() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(&dir, "t.csv", "a,y\n1,lo\n2,hi\n3,mid\n");
        let mut s = CsvSpec {
            target: TargetSpec::Class {
                column: "y".into(),
                order: Some(vec!["lo".into(), "mid".into(), "hi".into()]),
            },
            categorical: vec![],
            standardize: vec![],
            drop: vec![],
            intercept: false,
            scaling: Default::default(),
            na_values: vec![],
            missing: Default::default(),
        };
        let (d, _) = load_csv(&p, &s).unwrap();
        assert_eq!(d.y(), &[0.0, 2.0, 1.0]);
        s.target = TargetSpec::Class {
            column: "y".into(),
            order: Some(vec!["lo".into(), "hi".into()]),
        };
        let err = load_csv(&p, &s).unwrap_err().to_string();
        assert!(err.contains("t.csv:4:") && err.contains("`mid`"), "{err}");
    }

    #[test]
    fn spec_errors_name_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(&dir, "t.csv", "a,c,y\n1,x,2\n");
        let mut s = CsvSpec {
            target: TargetSpec::Real {
                column: "nope".into(),
            },
            categorical: vec![],
            standardize: vec![],
            drop: vec![],
            intercept: false,
            scaling: Default::default(),
            na_values: vec![],
            missing: Default::default(),
        };
        let err = load_csv(&p, &s).unwrap_err().to_string();
        assert!(
            err.contains("target.column") && err.contains("`nope`"),
            "{err}"
        );
        s.target = TargetSpec::Real { column: "y".into() };
        s.categorical = vec![CategoricalSpec::label("c")];
        s.standardize = vec!["c".into()];
        let err = load_csv(&p, &s).unwrap_err().to_string();
        assert!(err.contains("standardize"), "{err}");
        s.standardize = vec![];
        s.drop = vec!["y".into()];
        let err = load_csv(&p, &s).unwrap_err().to_string();
        assert!(err.contains("already the target"), "{err}");
    }

    /// Every error kind names the right line, with LF and CRLF line ends, past a blank line.
    #[test]
    fn line_numbers_are_right_for_every_error_and_line_end() {
        let dir = tempfile::tempdir().unwrap();
        let spec = |order: Option<Vec<String>>| CsvSpec {
            target: TargetSpec::Class {
                column: "y".into(),
                order: None,
            },
            categorical: vec![CategoricalSpec {
                column: "c".into(),
                encoding: Encoding::OneHot,
                order,
            }],
            standardize: vec![],
            drop: vec!["h".into()],
            intercept: false,
            scaling: Default::default(),
            na_values: vec![],
            missing: Default::default(),
        };
        let xy = Some(vec!["x".to_string(), "y".to_string()]);
        // (the bad row, the category order of `c`, what the error says)
        type Case = (&'static [u8], Option<Vec<String>>, &'static str);
        let cases: [Case; 7] = [
            (b"4,y,h1", None, "3 fields"),
            (b"4,y,h1,q,9", None, "5 fields"),
            (b",y,h1,q", None, "empty value"),
            (b"zz,y,h1,q", None, "cannot parse `zz`"),
            (b"4,,h1,q", None, "empty value"),
            (b"4,w,h1,q", xy, "not one of the given categories"),
            (b"4,y,h1,\xff", None, "not valid UTF-8"),
        ];
        for eol in ["\n", "\r\n"] {
            for (k, (bad, order, want)) in cases.iter().enumerate() {
                // The bad row is on line 5 (line 3 is blank).
                let mut text = Vec::new();
                for l in [
                    &b"a,c,h,y"[..],
                    b"1,x,h1,p",
                    b"",
                    b"2,y,h2,q",
                    bad,
                    b"3,x,h1,p",
                ] {
                    text.extend_from_slice(l);
                    text.extend_from_slice(eol.as_bytes());
                }
                let p = dir.path().join(format!("t{k}.csv"));
                std::fs::write(&p, &text).unwrap();
                let err = load_csv(&p, &spec(order.clone())).unwrap_err().to_string();
                assert!(
                    err.contains(&format!("t{k}.csv:5:")) && err.contains(want),
                    "{eol:?}: {err}"
                );
            }
            // An empty silo name on line 2, right after the header.
            let p = dir.path().join("silo.csv");
            std::fs::write(&p, ["a,c,h,y", "1,x,,p", "2,y,h2,q", ""].join(eol)).unwrap();
            let err = crate::data::silos::by_column(&p, &spec(None), "h")
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("silo.csv:2:") && err.contains("empty silo name"),
                "{eol:?}: {err}"
            );
            // A repeated header column is on line 1.
            std::fs::write(&p, ["a,a,h,y", "1,x,h,p", ""].join(eol)).unwrap();
            let err = load_csv(&p, &spec(None)).unwrap_err().to_string();
            assert!(err.contains("silo.csv:1:"), "{eol:?}: {err}");
        }
    }
}

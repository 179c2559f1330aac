//! Data that arrive already split into silos, as real cross-silo data do: one CSV file with a
//! column naming each row's silo (`partition = { kind = "by-column", column = "hospital" }`),
//! or one CSV file per silo (`source = { kind = "csv-silos", paths = [...] }`).
//!
//! Decisions:
//! * by column: one silo per distinct value of the column, silos in sorted (byte) order of
//!   the values, rows in file order; the column is never a feature (it is dropped as if the
//!   spec listed it under `drop`). An empty value is an error naming file, line and column.
//! * one file per silo: every file must have the first file's header (an error names the file
//!   and its header line otherwise). Category orders (categorical columns, a class target) are
//!   fitted on all files together, so a category has one code in every silo; a value outside
//!   a given `order` is reported with its own file and line (each file is checked alone
//!   first).

use std::path::{Path, PathBuf};

use super::Dataset;
use super::csv::{CsvSchema, CsvSpec, Table, read_table};
use crate::{Error, Result};

/// One data set per distinct value of `column` (sorted), those values, and the fitted schema
/// (the column in it dropped).
#[allow(clippy::type_complexity)]
pub fn by_column(
    path: &Path,
    spec: &CsvSpec,
    column: &str,
) -> Result<(Vec<Dataset>, Vec<String>, CsvSchema)> {
    let table = read_table(path)?;
    let col = table
        .header
        .iter()
        .position(|h| h == column)
        .ok_or_else(|| {
            Error::config(
                "partition.column",
                format!(
                    "column `{column}` is not in the header of {} (columns: {})",
                    path.display(),
                    table.header.join(", ")
                ),
            )
        })?;
    if spec.target.column() == column {
        return Err(Error::config(
            "partition.column",
            format!("column `{column}` is the target; name the column that holds the silo"),
        ));
    }
    let mut spec = spec.clone();
    if !spec.drop.iter().any(|d| d == column) {
        spec.drop.push(column.to_string());
    }
    let schema = CsvSchema::fit(path, &spec, &table)?;
    let mut labels = Vec::with_capacity(table.rows.len());
    for (line, record) in &table.rows {
        let v = record.get(col).unwrap_or("").trim();
        if v.is_empty() {
            return Err(Error::Parse {
                path: path.to_path_buf(),
                line: *line,
                reason: format!(
                    "column {} (`{column}`): empty silo name; every row needs its silo",
                    col + 1
                ),
            });
        }
        labels.push(v.to_string());
    }
    let mut names = labels.clone();
    names.sort();
    names.dedup();
    // Each row's silo, so that a missing value is imputed from its own silo's rows only.
    let groups: Vec<usize> = labels
        .iter()
        .map(|l| names.binary_search(l).unwrap_or(0))
        .collect();
    let (data, kept) = schema.encode_rows(path, &table, Some(&groups))?;
    let parts = (0..names.len())
        .map(|g| {
            let idx: Vec<usize> = (0..kept.len()).filter(|&i| groups[kept[i]] == g).collect();
            data.subset(&idx)
        })
        .collect();
    Ok((parts, names, schema))
}

/// One data set per file, encoded with one schema fitted on all of them.
pub fn csv_files(paths: &[PathBuf], spec: &CsvSpec) -> Result<(Vec<Dataset>, CsvSchema)> {
    let first = paths.first().ok_or_else(|| {
        Error::config(
            "data.source.paths",
            "name at least one CSV file (one per silo)",
        )
    })?;
    let tables: Vec<Table> = paths.iter().map(|p| read_table(p)).collect::<Result<_>>()?;
    for (p, t) in paths.iter().zip(&tables).skip(1) {
        if t.header != tables[0].header {
            return Err(Error::Parse {
                path: p.clone(),
                line: t.header_line,
                reason: format!(
                    "header {:?} differs from the header {:?} of {}",
                    t.header,
                    tables[0].header,
                    first.display()
                ),
            });
        }
    }
    // Each file alone first: a value outside a given category order is reported in its file.
    for (p, t) in paths.iter().zip(&tables) {
        CsvSchema::fit(p, spec, t)?;
    }
    let all = Table {
        header: tables[0].header.clone(),
        header_line: tables[0].header_line,
        rows: tables.iter().flat_map(|t| t.rows.iter().cloned()).collect(),
    };
    let schema = CsvSchema::fit(first, spec, &all)?;
    let parts = paths
        .iter()
        .zip(&tables)
        .map(|(p, t)| schema.encode(p, t))
        .collect::<Result<_>>()?;
    Ok((parts, schema))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Target;
    use crate::data::csv::TargetSpec;

    fn spec() -> CsvSpec {
        CsvSpec {
            target: TargetSpec::Class {
                column: "y".into(),
                order: None,
            },
            categorical: vec![],
            standardize: vec![],
            drop: vec![],
            intercept: false,
            scaling: Default::default(),
            na_values: vec![],
            missing: Default::default(),
        }
    }

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn by_column_groups_rows_by_sorted_silo_and_drops_the_column() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "d.csv",
            "a,site,y\n1,north,p\n2,south,n\n3,north,n\n4,east,p\n",
        );
        let (parts, names, _) = by_column(&p, &spec(), "site").unwrap();
        assert_eq!(names, ["east", "north", "south"]);
        assert_eq!(parts.len(), 3);
        assert_eq!(parts[1].x().as_slice(), &[1.0, 3.0]);
        // classes sorted: n = 0, p = 1
        assert_eq!(parts[1].y(), &[1.0, 0.0]);
        assert_eq!(parts[0].feature_names(), ["a"]);
        assert_eq!(parts[2].x().as_slice(), &[2.0]);
    }

    #[test]
    fn by_column_errors_name_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "d.csv", "a,site,y\n1,north,p\n2, ,n\n");
        let e = by_column(&p, &spec(), "site").unwrap_err().to_string();
        assert!(
            e.contains("d.csv:3:") && e.contains("column 2 (`site`)"),
            "{e}"
        );
        let e = by_column(&p, &spec(), "hospital").unwrap_err().to_string();
        assert!(
            e.contains("`hospital` is not in the header") && e.contains("a, site, y"),
            "{e}"
        );
    }

    #[test]
    fn files_share_one_category_code_and_name_their_own_errors() {
        let dir = tempfile::tempdir().unwrap();
        let a = write(dir.path(), "a.csv", "x,y\n1,cat\n2,cat\n");
        let b = write(dir.path(), "b.csv", "x,y\n3,ant\n4,cat\n5,bee\n");
        let (parts, schema) = csv_files(&[a.clone(), b.clone()], &spec()).unwrap();
        assert_eq!(schema.classes().unwrap(), ["ant", "bee", "cat"]);
        assert_eq!(parts[0].y(), &[2.0, 2.0]);
        assert_eq!(parts[1].y(), &[0.0, 2.0, 1.0]);
        assert_eq!(
            parts[1].target(),
            &Target::Classes {
                names: vec!["ant".into(), "bee".into(), "cat".into()]
            }
        );
        let c = write(dir.path(), "c.csv", "x,z\n1,cat\n");
        let e = csv_files(&[a.clone(), c], &spec()).unwrap_err().to_string();
        assert!(e.contains("c.csv") && e.contains("differs"), "{e}");
        let d = write(dir.path(), "d.csv", "x,y\n1,cat\noops,cat\n");
        let e = csv_files(&[a, d], &spec()).unwrap_err().to_string();
        assert!(
            e.contains("d.csv:3:") && e.contains("column 1 (`x`)"),
            "{e}"
        );
    }

    /// `missing = "impute"` fills a silo's gap from that silo's rows only; `"drop"` leaves the
    /// row out of its own silo; a missing label drops its row under both.
    #[test]
    fn imputation_reads_only_the_silos_own_rows() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "d.csv",
            "a,site,y\n1,north,p\nNA,north,n\n3,north,n\n100,south,p\n200,south,n\n5,south,\n",
        );
        let mut s = spec();
        s.na_values = vec!["NA".into()];
        s.missing = crate::data::csv::Missing::Impute;
        let (parts, _, _) = by_column(&p, &s, "site").unwrap();
        // north's mean (1 + 3)/2 = 2, not the pooled mean of 1, 3, 100, 200.
        assert_eq!(parts[0].x().as_slice(), &[1.0, 2.0, 3.0]);
        // south's row without a label is left out.
        assert_eq!(parts[1].x().as_slice(), &[100.0, 200.0]);
        s.missing = crate::data::csv::Missing::Drop;
        let (parts, _, _) = by_column(&p, &s, "site").unwrap();
        assert_eq!(parts[0].x().as_slice(), &[1.0, 3.0]);
        assert_eq!(parts[0].y(), &[1.0, 0.0]);
        s.missing = crate::data::csv::Missing::Refuse;
        let p = write(dir.path(), "d.csv", "a,site,y\n1,north,p\nNA,north,n\n");
        let e = by_column(&p, &s, "site").unwrap_err().to_string();
        assert!(
            e.contains("d.csv:3:") && e.contains("missing value `NA`"),
            "{e}"
        );
    }
}

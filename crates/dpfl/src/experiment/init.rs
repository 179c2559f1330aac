//! `dpfl init`: an experiment file for a user's own CSV, with private defaults, so that
//! nobody writes a data-source spec by hand.
//!
//! Column roles are read off the file: the label column is a class target if any value is not
//! a number or it holds at most [`MAX_INTEGER_CLASSES`] distinct integers (else a real target,
//! least squares); every other non-numeric column is one-hot encoded; numeric columns are
//! standardised (statistics of the training rows; as in the paper this preprocessing is not
//! itself private, which the file says). The silo column, if any, partitions by value.
//!
//! Private defaults: ε = 1, δ = "1/n^2" (n = a silo's training records), a public clip bound
//! L = 1 (every per-example gradient is clipped at it, so the bound holds for any record), the
//! noise calibrated by the accountant, each silo's ledger enforcing its budget.

use std::collections::BTreeSet;
use std::path::Path;

use crate::data::csv::read_table;
use crate::{Error, Result};

/// Up to this many distinct integer labels are classes; more are a real target.
pub const MAX_INTEGER_CLASSES: usize = 20;

fn is_number(s: &str) -> bool {
    s.trim().parse::<f64>().is_ok_and(f64::is_finite)
}

/// The experiment TOML for `data` (the path is written as given), predicting `label`, with
/// silos from `silo_column` (else 4 IID silos).
pub fn init_experiment(data: &Path, label: &str, silo_column: Option<&str>) -> Result<String> {
    let table = read_table(data)?;
    let col = |name: &str, field: &str| -> Result<usize> {
        table.header.iter().position(|h| h == name).ok_or_else(|| {
            Error::config(
                field,
                format!(
                    "column `{name}` is not in the header of {} (columns: {})",
                    data.display(),
                    table.header.join(", ")
                ),
            )
        })
    };
    let y = col(label, "--label")?;
    let silo = silo_column.map(|s| col(s, "--silo-column")).transpose()?;
    if silo == Some(y) {
        return Err(Error::config(
            "--silo-column",
            "the silo column cannot be the label",
        ));
    }
    if table.rows.is_empty() {
        return Err(Error::Parse {
            path: data.to_path_buf(),
            line: table.header_line,
            reason: "no data rows after the header".into(),
        });
    }
    let values = |c: usize| {
        table
            .rows
            .iter()
            .map(move |(_, r)| r.get(c).unwrap_or("").trim())
    };
    let numeric = |c: usize| values(c).all(is_number);
    let labels: BTreeSet<&str> = values(y).collect();
    let integer = values(y).all(|v| v.parse::<f64>().is_ok_and(|x| x.fract() == 0.0));
    let class = !numeric(y) || (integer && labels.len() <= MAX_INTEGER_CLASSES);
    let (mut categorical, mut standardize) = (vec![], vec![]);
    for (c, name) in table.header.iter().enumerate() {
        if c == y || Some(c) == silo {
            continue;
        }
        if numeric(c) {
            standardize.push(name.clone());
        } else {
            categorical.push(name.clone());
        }
    }
    let quote = |v: &[String]| {
        let q: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
        format!("[{}]", q.join(", "))
    };
    let (target, model, model_note) = match (class, labels.len()) {
        (true, 2) => (
            "class",
            "logistic",
            "binary logistic regression (two classes)",
        ),
        (true, _) => ("class", "softmax", "multinomial logistic regression"),
        (false, _) => ("real", "linear", "least squares (a real-valued label)"),
    };
    let partition = match silo_column {
        Some(s) => format!(
            "partition = {{ kind = \"by-column\", column = {s:?} }}   # one silo per value of `{s}`"
        ),
        None => {
            "partition = { kind = \"iid\", silos = 4 }   # no silo column given: 4 random silos"
                .into()
        }
    };
    let name = data
        .file_stem()
        .map_or("my data".into(), |s| s.to_string_lossy().to_string());
    let cats: Vec<String> = categorical
        .iter()
        .map(|c| format!("  {{ column = {c:?}, encoding = \"one-hot\" }},"))
        .collect();
    Ok(format!(
        r#"# Written by `dpfl init` for {file} ({rows} rows). Check it, then run
#   dpfl config check THIS_FILE && dpfl train --config THIS_FILE --out results/
name = "{name}"
rounds = 50
seed = 1                       # remove for OS-seeded noise in a real deployment

[data]
{partition}
test_fraction = 0.2            # of each silo's rows, held out for testing
# Standardisation (and the category lists) use the pooled training rows and are not
# themselves private: with a real federation, fix them from public knowledge instead.

[data.source]
kind = "csv"
path = {path:?}                # relative paths are relative to this file

[data.source.spec]
target = {{ kind = "{target}", column = {label:?} }}
categorical = [
{cats}
]
standardize = {standardize}
intercept = true

[model]
kind = "{model}"               # {model_note}

[privacy]
epsilon = 1.0                  # each silo's budget: its messages are (epsilon, delta)-DP w.r.t. any one of its records
delta = "1/n^2"                # n = the silo's training records
lipschitz = 1.0                # public clip bound L: every per-example gradient is clipped at L
enforce_budget = true          # each silo's ledger refuses any round past its budget

[[algorithms]]
label = "ISRL-DP MB-SGD"
kind = "mb-sgd"
calibration = "accountant"     # the smallest noise the tightest sound accountant certifies for (epsilon, delta)
step_size = 0.1
batch_size = 16

[[algorithms]]
label = "MB-SGD (non-private, for comparison)"
kind = "mb-sgd"
step_size = 0.1
batch_size = 16
"#,
        file = data.display(),
        rows = table.rows.len(),
        path = data.display().to_string(),
        label = label,
        cats = cats.join("\n"),
        standardize = quote(&standardize),
    ))
}

/// `dpfl config check`: everything `run` checks before its first round, without training:
/// the spec's fields, the data (loaded and split as trial 1 would be), the model, and every
/// algorithm's calibration. Returns a short report: the silos and each algorithm's noise.
pub fn check_experiment(spec: &super::ExperimentSpec, data_dir: Option<&Path>) -> Result<String> {
    spec.validate()?;
    let mut master = super::master_rng(spec)?;
    let (trial, _) = super::next_trial(spec, data_dir, &mut master)?;
    let ctx = super::build_context(spec, &trial)?;
    let mut out = crate::data::describe_silos(&trial.silos);
    for (a, entry) in spec.algorithms.iter().enumerate() {
        let label = entry.label();
        let built = entry.spec.build(&ctx).map_err(|e| match e {
            Error::Config { field, reason } => Error::Config {
                field: format!("algorithms[{a}] ({label}): {field}"),
                reason,
            },
            other => other,
        })?;
        let sigma = built
            .calibration
            .iter()
            .map(|c| c.sigma)
            .fold(0.0, f64::max);
        out += &format!("\nalgorithm {a} ({label}): builds; noise sigma up to {sigma:.6}");
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::ExperimentSpec;

    #[test]
    fn init_writes_a_spec_that_parses_and_loads() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("h.csv");
        let mut text = String::from("age,sex,hospital,outcome\n");
        for i in 0..40 {
            let h = ["a", "b", "c"][i % 3];
            let s = ["f", "m"][i % 2];
            text += &format!(
                "{},{s},{h},{}\n",
                20 + i,
                if i % 4 == 0 { "yes" } else { "no" }
            );
        }
        std::fs::write(&p, text).unwrap();
        let toml = init_experiment(&p, "outcome", Some("hospital")).unwrap();
        assert!(toml.contains("kind = \"logistic\""), "{toml}");
        assert!(toml.contains("standardize = [\"age\"]"), "{toml}");
        assert!(
            toml.contains("{ column = \"sex\", encoding = \"one-hot\" }"),
            "{toml}"
        );
        let spec = ExperimentSpec::from_toml(&toml, "init").unwrap();
        let mut rng =
            dpfl_privacy::DpRng::new(Some(1), dpfl_privacy::rng::Purpose::Data, 0).unwrap();
        let silos = spec.data.load(None, &mut rng).unwrap();
        assert_eq!(silos.len(), 3);
        // 14 rows in hospital a; ⌈0.2·14⌉ = 3 test rows.
        assert_eq!(silos[0].train.len() + silos[0].test.len(), 14);
        assert_eq!(silos[0].test.len(), 3);
        // age (standardised), sex=f, sex=m, intercept
        assert_eq!(silos[0].train.num_features(), 4);

        let e = init_experiment(&p, "outcome", Some("ward"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--silo-column") && e.contains("`ward`"), "{e}");
    }
}

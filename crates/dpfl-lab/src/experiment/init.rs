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

use dpfl::data::csv::read_table;
use dpfl::{Error, Result};

/// Up to this many distinct integer labels are classes; more are a real target.
pub const MAX_INTEGER_CLASSES: usize = 20;

/// Cells `dpfl init` reads as missing values (besides empty ones): the codes spreadsheets,
/// R and pandas write.
pub const NA_VALUES: [&str; 8] = ["NA", "N/A", "na", "n/a", "NaN", "nan", "null", "NULL"];

fn is_number(s: &str) -> bool {
    s.trim().parse::<f64>().is_ok_and(f64::is_finite)
}

/// The experiment TOML for `data` (the path is written as given), predicting `label`, with
/// silos from `silo_column` (else 4 IID silos).
pub fn init_experiment(data: &Path, label: &str, silo_column: Option<&str>) -> Result<String> {
    Ok(init_with_notes(data, label, silo_column)?.text)
}

/// What `dpfl init` writes, and what it tells the user about it.
pub struct Init {
    /// The experiment TOML.
    pub text: String,
    /// One line each: what init decided that the user should know (stderr).
    pub notes: Vec<String>,
}

/// A TOML array of strings.
fn toml_list(v: &[&str]) -> String {
    let q: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", q.join(", "))
}

/// `x` to 6 significant digits (written into the file as public statistics).
fn sig6(x: f64) -> f64 {
    format!("{x:.5e}").parse().unwrap_or(x)
}

/// [`init_experiment`] with its notes. Every category order (categorical columns, a class
/// target) and every standardised column's mean and scale are written into the file, fitted
/// on all of `data`'s rows, so that a silo making its own shard (`dpfl data shard`) codes and
/// scales its rows as the others do and as the saved model does.
pub fn init_with_notes(data: &Path, label: &str, silo_column: Option<&str>) -> Result<Init> {
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
    let is_na = |v: &str| v.is_empty() || NA_VALUES.contains(&v);
    // The present (not missing) values of a column.
    let values = |c: usize| {
        table
            .rows
            .iter()
            .map(move |(_, r)| r.get(c).unwrap_or("").trim())
            .filter(move |v| !is_na(v))
    };
    let mut notes = Vec::new();
    // Missing cells per column: (line, cell) of each.
    let mut gaps: Vec<(usize, Vec<(usize, &str)>)> = Vec::new();
    for c in 0..table.header.len() {
        if Some(c) == silo {
            continue;
        }
        let g: Vec<(usize, &str)> = table
            .rows
            .iter()
            .map(|(line, r)| (*line, r.get(c).unwrap_or("").trim()))
            .filter(|(_, v)| is_na(v))
            .collect();
        if !g.is_empty() {
            gaps.push((c, g));
        }
    }
    // A column is numeric when its present values are; one with a few other cells among
    // many numbers is a typo or an unlisted missing-value code, never a category.
    let numeric = |c: usize| -> Result<bool> {
        let (mut num, mut other) = (0usize, Vec::new());
        for (line, r) in &table.rows {
            let v = r.get(c).unwrap_or("").trim();
            if is_na(v) {
                continue;
            }
            if is_number(v) {
                num += 1;
            } else {
                other.push((*line, v));
            }
        }
        if !other.is_empty() && num >= 4 * other.len() {
            let shown: Vec<String> = other
                .iter()
                .take(5)
                .map(|(l, v)| format!("`{v}` (line {l})"))
                .collect();
            return Err(Error::data(
                format!("{}: column `{}`", data.display(), table.header[c]),
                format!(
                    "{num} numbers but {} other cell{}: {}{}; correct them, or make them empty \
                     (a missing value) — a column of numbers is not read as categories",
                    other.len(),
                    if other.len() == 1 { "" } else { "s" },
                    shown.join(", "),
                    if other.len() > 5 { ", …" } else { "" }
                ),
            ));
        }
        Ok(other.is_empty() && num > 0)
    };
    let labels: BTreeSet<&str> = values(y).collect();
    let integer = values(y).all(|v| v.parse::<f64>().is_ok_and(|x| x.fract() == 0.0));
    let class = !numeric(y)? || (integer && labels.len() <= MAX_INTEGER_CLASSES);
    let (mut categorical, mut standardize) = (vec![], vec![]);
    for (c, name) in table.header.iter().enumerate() {
        if c == y || Some(c) == silo {
            continue;
        }
        if numeric(c)? {
            standardize.push(name.clone());
        } else {
            categorical.push(name.clone());
        }
    }
    let quote = |v: &[String]| toml_list(&v.iter().map(String::as_str).collect::<Vec<_>>());
    let missing_lines = if gaps.is_empty() {
        String::new()
    } else {
        let per_column: Vec<String> = gaps
            .iter()
            .map(|(c, g)| {
                let lines: Vec<String> = g.iter().take(3).map(|(l, _)| l.to_string()).collect();
                format!(
                    "{} ({}: line{} {}{})",
                    table.header[*c],
                    g.len(),
                    if g.len() == 1 { "" } else { "s" },
                    lines.join(", "),
                    if g.len() > 3 { ", …" } else { "" }
                )
            })
            .collect();
        notes.push(format!(
            "warning: missing values in {}: wrote missing = \"drop\" (those rows are left out); \
             \"impute\" fills them from each silo's own rows, \"refuse\" stops at the first",
            per_column.join(", ")
        ));
        let codes: BTreeSet<&str> = gaps
            .iter()
            .flat_map(|(_, g)| g.iter().map(|(_, v)| *v))
            .filter(|v| !v.is_empty())
            .collect();
        format!(
            "na_values = {}           # cells that mean \"missing\" (besides empty ones)\n\
             missing = \"drop\"             # a row with a missing value is left out; \"impute\": each \
             silo's own mean / most frequent value; \"refuse\": an error\n",
            toml_list(&codes.into_iter().collect::<Vec<_>>())
        )
    };
    let order_of = |c: usize| -> Vec<&str> {
        let set: BTreeSet<&str> = values(c).collect();
        set.into_iter().collect()
    };
    let scaling: Vec<String> = standardize
        .iter()
        .map(|name| {
            let c = table.header.iter().position(|h| h == name).unwrap_or(0);
            let xs: Vec<f64> = values(c).filter_map(|v| v.parse().ok()).collect();
            let n = xs.len().max(1) as f64;
            let mean = xs.iter().sum::<f64>() / n;
            let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n;
            let sd = var.sqrt();
            let scale = if sd > 0.0 { sig6(sd) } else { 1.0 };
            format!(
                "{name:?} = {{ mean = {:?}, scale = {scale:?} }}",
                sig6(mean)
            )
        })
        .collect();
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
        .map(|c| {
            let col = table.header.iter().position(|h| h == c).unwrap_or(0);
            format!(
                "  {{ column = {c:?}, encoding = \"one-hot\", order = {} }},",
                toml_list(&order_of(col))
            )
        })
        .collect();
    let target_order = if class {
        format!(", order = {}", toml_list(&order_of(y)))
    } else {
        String::new()
    };
    let ordered: Vec<&str> = categorical
        .iter()
        .map(String::as_str)
        .chain(class.then_some(label))
        .collect();
    if !ordered.is_empty() {
        notes.push(format!(
            "wrote the category order of {} (every value in {}): a value outside it is refused",
            ordered.join(", "),
            data.display()
        ));
    }
    if !standardize.is_empty() {
        notes.push(format!(
            "wrote the mean and scale of {} (all rows of {}; not private: replace them with \
             public values if you have them)",
            standardize.join(", "),
            data.display()
        ));
    }
    // The smallest silo's training rows bound the batch (a batch cannot exceed them).
    let silo_rows: Vec<usize> = match silo {
        Some(c) => {
            let mut counts = std::collections::BTreeMap::new();
            for (_, r) in &table.rows {
                *counts
                    .entry(r.get(c).unwrap_or("").trim())
                    .or_insert(0usize) += 1;
            }
            counts.into_values().collect()
        }
        None => vec![table.rows.len() / 4],
    };
    let train_rows = silo_rows
        .iter()
        .map(|&n| n - (0.2 * n as f64 - 1e-9).ceil().max(0.0) as usize)
        .min()
        .unwrap_or(1);
    let batch = train_rows.clamp(1, 16);
    let (rounds, step) = schedule(
        model,
        standardize.len() + categorical.len() + 1,
        train_rows,
        batch,
    );
    notes.push(format!(
        "rounds = {rounds}, step_size = {step}: {EPOCHS} passes over the smallest silo's \
         {train_rows} training rows at {batch} per round, step 1/(curvature x features) (docs/own-data.md)"
    ));
    let text = format!(
        r#"# Written by `dpfl init` for {file} ({rows} rows). Check it, then run
#   dpfl config check THIS_FILE && dpfl train --config THIS_FILE --out results/
name = "{name}"
rounds = {rounds}
seed = 1                       # reproducible split and noise; `dpfl federate` puts it into federation files only with --seeded

[data]
{partition}
test_fraction = 0.2            # of each silo's rows, held out for testing
# The category orders and the standardisation statistics below were read from every row of
# the file and are not themselves private: with a real federation, take them from public
# knowledge instead. Each silo's shard (`dpfl data shard`) and the saved models use them.

[data.source]
kind = "csv"
path = {path:?}                # relative paths are relative to this file

[data.source.spec]
target = {{ kind = "{target}", column = {label:?}{target_order} }}
categorical = [
{cats}
]
standardize = {standardize}
intercept = true
{missing_lines}
[data.source.spec.scaling]     # public standardisation: (x - mean) / scale
{scaling}

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
step_size = {step:?}
batch_size = {batch}

[[algorithms]]
label = "MB-SGD (non-private, for comparison)"
kind = "mb-sgd"
step_size = {step:?}
batch_size = {batch}
"#,
        file = data.display(),
        rows = table.rows.len(),
        path = data.display().to_string(),
        label = label,
        cats = cats.join("\n"),
        standardize = quote(&standardize),
        scaling = scaling.join("\n"),
        missing_lines = missing_lines,
        batch = batch,
        rounds = rounds,
        step = step,
    );
    Ok(Init { text, notes })
}

/// Passes over the smallest silo's training rows that `dpfl init`'s rounds make.
pub const EPOCHS: usize = 20;

/// `dpfl init`'s rounds and step size (issue 31 item 6), from public facts of the file's
/// shape only: the step is 1/β̂ with β̂ = c·d, an estimate of the loss's smoothness: for
/// standardised columns, one-hot groups and an intercept E‖x‖² ≈ d (one unit per column), and
/// the loss's curvature in ⟨w, x⟩ is at most c = 1/4 (logistic), 1/2 (softmax), 1 (least
/// squares); capped at 1. The rounds make [`EPOCHS`] passes over the smallest silo's
/// `train_rows` at `batch` per round, between 200 and 2000, a multiple of 10: enough for
/// the non-private loss to flatten on the shapes tested (crates/dpfl-cli/tests/it/own_data.rs).
pub fn schedule(model: &str, features: usize, train_rows: usize, batch: usize) -> (usize, f64) {
    let curvature = match model {
        "logistic" => 0.25,
        "softmax" => 0.5,
        _ => 1.0,
    };
    let step = sig3((1.0 / (curvature * features.max(1) as f64)).min(1.0));
    let rounds = (EPOCHS * train_rows)
        .div_ceil(batch.max(1))
        .clamp(200, 2000);
    (rounds.div_ceil(10) * 10, step)
}

fn sig3(x: f64) -> f64 {
    format!("{x:.2e}").parse().unwrap_or(x)
}

/// `dpfl config check`: everything `run` checks before its first round, without training:
/// the spec's fields, the data (loaded and split as trial 1 would be), the model, and every
/// algorithm's calibration. Returns a short report: the silos and each algorithm's noise.
pub fn check_experiment(spec: &super::ExperimentSpec, data_dir: Option<&Path>) -> Result<String> {
    spec.validate()?;
    let mut master = super::master_rng(spec)?;
    let (trial, trial_seed) = super::next_trial(spec, data_dir, &mut master)?;
    let ctx = super::build_context(spec, &trial)?;
    let mut out = dpfl::data::describe_named_silos(&trial.silos, trial.silo_names.as_deref());
    for (a, entry) in spec.algorithms.iter().enumerate() {
        let label = entry.label();
        let built = entry
            .spec
            .build(&ctx)
            .map_err(|e| super::name_algorithm(a, &label, e))?;
        // Every check that can fail at the first release fails here, not after the other
        // algorithms trained (issue 31 item 8): one round, as `train` runs it.
        super::release_zero(
            spec,
            &entry.spec,
            &trial,
            super::algorithm_seed(trial_seed, a),
        )
        .map_err(|e| super::name_algorithm(a, &label, e))?;
        later_rounds(spec, &ctx, &built.calibration, trial.silo_names.as_deref())
            .map_err(|e| super::name_algorithm(a, &label, e))?;
        let sigma = built
            .calibration
            .iter()
            .map(|c| c.sigma)
            .fold(0.0, f64::max);
        out += &format!(
            "\nalgorithm {a} ({label}): builds, first round runs; noise sigma up to {sigma:.6}"
        );
    }
    Ok(out)
}

/// With `enforce_budget`, each silo's ledger charges every round it answers: the plan's
/// whole-run event (all R rounds, the most a silo's ledger lets it answer) must fit each
/// silo's budget in the ledger `train` builds, or a later round would be refused mid-run.
fn later_rounds(
    spec: &super::ExperimentSpec,
    ctx: &dpfl::algo::BuildContext,
    calibration: &[dpfl::algo::SiloCalibration],
    names: Option<&[String]>,
) -> Result<()> {
    if !spec.privacy.as_ref().is_some_and(|p| p.enforce_budget) {
        return Ok(());
    }
    for (i, c) in calibration.iter().enumerate() {
        let (Some(event), Some(budget)) = (&c.run_event, ctx.silos.get(i).and_then(|s| s.budget))
        else {
            continue;
        };
        let delta = budget.1;
        // The ledger `dpfl train`'s silo holds (`Ledgers::Enforce`).
        let mut ledger = dpfl::run::silo_ledger(budget)?;
        let why = match ledger.charge(0, event) {
            Ok(_) => continue,
            Err(dpfl_privacy::PrivacyError::BudgetExceeded {
                requested, budget, ..
            }) => format!(
                "they compose to epsilon = {} at delta {:.1e}, over its budget {budget}",
                super::guarantee::num(requested, 4),
                delta.get()
            ),
            Err(e) => e.to_string(),
        };
        let name = names
            .and_then(|n| n.get(i))
            .map_or(String::new(), |n| format!(" ({n})"));
        return Err(Error::config(
            "privacy.enforce_budget",
            format!(
                "silo {i}{name}'s ledger would refuse a later round: its {} planned rounds do \
                 not fit its budget ({why})",
                spec.rounds
            ),
        ));
    }
    Ok(())
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
            toml.contains("{ column = \"sex\", encoding = \"one-hot\", order = [\"f\", \"m\"] }"),
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

    /// Messy data (issue 31 item 5): `NA` in a numeric column is a missing value (warned
    /// about, `missing = "drop"` written, the column still standardised), and a numeric
    /// column with a stray non-number is refused naming the cell and its line.
    #[test]
    fn init_handles_missing_values_and_refuses_stray_cells() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("h.csv");
        let mut text = String::from("age,bmi,hospital,outcome\r\n");
        for i in 0..40 {
            let bmi = if i == 5 {
                "NA".to_string()
            } else {
                format!("{}.5", 20 + i % 9)
            };
            let age = if i == 9 {
                String::new()
            } else {
                (30 + i).to_string()
            };
            let h = ["a", "b"][i % 2];
            text += &format!("{age},{bmi},{h},{}\r\n", ["no", "yes"][i % 3 % 2]);
        }
        std::fs::write(&p, &text).unwrap();
        let init = init_with_notes(&p, "outcome", Some("hospital")).unwrap();
        assert!(
            init.text.contains("standardize = [\"age\", \"bmi\"]"),
            "{}",
            init.text
        );
        assert!(init.text.contains("na_values = [\"NA\"]"), "{}", init.text);
        assert!(init.text.contains("missing = \"drop\""), "{}", init.text);
        // Lines: the header is line 1, row i is line i + 2.
        let warn = init.notes.join("\n");
        assert!(
            warn.contains("age (1: line 11)") && warn.contains("bmi (1: line 7)"),
            "{warn}"
        );
        let spec = ExperimentSpec::from_toml(&init.text, "init").unwrap();
        let mut rng =
            dpfl_privacy::DpRng::new(Some(1), dpfl_privacy::rng::Purpose::Data, 0).unwrap();
        let silos = spec.data.load(None, &mut rng).unwrap();
        let rows: usize = silos.iter().map(|s| s.train.len() + s.test.len()).sum();
        assert_eq!(rows, 38, "the two rows with a missing value are dropped");
        // `impute` keeps them, each filled from its own silo's rows.
        let imputed = init
            .text
            .replace("missing = \"drop\"", "missing = \"impute\"");
        let spec = ExperimentSpec::from_toml(&imputed, "init").unwrap();
        let silos = spec.data.load(None, &mut rng).unwrap();
        let rows: usize = silos.iter().map(|s| s.train.len() + s.test.len()).sum();
        assert_eq!(rows, 40);

        // One stray cell among numbers: refused, never one-hot encoded.
        let stray = text.replace("\r\n33,", "\r\n3e,");
        std::fs::write(&p, &stray).unwrap();
        let e = init_with_notes(&p, "outcome", Some("hospital"))
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains("column `age`") && e.contains("`3e` (line 5)"),
            "{e}"
        );
    }
}

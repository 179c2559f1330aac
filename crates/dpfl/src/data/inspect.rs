//! Plain-text summaries of data sets and silos, printed by `dpfl data inspect`.

use std::fmt::Write;

use super::{Dataset, SiloData, Target};

fn class_line(out: &mut String, d: &Dataset) {
    if let (Target::Classes { names }, Some(counts)) = (d.target(), d.class_counts()) {
        let parts: Vec<String> = names
            .iter()
            .zip(&counts)
            .map(|(n, c)| format!("{n}: {c}"))
            .collect();
        let _ = writeln!(out, "classes: {} ({})", names.len(), parts.join(", "));
    } else {
        let n = d.len().max(1) as f64;
        let mean = d.y().iter().sum::<f64>() / n;
        let (lo, hi) = d
            .y()
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                (a.min(v), b.max(v))
            });
        let _ = writeln!(
            out,
            "target: real (mean {mean:.4}, min {lo:.4}, max {hi:.4})"
        );
    }
}

/// Rows, features (names, abbreviated past 20), classes with counts or the target's range,
/// and the largest row norm.
pub fn describe_dataset(d: &Dataset) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "rows: {}", d.len());
    let names = d.feature_names();
    let shown: Vec<&str> = names.iter().take(20).map(String::as_str).collect();
    let more = if names.len() > 20 {
        format!(", … ({} more)", names.len() - 20)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "features: {} ({}{more})",
        d.num_features(),
        shown.join(", ")
    );
    class_line(&mut out, d);
    let _ = writeln!(out, "max row norm: {:.4}", d.max_row_norm());
    out
}

/// Number of silos, total train/test rows, and one line per silo with its sizes and class
/// counts (or target mean).
pub fn describe_silos(silos: &[SiloData]) -> String {
    describe_named_silos(silos, None)
}

/// [`describe_silos`], each silo's line with its name (`silo 3 (st-marys): …`) when the data
/// name the silos.
pub fn describe_named_silos(silos: &[SiloData], names: Option<&[String]>) -> String {
    let mut out = String::new();
    let train: usize = silos.iter().map(|s| s.train.len()).sum();
    let test: usize = silos.iter().map(|s| s.test.len()).sum();
    let _ = writeln!(
        out,
        "silos: {} (train rows {train}, test rows {test})",
        silos.len()
    );
    if let Some(first) = silos.first() {
        let _ = writeln!(out, "features: {}", first.train.num_features());
        if let Target::Classes { names } = first.train.target() {
            let _ = writeln!(out, "classes: {} ({})", names.len(), names.join(", "));
        }
    }
    for (i, s) in silos.iter().enumerate() {
        let detail = match s.train.class_counts() {
            Some(c) => format!(
                "train class counts [{}]",
                c.iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            None => {
                let mean = s.train.y().iter().sum::<f64>() / s.train.len().max(1) as f64;
                format!("train target mean {mean:.4}")
            }
        };
        let name = names
            .and_then(|n| n.get(i))
            .map_or(String::new(), |n| format!(" ({n})"));
        let _ = writeln!(
            out,
            "silo {i}{name}: train {}, test {}, {detail}",
            s.train.len(),
            s.test.len()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::linalg::Matrix;

    #[test]
    fn summaries_name_sizes_and_counts() {
        let x = Matrix::from_vec(3, 1, vec![3.0, 4.0, 0.0]).unwrap();
        let t = Target::Classes {
            names: vec!["a".into(), "b".into()],
        };
        let d = Dataset::new(x, vec![0.0, 1.0, 1.0], t, vec!["f".into()]).unwrap();
        let s = describe_dataset(&d);
        assert!(
            s.contains("rows: 3") && s.contains("features: 1 (f)"),
            "{s}"
        );
        assert!(
            s.contains("classes: 2 (a: 1, b: 2)") && s.contains("max row norm: 4.0000"),
            "{s}"
        );
        let silos = vec![SiloData {
            train: d.subset(&[0, 1]),
            test: d.subset(&[2]),
        }];
        let s = describe_silos(&silos);
        assert!(s.contains("silos: 1 (train rows 2, test rows 1)"), "{s}");
        assert!(
            s.contains("silo 0: train 2, test 1, train class counts [1, 1]"),
            "{s}"
        );
    }
}

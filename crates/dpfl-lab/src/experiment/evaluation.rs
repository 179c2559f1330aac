//! What `dpfl predict --proba` and `dpfl evaluate` report of a saved model beyond its labels
//! (issue 31 item 6): class probabilities, log-loss, the AUC of a binary classifier and the
//! confusion matrix.
//!
//! Decisions: a model's class probabilities are its own likelihood: for the cross-entropy
//! models (logistic, non-convex logistic, softmax, the networks) f(w; x, c) = −ln p_c + r(w)
//! with r independent of the class (the non-convex logistic's regulariser; 0 elsewhere), so
//! p_c = exp(−f(w; x, c)) / Σ_c' exp(−f(w; x, c')) is the sigmoid or softmax the model
//! trains, computed through its one loss function. The hinge loss (an SVM) has no
//! probabilities and is refused by `--proba`; log-loss and AUC are null for it. Log-loss clips
//! p at 1e-15 (a certain wrong answer costs 34.5, not ∞). The AUC is the Mann–Whitney
//! statistic of the second class's probability (ties count one half); null when the file
//! holds one class only.

use serde::Serialize;

use dpfl::data::Dataset;
use dpfl::model::{Model, ModelSpec};

/// The floor log-loss puts under a probability.
const LOG_LOSS_FLOOR: f64 = 1e-15;

/// Whether `spec` is a cross-entropy model, whose loss is −ln p of the class (see the module
/// docs): the models with class probabilities.
pub fn has_probabilities(spec: &ModelSpec) -> bool {
    matches!(
        spec,
        ModelSpec::Logistic { .. }
            | ModelSpec::NonconvexLogistic { .. }
            | ModelSpec::Softmax
            | ModelSpec::Mlp { .. }
            | ModelSpec::DeepMlp { .. }
    )
}

/// p_c for each of `classes` classes of input `x` (the module docs' formula), normalised in
/// the log domain so that a large loss gives a tiny probability, never 0/0.
pub fn class_probabilities(model: &dyn Model, w: &[f64], x: &[f64], classes: usize) -> Vec<f64> {
    let neg: Vec<f64> = (0..classes).map(|c| -model.loss(w, x, c as f64)).collect();
    let m = neg.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = neg.iter().map(|v| (v - m).exp()).collect();
    let s: f64 = e.iter().sum();
    e.into_iter().map(|v| v / s).collect()
}

/// The confusion matrix: `counts[t][p]` rows with true class t predicted as class p.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Confusion {
    /// Class names in code order (rows and columns).
    pub classes: Vec<String>,
    /// `counts[true][predicted]`.
    pub counts: Vec<Vec<usize>>,
}

/// A saved model's scores on a labelled file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evaluation {
    /// `test_error` or `test_rmse` (as `summary.json` names the metric).
    pub metric: &'static str,
    /// Its value.
    pub value: f64,
    /// Rows scored.
    pub rows: usize,
    /// Mean −ln p(true class) (p floored at 1e-15); null without probabilities.
    pub log_loss: Option<f64>,
    /// Area under the ROC curve of the second class's probability (binary targets); null
    /// otherwise or when the file holds one class only.
    pub auc: Option<f64>,
    /// The confusion matrix (class targets).
    pub confusion: Option<Confusion>,
}

/// Scores `model` (built from `spec`, weights `w`, class names `classes` for a class target)
/// on `data`, which must be non-empty.
pub fn evaluate(
    spec: &ModelSpec,
    model: &dyn Model,
    w: &[f64],
    data: &Dataset,
    classes: Option<&[String]>,
) -> Evaluation {
    let value = dpfl::model::metric_value(model, w, data);
    let metric = match model.metric() {
        dpfl::model::Metric::ErrorRate => "test_error",
        dpfl::model::Metric::Rmse => "test_rmse",
    };
    let mut e = Evaluation {
        metric,
        value,
        rows: data.len(),
        log_loss: None,
        auc: None,
        confusion: None,
    };
    let Some(names) = classes else {
        return e;
    };
    let k = names.len();
    let mut counts = vec![vec![0usize; k]; k];
    for i in 0..data.len() {
        let (x, y) = data.row(i);
        let p = model.predict(w, x) as usize;
        if let Some(cell) = counts.get_mut(y as usize).and_then(|r| r.get_mut(p)) {
            *cell += 1;
        }
    }
    e.confusion = Some(Confusion {
        classes: names.to_vec(),
        counts,
    });
    if !has_probabilities(spec) {
        return e;
    }
    let probs: Vec<(Vec<f64>, usize)> = (0..data.len())
        .map(|i| {
            let (x, y) = data.row(i);
            (class_probabilities(model, w, x, k), y as usize)
        })
        .collect();
    let ll = probs
        .iter()
        .map(|(p, y)| -p.get(*y).copied().unwrap_or(0.0).max(LOG_LOSS_FLOOR).ln())
        .sum::<f64>()
        / probs.len() as f64;
    e.log_loss = Some(ll);
    if k == 2 {
        let scored: Vec<(f64, bool)> = probs.iter().map(|(p, y)| (p[1], *y == 1)).collect();
        e.auc = auc(&scored);
    }
    e
}

/// The Mann–Whitney AUC of (score, positive) pairs, ties counted one half; `None` when one
/// class is absent.
pub fn auc(scored: &[(f64, bool)]) -> Option<f64> {
    let mut v: Vec<(f64, bool)> = scored.to_vec();
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let (mut rank_sum, mut i) = (0.0, 0);
    while i < v.len() {
        let mut j = i;
        while j < v.len() && v[j].0 == v[i].0 {
            j += 1;
        }
        // Ranks i+1..=j share their mean.
        let mean_rank = (i + 1 + j) as f64 / 2.0;
        rank_sum += mean_rank * v[i..j].iter().filter(|p| p.1).count() as f64;
        i = j;
    }
    let pos = v.iter().filter(|p| p.1).count() as f64;
    let neg = v.len() as f64 - pos;
    if pos == 0.0 || neg == 0.0 {
        return None;
    }
    Some((rank_sum - pos * (pos + 1.0) / 2.0) / (pos * neg))
}

/// The evaluation as a table for people: the metric, log-loss and AUC, then the confusion
/// matrix (rows: true class, columns: predicted).
pub fn table(e: &Evaluation) -> String {
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.4}"));
    let mut s = format!(
        "{} {:.4} on {} rows; log-loss {}; AUC {}\n",
        e.metric.replace('_', " "),
        e.value,
        e.rows,
        opt(e.log_loss),
        opt(e.auc)
    );
    if let Some(c) = &e.confusion {
        let w = c
            .classes
            .iter()
            .map(|n| n.chars().count())
            .chain(c.counts.iter().flatten().map(|n| n.to_string().len()))
            .max()
            .unwrap_or(1)
            .max(4);
        s += "confusion matrix (rows: true class, columns: predicted class)\n";
        s += &format!("{:>w$}", "");
        for n in &c.classes {
            s += &format!(" {n:>w$}");
        }
        s.push('\n');
        for (n, row) in c.classes.iter().zip(&c.counts) {
            s += &format!("{n:>w$}");
            for v in row {
                s += &format!(" {v:>w$}");
            }
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auc_counts_ties_one_half_and_needs_both_classes() {
        let perfect = [(0.1, false), (0.2, false), (0.8, true), (0.9, true)];
        assert_eq!(auc(&perfect), Some(1.0));
        let reversed = [(0.9, false), (0.1, true)];
        assert_eq!(auc(&reversed), Some(0.0));
        let tied = [(0.5, false), (0.5, true)];
        assert_eq!(auc(&tied), Some(0.5));
        // 1 positive above 2 of 3 negatives, tied with none: 2/3.
        let mixed = [(0.1, false), (0.2, false), (0.3, true), (0.4, false)];
        assert!((auc(&mixed).unwrap() - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(auc(&[(0.3, true)]), None);
    }

    #[test]
    fn probabilities_are_the_models_sigmoid_and_softmax() {
        let spec = ModelSpec::Logistic { logit_clip: None };
        let m = spec.build(2, Some(2)).unwrap();
        let (w, x) = ([0.5, -1.0], [2.0, 0.5]);
        let p = class_probabilities(m.as_ref(), &w, &x, 2);
        let sig = 1.0 / (1.0 + (-0.5f64).exp());
        assert!((p[1] - sig).abs() < 1e-12 && (p[0] - (1.0 - sig)).abs() < 1e-12);
        // The non-convex logistic's class-free regulariser cancels.
        let nc = ModelSpec::NonconvexLogistic { lambda: 0.2 }
            .build(2, Some(2))
            .unwrap();
        let q = class_probabilities(nc.as_ref(), &w, &x, 2);
        assert!((q[1] - sig).abs() < 1e-12);
        let sm = ModelSpec::Softmax.build(2, Some(3)).unwrap();
        // Feature-major weights w[j·C + c]: z = (1 + 2, 0 − 2, 0).
        let ws = [1.0, 0.0, 0.0, 1.0, -1.0, 0.0];
        let r = class_probabilities(sm.as_ref(), &ws, &[1.0, 2.0], 3);
        let z: [f64; 3] = [3.0, -2.0, 0.0];
        let s: f64 = z.iter().map(|v| v.exp()).sum();
        for c in 0..3 {
            assert!((r[c] - z[c].exp() / s).abs() < 1e-12, "{r:?}");
        }
        assert!(!has_probabilities(&ModelSpec::Hinge { smoothing: None }));
    }

    #[test]
    fn the_table_shows_every_figure() {
        let e = Evaluation {
            metric: "test_error",
            value: 0.25,
            rows: 4,
            log_loss: Some(0.5),
            auc: Some(0.75),
            confusion: Some(Confusion {
                classes: vec!["no".into(), "yes".into()],
                counts: vec![vec![2, 1], vec![0, 1]],
            }),
        };
        let t = table(&e);
        assert!(t.starts_with("test error 0.2500 on 4 rows; log-loss 0.5000; AUC 0.7500"));
        assert!(
            t.contains("  no    2    1\n") && t.contains(" yes    0    1\n"),
            "{t}"
        );
    }
}

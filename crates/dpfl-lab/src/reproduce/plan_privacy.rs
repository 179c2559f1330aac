//! What the Lowy reproductions' ε labels deliver (issue 27, finding 2), from the plan alone:
//! `dpfl reproduce lowy-* --rewrite` writes `privacy.csv` beside a finished reproduction's
//! `summary.csv` without training.
//!
//! For every figure, algorithm, M and labelled ε, each trial's plan gives each silo's run
//! event (App. I's σ over all R rounds, [`super::grid::plan_events`]): the guarantee a silo
//! holds if it answers every round, which is what the calibration promises whatever the
//! participation (a silo that sat rounds out spent less). Each silo is accounted at its own
//! δ_i by RDP and the coarse-grid PLD (the smaller; `experiment::account_silo`, the function
//! `dpfl train` uses), the largest over silos is the trial's certificate, and the row gives
//! the largest and smallest over trials and clip thresholds (they differ only through n_i),
//! with the largest lower bound from the same events. A fresh full run writes per-run
//! certificates of what each silo actually released into `summary.csv` instead.

use rayon::prelude::*;

use super::grid::{Job, PanelTrial, certified, plan_events};
use super::privacy::{RunPrivacy, fmt_epsilon};
use super::spec::ReproSpec;
use crate::experiment::Precision;

/// One row of `privacy.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanPrivacyRow {
    /// The paper's figure.
    pub figure: String,
    /// The algorithm's label.
    pub algorithm: String,
    /// Silos per round.
    pub m: f64,
    /// The ε the figure labels the run with.
    pub labelled_epsilon: f64,
    /// The largest certificate over trials and clips; `None` if some silo is uncertified.
    pub certified_epsilon: Option<f64>,
    /// The smallest certificate over trials and clips.
    pub certified_epsilon_min: Option<f64>,
    /// The largest lower bound on the true ε over trials, clips and silos.
    pub epsilon_lower_bound: Option<f64>,
    /// What qualifies the certificate (e.g. a Lipschitz bound read off the data).
    pub notes: String,
}

impl PlanPrivacyRow {
    fn privacy(&self) -> RunPrivacy {
        RunPrivacy {
            labelled_epsilon: Some(self.labelled_epsilon),
            label_kind: "figure label".into(),
            delta: f64::NAN,
            certified_epsilon: self.certified_epsilon,
            certified_by: None,
            epsilon_lower_bound: self.epsilon_lower_bound,
            notes: Vec::new(),
        }
    }

    /// E.g. "labelled ε = 0.5 (figure label), certified ε = 0.94".
    pub fn describe(&self) -> String {
        self.privacy().describe()
    }

    /// Whether the largest certificate is at most the label.
    pub fn meets_label(&self) -> bool {
        self.privacy().meets_label()
    }
}

/// The certificate of every (figure, private algorithm, M, ε) of `spec` over its trials.
pub fn plan_privacy(
    spec: &ReproSpec,
    data: &[Vec<PanelTrial>],
) -> dpfl::Result<Vec<PlanPrivacyRow>> {
    let clips: Vec<Option<f64>> = match &spec.base.clips {
        Some(c) => c.iter().copied().map(Some).collect(),
        None => vec![None],
    };
    let mut points = Vec::new();
    for (p, panel) in spec.panels.iter().enumerate() {
        for (a, alg) in spec.algorithms.iter().enumerate() {
            if !alg.spec.is_private() {
                continue;
            }
            for e in 0..spec.epsilons.len() {
                let jobs: Vec<Job> = (0..spec.trials)
                    .flat_map(|trial| {
                        clips.iter().map(move |&clip| Job {
                            panel: p,
                            trial,
                            eps: Some(e),
                            algorithm: a,
                            // σ does not depend on the step size: the grid's first point.
                            step: alg.steps.values()[0],
                            clip,
                            rep: 0,
                        })
                    })
                    .collect();
                points.push((panel.figure.clone(), p, a, e, jobs));
            }
        }
    }
    let account = |job: &Job| -> dpfl::Result<(Option<f64>, Option<f64>)> {
        let (exp, events) = plan_events(spec, data, job)?;
        let pt = &data[job.panel][job.trial];
        // `account_silo` memoises by events and δ: silos and trials of equal n_i are
        // accounted once.
        let silos = crate::experiment::account_silos(&exp, &pt.data, &events, Precision::Coarse);
        Ok(certified(&silos))
    };
    let notes = if spec.base.lipschitz_from_data.is_some() {
        "L is read off the data (the paper's rule), so the certificate assumes a public L: \
         these runs are not end-to-end private"
            .to_string()
    } else {
        String::new()
    };
    points
        .par_iter()
        .map(|(figure, p, a, e, jobs)| {
            let results = jobs.iter().map(account).collect::<dpfl::Result<Vec<_>>>()?;
            let ups: Option<Vec<f64>> = results.iter().map(|r| r.0).collect();
            let lower = results
                .iter()
                .filter_map(|r| r.1)
                .fold(None, |acc: Option<f64>, l| {
                    Some(acc.map_or(l, |x| x.max(l)))
                });
            let n_silos = data[*p][0].data.silos.len();
            Ok(PlanPrivacyRow {
                figure: figure.clone(),
                algorithm: spec.algorithms[*a].label.clone(),
                m: spec.panels[*p].participation.effective_m(n_silos),
                labelled_epsilon: spec.epsilons[*e],
                certified_epsilon: ups.as_ref().map(|v| v.iter().copied().fold(0.0, f64::max)),
                certified_epsilon_min: ups
                    .as_ref()
                    .map(|v| v.iter().copied().fold(f64::INFINITY, f64::min)),
                epsilon_lower_bound: lower,
                notes: notes.clone(),
            })
        })
        .collect()
}

/// `privacy.csv` of [`plan_privacy`]'s rows.
pub fn privacy_csv(rows: &[PlanPrivacyRow]) -> dpfl::Result<String> {
    let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    crate::output::csv_string(
        &[
            "figure",
            "algorithm",
            "M",
            "labelled_epsilon",
            "label",
            "delta",
            "certified_epsilon",
            "certified_epsilon_min",
            "epsilon_lower_bound",
            "meets_label",
            "description",
            "notes",
        ],
        rows.iter().map(|r| {
            vec![
                r.figure.clone(),
                r.algorithm.clone(),
                r.m.to_string(),
                r.labelled_epsilon.to_string(),
                "figure label".into(),
                "each silo's delta_i (the spec's rule)".into(),
                opt(r.certified_epsilon),
                opt(r.certified_epsilon_min),
                opt(r.epsilon_lower_bound),
                r.meets_label().to_string(),
                r.describe(),
                r.notes.clone(),
            ]
        }),
    )
}

/// The row's certificate for a table: "0.94" or "0.91–0.94" over trials.
pub fn certificate_range(r: &PlanPrivacyRow) -> String {
    match (r.certified_epsilon_min, r.certified_epsilon) {
        (Some(lo), Some(hi)) if fmt_epsilon(lo) != fmt_epsilon(hi) => {
            format!("{}–{}", fmt_epsilon(lo), fmt_epsilon(hi))
        }
        (_, Some(hi)) => fmt_epsilon(hi),
        _ => "none".into(),
    }
}

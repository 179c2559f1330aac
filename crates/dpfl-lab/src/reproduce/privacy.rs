//! What a reproduction's ε label delivers (issue 27, finding 2): every run of a reproduction
//! carries the ε that dpfl's accountants certify for the noise it actually drew, next to the
//! paper's label, and a lower bound on the true ε.
//!
//! The certificate is the account of the events the silos' ledgers charge (the round events of
//! the plan's calibration, or `Simulator::spent` after a run), per silo at the run's δ by
//! the RDP and PLD accountants under replace-one (`experiment::summary::account_silo`, the
//! function `dpfl train`'s summaries use), the smaller of the two per silo and the largest
//! over silos; the lower bound is the largest over silos of
//! `dpfl_privacy::accountant::lower_bound` for the same events. Both on the coarse grid
//! (`Precision::Coarse`, 1e-3, as the Lowy reproductions' grids): the PLD's pessimistic and
//! the lower bound's optimistic rounding keep both sound, and at the SoteriaFL presets'
//! ε ≈ 200 the fine grid costs over a minute of CPU per event (`dpfl account` gives the fine
//! values: 202.8 where the coarse grid prints a slightly larger certificate). A label the certificate does
//! not meet is printed as "labelled ε = 1 (paper preset), certified ε = 202.8"; a run no
//! accountant certifies has `certified_epsilon = None` and says why.

use dpfl_privacy::PrivacyEvent;
use serde::Serialize;

use crate::experiment::{Precision, account_silo};

/// One run's (or one configuration's) label and certificate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunPrivacy {
    /// The ε the paper (or the plan) labels the run with; `None` for a non-private run.
    pub labelled_epsilon: Option<f64>,
    /// What the label is: "paper preset", "target", "per-round budget", …
    pub label_kind: String,
    /// The δ every number here is at.
    pub delta: f64,
    /// The tightest sound accountant's ε at `delta` for the events the ledgers charge; `None`
    /// if no accountant certifies any ε (see `notes`) or the run is not private.
    pub certified_epsilon: Option<f64>,
    /// Which accountant gave `certified_epsilon` ("rdp" or "pld"; the largest silo's).
    pub certified_by: Option<String>,
    /// A lower bound on the true ε at `delta` (largest over silos); `None` where no
    /// neighbouring pair is implemented for the events.
    pub epsilon_lower_bound: Option<f64>,
    /// Why an accountant or the lower bound gave no number.
    pub notes: Vec<String>,
}

impl RunPrivacy {
    /// A non-private run: no label, no certificate.
    pub fn non_private() -> Self {
        RunPrivacy {
            labelled_epsilon: None,
            label_kind: "non-private".into(),
            delta: 0.0,
            certified_epsilon: None,
            certified_by: None,
            epsilon_lower_bound: None,
            notes: Vec::new(),
        }
    }

    /// No silo released anything certifiable: `why` says what.
    pub fn uncertified(label: Option<f64>, label_kind: &str, delta: f64, why: String) -> Self {
        RunPrivacy {
            labelled_epsilon: label,
            label_kind: label_kind.into(),
            delta,
            certified_epsilon: None,
            certified_by: None,
            epsilon_lower_bound: None,
            notes: vec![why],
        }
    }

    /// The account at `delta` of every silo's released events (`per_silo[i]`, silo order).
    pub fn account(
        label: Option<f64>,
        label_kind: &str,
        delta: f64,
        per_silo: &[Vec<PrivacyEvent>],
    ) -> Self {
        let mut out = RunPrivacy {
            labelled_epsilon: label,
            label_kind: label_kind.into(),
            delta,
            certified_epsilon: Some(0.0),
            certified_by: None,
            epsilon_lower_bound: Some(0.0),
            notes: Vec::new(),
        };
        if per_silo.is_empty() {
            out.certified_epsilon = None;
            out.epsilon_lower_bound = None;
            out.notes.push("no silo".into());
            return out;
        }
        // Silos with the same events have the same account: account each list once.
        let mut seen: Vec<&[PrivacyEvent]> = Vec::new();
        for (i, events) in per_silo.iter().enumerate() {
            if seen.contains(&events.as_slice()) {
                continue;
            }
            seen.push(events);
            let s = account_silo(i, label, delta, events, Precision::Coarse);
            let best = match (s.rdp_epsilon, s.pld_epsilon) {
                (Some(r), Some(p)) if p <= r => Some((p, "pld")),
                (Some(r), _) => Some((r, "rdp")),
                (None, Some(p)) => Some((p, "pld")),
                (None, None) => None,
            };
            match (out.certified_epsilon, best) {
                (Some(u), Some((b, by))) if b >= u => {
                    out.certified_epsilon = Some(b);
                    out.certified_by = Some(by.into());
                }
                (Some(_), Some(_)) => {}
                (_, None) => out.certified_epsilon = None,
                (None, Some(_)) => {}
            }
            out.epsilon_lower_bound = match (out.epsilon_lower_bound, s.lower_epsilon) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            };
            for n in s.notes {
                let n = format!("silo {i}: {n}");
                if !out.notes.contains(&n) {
                    out.notes.push(n);
                }
            }
        }
        if out.certified_epsilon.is_none() {
            out.certified_by = None;
        }
        out
    }

    /// Whether the certificate meets the label (a run without a label meets it trivially;
    /// one without a certificate never does).
    pub fn meets_label(&self) -> bool {
        match (self.labelled_epsilon, self.certified_epsilon) {
            (None, _) => true,
            (Some(_), None) => false,
            // The accountants' own rounding (1e-9 relative) is not a miss.
            (Some(l), Some(c)) => c <= l * (1.0 + 1e-9),
        }
    }

    /// One line for titles, legends and reports: "ε = 1 (certified 0.998 by PLD)", or, when
    /// the label is not met, "labelled ε = 1 (paper preset), certified ε = 202.8", or
    /// "labelled ε = 1 (paper preset), certified: none".
    pub fn describe(&self) -> String {
        let Some(l) = self.labelled_epsilon else {
            return "non-private".into();
        };
        let by = |c: f64| match &self.certified_by {
            Some(a) => format!("{} by {}", fmt_epsilon(c), a.to_uppercase()),
            None => fmt_epsilon(c),
        };
        match self.certified_epsilon {
            Some(c) if self.meets_label() => {
                format!(
                    "ε = {} ({}, certified {})",
                    fmt_epsilon(l),
                    self.label_kind,
                    by(c)
                )
            }
            Some(c) => format!(
                "labelled ε = {} ({}), certified ε = {}",
                fmt_epsilon(l),
                self.label_kind,
                by(c)
            ),
            None => format!(
                "labelled ε = {} ({}), certified: none",
                fmt_epsilon(l),
                self.label_kind
            ),
        }
    }

    /// The short form for a legend: "certified ε = 202.8" or "certified: none".
    pub fn legend(&self) -> String {
        match (self.labelled_epsilon, self.certified_epsilon) {
            (None, _) => "non-private".into(),
            (Some(_), Some(c)) => format!("certified ε = {}", fmt_epsilon(c)),
            (Some(_), None) => "certified: none".into(),
        }
    }

    /// The CSV cells of [`Self::CSV_HEADER`].
    pub fn csv_cells(&self) -> Vec<String> {
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
        vec![
            opt(self.certified_epsilon),
            self.certified_by.clone().unwrap_or_default(),
            opt(self.epsilon_lower_bound),
        ]
    }

    /// The columns every reproduction's tables gain.
    pub const CSV_HEADER: [&'static str; 3] =
        ["certified_epsilon", "certified_by", "epsilon_lower_bound"];

    /// The label's columns before [`Self::CSV_HEADER`] (tables without an ε column).
    pub const LABEL_HEADER: [&'static str; 3] = ["labelled_epsilon", "label", "delta"];

    /// The cells of [`Self::LABEL_HEADER`] then [`Self::CSV_HEADER`] (δ empty when there is
    /// no label).
    pub fn label_cells(&self) -> Vec<String> {
        let mut v = match self.labelled_epsilon {
            Some(l) => vec![
                l.to_string(),
                self.label_kind.clone(),
                format!("{:e}", self.delta),
            ],
            None => vec![String::new(), self.label_kind.clone(), String::new()],
        };
        v.extend(self.csv_cells());
        v
    }
}

/// ε with four significant digits at most ("202.8", "1", "0.9983", "3.5e4").
pub fn fmt_epsilon(e: f64) -> String {
    if !e.is_finite() {
        return format!("{e}");
    }
    if e == 0.0 {
        return "0".into();
    }
    if e >= 1e4 {
        return format!("{e:.3e}");
    }
    let digits = (3 - e.abs().log10().floor() as i32).clamp(0, 6) as usize;
    let s = format!("{e:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// One table of what each label delivers: `privacy.csv` (label, δ, certificate, lower
/// bound, notes), one row per `(setting, algorithm)` key.
pub fn privacy_csv(rows: &[(String, String, &RunPrivacy)]) -> dpfl::Result<String> {
    let header: Vec<&str> = ["setting", "algorithm"]
        .into_iter()
        .chain(RunPrivacy::LABEL_HEADER)
        .chain(RunPrivacy::CSV_HEADER)
        .chain(["meets_label", "description", "notes"])
        .collect();
    crate::output::csv_string(
        &header,
        rows.iter().map(|(setting, a, p)| {
            let mut v = vec![setting.clone(), a.clone()];
            v.extend(p.label_cells());
            v.extend([
                p.meets_label().to_string(),
                p.describe(),
                p.notes.join("; "),
            ]);
            v
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DP-NormFedAvg with a per-round budget (ε₀, δ₀) = (1, 1e-4) over R = 5 rounds, in an
    /// experiment whose target is (1, 1/n² = 1e-4): the rounds' δ's alone exceed the target
    /// δ, so no accountant certifies the run.
    const PER_ROUND: &str = r#"kind = "norm-fed-avg"
step_size = 0.1
local_steps = 1
batch_size = 20
momentum = 0.0
variant = { kind = "dp-norm-fed-avg" }
[algorithms.privacy]
s = 4096
sensitivity = { kind = "worst-case" }
budget = { kind = "per-round", epsilon = 1.0, delta = 1e-4 }"#;

    #[test]
    fn a_run_no_accountant_certifies_is_not_shown_end_to_end_private() {
        use crate::experiment::{ExperimentSpec, prepare_trial, summary_of, train_one};
        let text = dpfl_testkit::audit::kinds_toml(5, dpfl_testkit::audit::LOGISTIC, PER_ROUND);
        let spec = ExperimentSpec::from_toml(&text, "t.toml").unwrap();
        let mut rng = dpfl_privacy::DpRng::from_seed(5, dpfl_privacy::rng::Purpose::Data, 0);
        let trial = prepare_trial(&spec, None, &mut rng).unwrap();
        let run = train_one(&spec, &spec.algorithms[0].spec, &trial, Some(9), 5, |_| {}).unwrap();
        let s = summary_of(&spec, &spec.algorithms[0], &trial, &run);
        assert_eq!(s.epsilon, Some(1.0), "the target is shown");
        assert_eq!(s.max_certified_epsilon(), None, "{:?}", s.privacy);
        assert!(!s.end_to_end_private, "{s:?}");
        assert!(
            s.caveats
                .iter()
                .any(|c| c == crate::experiment::UNCERTIFIED_CAVEAT),
            "{:?}",
            s.caveats
        );
    }

    #[test]
    fn epsilons_print_with_four_significant_digits() {
        assert_eq!(fmt_epsilon(202.81), "202.8");
        assert_eq!(fmt_epsilon(1.0), "1");
        assert_eq!(fmt_epsilon(0.99834), "0.9983");
        assert_eq!(fmt_epsilon(353.04), "353");
        assert_eq!(fmt_epsilon(0.0), "0");
        assert_eq!(fmt_epsilon(40123.0), "4.012e4");
    }

    #[test]
    fn a_label_the_certificate_misses_is_printed_as_labelled() {
        // One unsampled Gaussian at z = 1, δ = 1e-5: the analytic Gaussian's ε ≈ 4.4.
        let e = PrivacyEvent::Gaussian {
            noise_multiplier: 1.0,
        };
        let p = RunPrivacy::account(Some(1.0), "paper preset", 1e-5, &[vec![e.clone()]]);
        let c = p.certified_epsilon.unwrap();
        assert!(c > 4.0 && c < 5.0, "{p:?}");
        assert!(!p.meets_label());
        assert!(
            p.describe()
                .starts_with("labelled ε = 1 (paper preset), certified ε = 4."),
            "{}",
            p.describe()
        );
        let lower = p.epsilon_lower_bound.unwrap();
        assert!(lower <= c && lower > 0.9 * c, "{p:?}");
        // The same event under a label it meets.
        let ok = RunPrivacy::account(Some(10.0), "target", 1e-5, &[vec![e.clone()], vec![]]);
        assert!(ok.meets_label(), "{ok:?}");
        assert!(ok.describe().starts_with("ε = 10 (target, certified 4."));
        // The worst silo decides.
        let two = RunPrivacy::account(Some(10.0), "target", 1e-5, &[vec![], vec![e.clone(), e]]);
        assert!(two.certified_epsilon.unwrap() > c);
    }

    #[test]
    fn a_run_no_accountant_certifies_has_no_certificate() {
        // (ε, δ) events whose δ's already exceed the run's δ: nothing to certify.
        let e = PrivacyEvent::EpsilonDelta {
            epsilon: 1.0,
            delta: 0.5,
        };
        let p = RunPrivacy::account(Some(1.0), "paper's claim", 1e-3, &[vec![e]]);
        assert_eq!(p.certified_epsilon, None, "{p:?}");
        assert!(!p.meets_label());
        assert!(
            p.describe().ends_with("certified: none"),
            "{}",
            p.describe()
        );
        assert!(!p.notes.is_empty());
        assert_eq!(p.csv_cells()[0], "");
    }
}

//! The report of a networked run's server (issue 16 item 5, "the federation's server writes
//! the same"): `dpfl server` holds no data, only the run's [`Plan`], its round log and the
//! models it released, so its `summary.json` and `report.html` hold what follows from those —
//! each silo's planned noise (σ, z, K), the ε the accountants certify for the planned run at
//! the silo's δ, the rounds, the messages and the traffic, the timings — and state plainly
//! that the model's quality is not available to it. The tables are `train`'s
//! ([`super::report`]); the numbers are [`AlgorithmSummary`]'s.
//!
//! Decisions: the privacy rows account each silo's *planned* run event (R rounds), since a
//! silo's ledger caps its releases at R and the server cannot read the silos' ledgers (a silo
//! that refused rounds spent less); accounting uses the fine grids of `dpfl train`'s report.
//! Whether the plan's gradient bound L was public cannot be told from the plan, so the summary
//! says so in its caveats.

use std::path::{Path, PathBuf};

use super::report::{Middle, page};
use super::summary::{AlgorithmSummary, Precision, RunOutput, account_silo, noise_multiplier};
use dpfl::plan::Plan;

pub use super::server_facts::{ServerFacts, ServerRound};

/// The plain statement of what the server cannot report.
pub const NO_MODEL_QUALITY: &str = "model quality not available to the server: it holds no \
     data (and the protocol carries no silo metrics), so final_train_loss and test_metric are \
     null; `dpfl federate` reports them, or `dpfl evaluate --model DIR/model` (the final model \
     the server saved, with the federation's model card) on a silo's own data";

/// The caveat about L: the plan does not say where it came from.
pub const SERVER_L_CAVEAT: &str = "the server cannot tell from the plan whether the gradient \
     bound L was public (privacy.lipschitz or clip) or derived from the data \
     (privacy.lipschitz_from_data, not end-to-end private); the experiment's own summary says";

/// The server's summary of one run: the plan's calibration and each silo's certified ε for the
/// planned run, with `facts` and `wall_seconds`.
pub fn server_summary(
    plan: &Plan,
    facts: ServerFacts,
    wall_seconds: f64,
) -> dpfl::Result<RunOutput> {
    let private = plan.algorithm.is_private();
    let silos = &plan.setup.silos;
    let epsilon = silos
        .iter()
        .filter_map(|s| s.budget.map(|(e, _)| e.get()))
        .reduce(f64::min)
        .filter(|_| private);
    let delta = silos
        .iter()
        .filter_map(|s| s.delta().map(|d| d.get()))
        .reduce(f64::min)
        .filter(|_| private);
    let privacy = if private {
        plan.calibration
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let info = silos.get(i);
                let target = info.and_then(|s| s.budget.map(|(e, _)| e.get()));
                let d = info.and_then(|s| s.delta()).map_or(f64::NAN, |d| d.get());
                let events: Vec<_> = c.run_event.iter().cloned().collect();
                account_silo(i, target, d, &events, Precision::Fine)
            })
            .collect()
    } else {
        Vec::new()
    };
    let model = plan
        .setup
        .model
        .build(plan.setup.features, plan.setup.classes)?;
    let mut s = AlgorithmSummary {
        algorithm: plan.algorithm.default_label(),
        private,
        epsilon,
        delta,
        sigma: plan.calibration.iter().map(|c| c.sigma).fold(0.0, f64::max),
        noise_multiplier: plan
            .calibration
            .iter()
            .filter_map(|c| c.run_event.as_ref().and_then(noise_multiplier))
            .reduce(f64::min),
        certified_epsilon: None,
        server: None,
        batch_size: plan
            .calibration
            .iter()
            .map(|c| c.batch_size)
            .min()
            .unwrap_or(0),
        rounds: plan.setup.rounds,
        participants: plan.setup.participation.effective_m(silos.len()),
        final_train_loss: f64::NAN,
        test_metric: f64::NAN,
        metric: model.metric().into(),
        trials: 1,
        wall_seconds,
        silos: plan.calibration.clone(),
        privacy,
        end_to_end_private: !private,
        caveats: if private {
            vec![NO_MODEL_QUALITY.to_string(), SERVER_L_CAVEAT.to_string()]
        } else {
            vec![NO_MODEL_QUALITY.to_string()]
        },
        nonfinite_gradients: None,
    };
    if private && epsilon.is_none() {
        s.certified_epsilon = s.max_certified_epsilon();
    }
    s.server = Some(facts);
    Ok(RunOutput {
        rounds: Vec::new(),
        summary: vec![s],
        models: Vec::new(),
        trivial_test_metric: None,
    })
}

/// Writes the server's `summary.json`, `rounds.csv` (its round log: round, selected,
/// participants, rejected, seconds) and `report.html` into `dir` (created if needed);
/// returns their paths.
pub fn write_server_report(
    name: &str,
    plan: &Plan,
    out: &RunOutput,
    dir: &Path,
) -> dpfl::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|source| dpfl::Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let facts = out.summary.first().and_then(|s| s.server.as_ref());
    let rows = facts.map_or(&[][..], |f| &f.rounds[..]);
    let csv = crate::output::csv_string(
        &["round", "selected", "participants", "rejected", "seconds"],
        rows.iter().map(|r| {
            vec![
                r.round.to_string(),
                r.selected.to_string(),
                r.participants.to_string(),
                r.rejected.to_string(),
                r.seconds.to_string(),
            ]
        }),
    )?;
    let rounds_csv = dir.join("rounds.csv");
    crate::output::atomic_write(&rounds_csv, csv.as_bytes())?;
    let json = serde_json::to_string_pretty(&out.summary)
        .map_err(|e| dpfl::Error::data("summary.json", e.to_string()))?;
    let summary = dir.join("summary.json");
    crate::output::atomic_write(&summary, (json + "\n").as_bytes())?;
    let report = dir.join(super::report::REPORT_FILE);
    crate::output::atomic_write(&report, render_server(name, plan, out)?.as_bytes())?;
    Ok(vec![rounds_csv, summary, report])
}

/// The server's page: `train`'s guarantee, results, privacy and timing tables, the rounds and
/// traffic in place of the curves, and the plan as its configuration.
pub fn render_server(name: &str, plan: &Plan, out: &RunOutput) -> dpfl::Result<String> {
    let facts = out.summary.first().and_then(|s| s.server.as_ref());
    let intro = format!(
        "Written by the federation's server (dpfl {}) from the run's plan, its round log and \
         the models it released: {} of {} round(s) aggregated. The model's quality is not \
         available to the server: it holds no data (and the protocol carries no silo \
         metrics), so the final training loss and test metric are shown as not available; \
         `dpfl federate` reports them, or `dpfl evaluate --model DIR/model` (the final model \
         the server saved) on a silo's own data.",
        env!("CARGO_PKG_VERSION"),
        facts.map_or(0, |f| f.rounds_run),
        plan.setup.rounds,
    );
    let config = toml::to_string_pretty(plan)
        .or_else(|_| serde_json::to_string_pretty(plan))
        .unwrap_or_else(|e| format!("(the plan could not be printed: {e})"));
    page(name, &intro, out, Middle::Server, &config)
}

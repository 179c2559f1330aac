//! The Lowy & Razaviyayn grids (`lowy-*` and any `--spec` file; the protocol is in the
//! [`super`] module doc, App. I) as a [`Reproduction`]: one job per run of the grid (trial ×
//! panel × ε × algorithm × step × clip × repetition), run in parallel, each seeded by its
//! coordinates; summarised into `summary.csv` and drawn as `fig<F>.{svg,png}`. The
//! checkpoint is removed after a complete run (a grid is extended by rerunning it).

use std::path::{Path, PathBuf};

use super::checkpoint_file::{config_json, fingerprint, hex};
use super::reproduction::{self, Flag, Hooks, JobContext, Options, Report, Reproduction, RunFacts};
use super::{
    Job, JobResult, MAX_RUNS, PanelTrial, ReproOutput, ReproSpec, builtin, plan_privacy, plot,
};

/// A Lowy grid reproduction.
pub struct LowyGrid {
    spec: ReproSpec,
    quick: bool,
    options: serde_json::Value,
    data: Vec<Vec<PanelTrial>>,
    jobs: Vec<Job>,
}

impl LowyGrid {
    /// Reproduction `id` (built in, or read from `--spec`) with `--quick` and `--trials`.
    pub fn new(id: &str, opts: &Options) -> dpfl::Result<Self> {
        let mut spec = match &opts.spec {
            Some(p) => {
                let text = std::fs::read_to_string(p).map_err(|source| dpfl::Error::Io {
                    path: p.clone(),
                    source,
                })?;
                let file = p.display().to_string();
                // A spec's error names the file once (a parse error already starts with it).
                let mut spec = ReproSpec::from_toml(&text, &file).map_err(|e| {
                    let text = e.to_string();
                    if text.starts_with(&file) {
                        e
                    } else {
                        dpfl::Error::data(file.clone(), text)
                    }
                })?;
                spec.base
                    .data
                    .resolve_paths(crate::experiment::paths::base_of(p));
                if spec.id != id {
                    return Err(dpfl::Error::config(
                        "id",
                        format!(
                            "{} is reproduction {:?}, but the command names {id:?}",
                            p.display(),
                            spec.id,
                        ),
                    ));
                }
                spec
            }
            None => builtin(id)?,
        };
        if opts.quick {
            spec = spec.quick();
        }
        if let Some(t) = opts.trials()? {
            spec.trials = t;
            // The run count with the new trials, before the run list is allocated.
            if spec.runs().is_none_or(|n| n > MAX_RUNS) {
                return Err(dpfl::Error::config(
                    "--trials",
                    format!("{t} trials: more than {MAX_RUNS} runs"),
                ));
            }
        }
        Ok(LowyGrid {
            quick: opts.quick,
            options: opts.header(&[Flag::Trials]),
            ..LowyGrid::from_spec(spec)
        })
    }

    /// The grid of `spec` as it is.
    pub fn from_spec(spec: ReproSpec) -> Self {
        LowyGrid {
            spec,
            quick: false,
            options: serde_json::json!({}),
            data: Vec::new(),
            jobs: Vec::new(),
        }
    }

    /// The specification as run.
    pub fn spec(&self) -> &ReproSpec {
        &self.spec
    }

    /// The summary of the finished `records` ([`reproduction::run`]'s).
    pub fn output(&self, records: &[Option<JobResult>]) -> dpfl::Result<ReproOutput> {
        let results: Vec<JobResult> = records
            .iter()
            .map(|r| r.ok_or_else(|| dpfl::Error::data(self.spec.id.clone(), "a run is missing")))
            .collect::<dpfl::Result<_>>()?;
        let (rows, panels) = super::summarise_grid(&self.spec, &self.data, &self.jobs, &results)?;
        Ok(ReproOutput {
            rows,
            wall_seconds: 0.0,
            runs: self.jobs.len(),
            panels,
        })
    }
}

/// Runs reproduction `spec` without a checkpoint. `progress(done, total)` is called as runs
/// finish (from any thread).
pub fn run(
    spec: &ReproSpec,
    data_dir: Option<&Path>,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> dpfl::Result<ReproOutput> {
    let start = std::time::Instant::now();
    let mut grid = LowyGrid::from_spec(spec.clone());
    grid.load(data_dir)?;
    let (records, _) = reproduction::run(&grid, None, None, &Hooks::progress(progress))?;
    let mut out = grid.output(&records)?;
    out.wall_seconds = start.elapsed().as_secs_f64();
    Ok(out)
}

/// The coordinates of a job as text: its key in the checkpoint.
fn key(j: &Job) -> String {
    format!(
        "panel {} trial {} eps {} algorithm {} step {} clip {} rep {}",
        j.panel,
        j.trial,
        j.eps.map_or("-".into(), |e| e.to_string()),
        j.algorithm,
        hex(j.step),
        j.clip.map_or("-".into(), hex),
        j.rep
    )
}

impl Reproduction for LowyGrid {
    type Record = JobResult;
    type Summary = ReproOutput;
    const TAKES: &'static [Flag] = &[Flag::Spec, Flag::Trials, Flag::Rewrite, Flag::Resume];

    fn id(&self) -> &str {
        &self.spec.id
    }

    fn out_name(&self) -> String {
        reproduction::quick_name(&self.spec.id, self.quick)
    }

    fn fingerprint(&self) -> dpfl::Result<String> {
        fingerprint(&self.spec)
    }

    fn header_options(&self) -> serde_json::Value {
        self.options.clone()
    }

    fn keeps_checkpoint(&self) -> bool {
        false
    }

    fn in_parallel(&self) -> bool {
        true
    }

    fn provenance(&self) -> dpfl::Result<(Option<u64>, serde_json::Value)> {
        Ok((Some(self.spec.seed), config_json(&self.spec)?))
    }

    fn loading(&self) -> &'static str {
        use crate::experiment::datasource::Source;
        match self.spec.base.data.source {
            Source::Mnist { pca: Some(_) } | Source::FashionMnist { pca: Some(_) } => {
                "loading data, fitting PCA"
            }
            _ => "loading data",
        }
    }

    fn load(&mut self, data_dir: Option<&Path>) -> dpfl::Result<()> {
        self.spec.validate()?;
        self.data = super::prepare(&self.spec, data_dir)?;
        self.jobs = super::jobs(&self.spec);
        Ok(())
    }

    fn jobs(&self) -> Vec<String> {
        self.jobs.iter().map(key).collect()
    }

    fn run_job(&self, job: usize, _: &JobContext) -> dpfl::Result<JobResult> {
        super::run_job(&self.spec, &self.data, &self.jobs[job])
    }

    fn summarise(
        &self,
        records: &[Option<JobResult>],
        dir: &Path,
    ) -> dpfl::Result<(ReproOutput, Vec<PathBuf>)> {
        let out = self.output(records)?;
        let files = super::write_summary(&out, dir)?;
        Ok((out, files))
    }

    fn draw(&self, out: &ReproOutput, dir: &Path) -> dpfl::Result<Vec<PathBuf>> {
        plot::plot_figures(&self.spec, &out.rows, &out.panels, dir)
    }

    fn report(&self, out: &ReproOutput, facts: &RunFacts) -> Report {
        let spec = &self.spec;
        let mut r = Report::default();
        let json = serde_json::json!({
            "id": spec.id,
            "runs": out.runs,
            "trials": spec.trials,
            "wall_seconds": facts.wall_seconds,
            "rows": out.rows,
        });
        if let serde_json::Value::Object(m) = json {
            r.json = m;
        }
        r.lines.push(format!(
            "{}: {} runs ({} trials) in {:.1} s",
            spec.id, out.runs, spec.trials, facts.wall_seconds
        ));
        if spec.base.lipschitz_from_data.is_some() {
            // The paper's rule, kept to reproduce it: say what it costs.
            r.after.push(format!(
                "Caveat: {}",
                crate::experiment::DATA_DERIVED_L_CAVEAT
            ));
        }
        // A divergence the spec does not expect fails the command (after the outputs).
        if !spec.expect_divergence
            && let Some(row) = out.rows.iter().find(|row| !row.mean.is_finite())
        {
            r.failure = Some(dpfl::Error::data(
                format!("{} (figure {}, {})", row.algorithm, row.figure, row.metric),
                format!(
                    "is {} at epsilon {:?}: every step size of its grid diverged; narrow the \
                     grid, or set `expect_divergence = true` in the spec if this is expected",
                    row.mean, row.epsilon
                ),
            ));
        }
        r
    }

    /// `privacy.csv` beside the finished reproduction's `summary.csv` (kept as it is), each
    /// label's certificate from the plans alone, for as many trials as the summary has.
    fn rewrite(&mut self, data_dir: Option<&Path>, dir: &Path) -> dpfl::Result<Report> {
        let summary = dir.join("summary.csv");
        if !summary.is_file() {
            return Err(dpfl::Error::config(
                "--rewrite",
                format!(
                    "{} is not a finished reproduction (no summary.csv); run it first",
                    dir.display()
                ),
            ));
        }
        let text = std::fs::read_to_string(&summary).map_err(|source| dpfl::Error::Io {
            path: summary.clone(),
            source,
        })?;
        let trials = summary_trials(&text).ok_or_else(|| {
            dpfl::Error::data(
                summary.display().to_string(),
                "has no `trials` column with a whole number of trials",
            )
        })?;
        let spec = &ReproSpec {
            trials,
            ..self.spec.clone()
        };
        let start = std::time::Instant::now();
        let data = super::prepare(spec, data_dir)?;
        let rows = plan_privacy::plan_privacy(spec, &data)?;
        let path = dir.join("privacy.csv");
        crate::output::atomic_write(&path, plan_privacy::privacy_csv(&rows)?.as_bytes())?;
        let mut r = Report::default();
        let json = serde_json::json!({
            "id": spec.id,
            "rows": rows.iter().map(|r| serde_json::json!({
                "figure": r.figure,
                "algorithm": r.algorithm,
                "M": r.m,
                "labelled_epsilon": r.labelled_epsilon,
                "certified_epsilon": r.certified_epsilon,
                "certified_epsilon_min": r.certified_epsilon_min,
                "epsilon_lower_bound": r.epsilon_lower_bound,
                "meets_label": r.meets_label(),
            })).collect::<Vec<_>>(),
        });
        if let serde_json::Value::Object(m) = json {
            r.json = m;
        }
        r.lines.push(format!(
            "{}: what each label delivers, from the plans of {} trials ({:.1} s)",
            spec.id,
            spec.trials,
            start.elapsed().as_secs_f64()
        ));
        for row in &rows {
            r.lines.push(format!(
                "  Fig. {} {} (M = {}): labelled ε = {} — certified ε {}{}",
                row.figure,
                row.algorithm,
                row.m,
                row.labelled_epsilon,
                plan_privacy::certificate_range(row),
                if row.meets_label() {
                    ""
                } else {
                    " (label NOT met)"
                }
            ));
        }
        r.files.push(path);
        Ok(r)
    }
}

/// The largest value of the `trials` column of a reproduction's `summary.csv`.
fn summary_trials(text: &str) -> Option<usize> {
    let mut lines = text.lines();
    // The column is the last (`write_summary`), so a quoted label's commas do not move it.
    if lines.next()?.rsplit(',').next()?.trim() != "trials" {
        return None;
    }
    lines
        .filter_map(|l| l.rsplit(',').next()?.trim().parse::<usize>().ok())
        .max()
}

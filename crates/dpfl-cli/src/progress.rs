//! Progress of long commands. On a terminal: an indicatif bar (with a spinner that moves while
//! data load or a PCA is fitted). Off a terminal (a logged or piped run): one plain line on
//! standard error every `DPFL_PROGRESS_SECS` seconds (default 10), so a long run is never
//! silent; nothing for runs shorter than that.

use std::io::IsTerminal;
use std::sync::mpsc::{RecvTimeoutError, Sender};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The interval of progress lines off a terminal.
fn interval() -> Duration {
    std::env::var("DPFL_PROGRESS_SECS")
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .filter(|s| s.is_finite() && *s > 0.0)
        .map_or(Duration::from_secs(10), Duration::from_secs_f64)
}

pub struct Progress {
    bar: ProgressBar,
    /// Stops the thread of progress lines (off a terminal).
    stop: Option<Sender<()>>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    /// A progress display of `total` steps counted in `unit`, drawn with `template` on a
    /// terminal; nothing at all when `quiet`.
    pub fn new(total: u64, quiet: bool, template: &str, unit: &'static str) -> Self {
        if quiet {
            return Progress {
                bar: ProgressBar::hidden(),
                stop: None,
                ticker: None,
            };
        }
        if std::io::stderr().is_terminal() {
            let bar = ProgressBar::new(total);
            bar.set_style(
                ProgressStyle::with_template(template)
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> "),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            return Progress {
                bar,
                stop: None,
                ticker: None,
            };
        }
        // Off a terminal the bar only keeps the state; a thread prints it at a steady pace. It
        // waits on a channel, not in sleeps: `finish` wakes it at once (sleeping in 50 ms
        // steps made every command wait up to 50 ms for it at its end — a quarter of a
        // calibration's time; issue 30).
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        let b = bar.clone();
        let every = interval();
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let ticker = std::thread::spawn(move || {
            // A message or a closed channel (the `Progress` gone) both stop it.
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                let msg = b.message();
                let secs = b.elapsed().as_secs_f64();
                match b.length().unwrap_or(0) {
                    // A computation without steps (a calibration search): time only.
                    0 => eprintln!("progress: {msg} ({secs:.0} s)"),
                    len => {
                        let msg = if msg.is_empty() {
                            String::new()
                        } else {
                            format!("{msg}: ")
                        };
                        eprintln!("progress: {msg}{}/{len} {unit} ({secs:.0} s)", b.position());
                    }
                }
            }
        });
        Progress {
            bar,
            stop: Some(stop),
            ticker: Some(ticker),
        }
    }

    pub fn set_message(&self, msg: impl Into<String>) {
        self.bar.set_message(msg.into());
    }

    /// The number of steps, once known (a reproduction's jobs, after its data are loaded).
    pub fn set_length(&self, len: u64) {
        self.bar.set_length(len);
    }

    pub fn set_position(&self, pos: u64) {
        self.bar.set_position(pos);
    }

    /// Clears the bar or stops the progress lines.
    pub fn finish(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.bar.finish_and_clear();
        // Dropping the sender closes the channel, which ends the thread's wait.
        self.stop = None;
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop_now();
    }
}

/// What the progress display says while a data set is loaded and prepared.
pub fn loading_message(data: &dpfl_lab::experiment::DataSpec) -> &'static str {
    use dpfl_lab::experiment::datasource::Source;
    match data.source {
        Source::Mnist { pca: Some(_) } | Source::FashionMnist { pca: Some(_) } => {
            "loading data, fitting PCA"
        }
        _ => "loading data",
    }
}

//! The head of the small experiment files the tests write: synthetic binary data, a `[model]`
//! table and a `[privacy]` table with ε, δ and L = 1, line for line the text the tests used to
//! copy (so their `replace` edits and the line numbers their error messages name still hold).
//! What follows the head (privacy extras, `[[algorithms]]` tables) is the caller's.

/// The experiment file's head; start from [`Head::default`] and set what a test needs.
#[derive(Debug, Clone, Copy)]
pub struct Head<'a> {
    /// The experiment's name.
    pub name: &'a str,
    /// R.
    pub rounds: usize,
    /// The experiment seed.
    pub seed: u64,
    /// The `participation` table as TOML (e.g. `{ kind = "all" }`), or no such line.
    pub participation: Option<&'a str>,
    /// The top-level per-example `clip`, or no such line.
    pub clip: Option<f64>,
    /// N.
    pub silos: usize,
    /// Training records per silo.
    pub train: usize,
    /// Test records per silo.
    pub test: usize,
    /// Features.
    pub features: usize,
    /// The synthetic source's `shift`, or none.
    pub shift: Option<f64>,
    /// The `[model]` table's body.
    pub model: &'a str,
    /// ε.
    pub epsilon: f64,
    /// δ as TOML: a number (`1e-5`) or a quoted rule (`"1/n^2"`).
    pub delta: &'a str,
}

impl Default for Head<'_> {
    /// The command-line tests' usual head: "t", R = 5, seed 1, 3 silos of 50 + 10 records with
    /// 4 features, logistic regression, (ε, δ) = (1, 1/n²).
    fn default() -> Self {
        Head {
            name: "t",
            rounds: 5,
            seed: 1,
            participation: None,
            clip: None,
            silos: 3,
            train: 50,
            test: 10,
            features: 4,
            shift: None,
            model: r#"kind = "logistic""#,
            epsilon: 1.0,
            delta: r#""1/n^2""#,
        }
    }
}

impl<'a> Head<'a> {
    /// The federation tests' head: 3 silos of 60 + 20 records with shift 0.3, ε = 2, δ = 1/n².
    pub fn federation(name: &'a str, rounds: usize, seed: u64) -> Self {
        Head {
            name,
            rounds,
            seed,
            train: 60,
            test: 20,
            shift: Some(0.3),
            epsilon: 2.0,
            ..Head::default()
        }
    }

    /// The network shuffle tests' head: every silo every round, 4 silos of 100 + 20 records
    /// with shift 0.5, seed 3, (ε, δ) = (2, 1e-5).
    pub fn shuffle(name: &'a str, rounds: usize) -> Self {
        Head {
            name,
            rounds,
            seed: 3,
            participation: Some(r#"{ kind = "all" }"#),
            silos: 4,
            train: 100,
            test: 20,
            shift: Some(0.5),
            epsilon: 2.0,
            delta: "1e-5",
            ..Head::default()
        }
    }

    /// The whole file: a newline, the head (each line ending in a newline), then `rest`.
    pub fn toml(&self, rest: &str) -> String {
        let Head {
            name,
            rounds,
            seed,
            participation,
            clip,
            silos,
            train,
            test,
            features,
            shift,
            model,
            epsilon,
            delta,
        } = *self;
        let participation =
            participation.map_or(String::new(), |p| format!("participation = {p}\n"));
        let clip = clip.map_or(String::new(), |c| format!("clip = {c:?}\n"));
        let shift = shift.map_or(String::new(), |s| format!(", shift = {s}"));
        format!(
            r#"
name = "{name}"
rounds = {rounds}
seed = {seed}
{participation}{clip}[data]
source = {{ kind = "synthetic", task = "binary", silos = {silos}, train = {train}, test = {test}, features = {features}{shift} }}
[model]
{model}
[privacy]
epsilon = {epsilon:?}
delta = {delta}
lipschitz = 1.0
{rest}"#
        )
    }
}

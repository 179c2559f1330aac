//! A silo's own privacy budget and the check of a federation's plan against it, before the
//! silo reads its data (issue 11, item 5): the silo's operator, not the federation file,
//! decides (ε_i, δ_i) under ISRL-DP. Split from [`crate::config`], which re-exports both.

use std::path::Path;

use serde::{Deserialize, Serialize};

use dpfl::algo::Round;

use crate::config::Federation;
use crate::error::{NetError, Result};

/// A silo's own privacy budget (`dpfl silo --budget FILE`), kept by the silo's operator and
/// never read from the federation file: under ISRL-DP the silo is the only party its people
/// trust, so neither its (ε_i, δ_i) nor whether it enforces them may come from the
/// coordinator (issue 11, item 5). A plan (the federation's algorithm, calibration and
/// rounds) that would spend more is refused before the silo reads its data
/// ([`check_plan`]), and with `enforce` each round is charged to a ledger with this budget.
///
/// ```toml
/// epsilon = 1.0
/// delta = 1e-5
/// neighbouring = "replace-one"   # or "add-remove"
/// enforce = true                 # the default
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LocalBudget {
    /// ε_i; required when `enforce`.
    #[serde(default)]
    pub epsilon: Option<f64>,
    /// δ_i; required when `enforce`.
    #[serde(default)]
    pub delta: Option<f64>,
    /// The neighbouring relation ε_i, δ_i are stated under.
    #[serde(default = "replace_one")]
    pub neighbouring: dpfl_privacy::Neighbouring,
    /// Whether the silo refuses a round that would exceed its budget.
    #[serde(default = "yes")]
    pub enforce: bool,
}

fn replace_one() -> dpfl_privacy::Neighbouring {
    dpfl_privacy::Neighbouring::ReplaceOne
}
fn yes() -> bool {
    true
}

impl LocalBudget {
    /// Reads and checks a budget file (epsilon and delta valid when `enforce`).
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(NetError::io(path))?;
        let b: LocalBudget = toml::from_str(&text)
            .map_err(|e| NetError::config(path.display().to_string(), e.message().to_string()))?;
        match b.budget() {
            Err(NetError::Config { field, reason }) => Err(NetError::config(
                format!("{}: {field}", path.display()),
                reason,
            )),
            Err(e) => Err(e),
            Ok(_) => Ok(b),
        }
    }

    /// The budget to enforce, or `None` when enforcement is off.
    pub fn budget(&self) -> Result<Option<dpfl_privacy::ledger::Budget>> {
        if !self.enforce {
            return Ok(None);
        }
        let (Some(eps), Some(delta)) = (self.epsilon, self.delta) else {
            return Err(NetError::config(
                "epsilon/delta",
                "both are required when enforce = true (the default)",
            ));
        };
        dpfl_privacy::ledger::Budget::new(eps, delta, self.neighbouring)
            .map(Some)
            .map_err(|e| NetError::config("epsilon/delta", e.to_string()))
    }

    /// The file `dpfl federate` writes for a silo it runs itself: the experiment's budget,
    /// enforced when the experiment says `[privacy] enforce_budget`.
    pub fn to_toml(&self) -> String {
        let mut out = String::from(
            "# This silo's own budget (dpfl silo --budget FILE); the federation file cannot raise it.\n",
        );
        if let Some(e) = self.epsilon {
            out.push_str(&format!("epsilon = {e:?}\n"));
        }
        if let Some(d) = self.delta {
            out.push_str(&format!("delta = {d:?}\n"));
        }
        let n = match self.neighbouring {
            dpfl_privacy::Neighbouring::AddRemove => "add-remove",
            dpfl_privacy::Neighbouring::ReplaceOne => "replace-one",
        };
        out.push_str(&format!(
            "neighbouring = \"{n}\"\nenforce = {}\n",
            self.enforce
        ));
        out
    }
}

/// What a plan spends, as silo `id` would charge it: the events of its R rounds composed by
/// the RDP accountant (the ledger's) at the local δ_i under the local neighbouring relation.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanSpend {
    /// Rounds of the plan.
    pub rounds: usize,
    /// The ε those rounds spend at δ_i.
    pub epsilon: f64,
}

/// Refuses a federation whose plan would take silo `id` past its local budget, from public
/// facts only (the halves are built from the federation's public context; no data is read).
/// Every round counts as answered: the plan is judged by the most it could spend. `None`
/// when the silo does not enforce a budget.
pub fn check_plan(fed: &Federation, id: u32, local: &LocalBudget) -> Result<Option<PlanSpend>> {
    let Some(budget) = local.budget()? else {
        return Ok(None);
    };
    if !fed.algorithm.is_private() {
        return Err(NetError::Refused(format!(
            "silo {id}: the federation's algorithm `{}` adds no noise, and this silo enforces \
             its budget (ε = {}, δ = {}); set enforce = false in its budget file to take part",
            fed.algorithm.default_label(),
            budget.epsilon(),
            budget.delta()
        )));
    }
    if id as usize >= fed.silos() {
        return Err(NetError::config("--id", format!("no half for silo {id}")));
    }
    // Silo `id`'s half only, from the plan: no calibration.
    let half = dpfl::plan::silo_half(&fed.plan, dpfl::units::SiloId::new(id))?;
    let events: Vec<dpfl_privacy::PrivacyEvent> = (0..fed.rounds())
        .filter_map(|r| Round::checked(r).ok().and_then(|r| half.round_event(r)))
        .collect();
    let rounds = events.len();
    // The plan is judged by the same rule the silo's ledger charges with (RDP, and the
    // sampled PLD where RDP alone would refuse), so a plan the ledger would carry through is
    // not refused here, and one it would stop is.
    let epsilon = if events.is_empty() {
        0.0
    } else {
        let mut ledger = dpfl_privacy::ledger::Ledger::in_memory(
            budget,
            dpfl_privacy::accountant::AccountantKind::Rdp,
        );
        match ledger.charge(0, &dpfl_privacy::PrivacyEvent::Composed(events)) {
            Ok(_) => ledger.spent_epsilon()?,
            Err(dpfl_privacy::PrivacyError::BudgetExceeded { requested, .. }) => requested,
            Err(e) => return Err(e.into()),
        }
    };
    // NaN (a numerical failure) is refused too: never read as "within budget".
    let within = epsilon <= budget.epsilon();
    if !within {
        return Err(NetError::Refused(format!(
            "silo {id}: the federation's plan ({rounds} rounds of `{}`) spends ε = {epsilon:.4} \
             at δ = {} by the silo ledger's accountant, more than this silo's own budget ε = {}; \
             refusing before reading any data",
            fed.algorithm.default_label(),
            budget.delta(),
            budget.epsilon()
        )));
    }
    Ok(Some(PlanSpend { rounds, epsilon }))
}

/// Checks the public facts of the federation file against silo `id`'s own data before any
/// round: its record count n_i, the feature count, and the target (the number of classes,
/// or regression). A mismatch is refused with both values named (a class count smaller than
/// the data's once made every silo panic mid-round while the server reported success).
pub fn check_data(fed: &Federation, id: u32, data: &dpfl::data::SiloData) -> Result<()> {
    let p = &fed.config.public;
    let n = fed.silos();
    let want = *p.records.get(id as usize).ok_or_else(|| {
        NetError::config(
            "--id",
            format!("silo {id} is not in this federation of {n}"),
        )
    })?;
    let mismatch = |field: &str, theirs: String, ours: String| {
        NetError::config(
            format!("public.{field}"),
            format!("the federation file says {theirs}, silo {id}'s data has {ours}"),
        )
    };
    if data.train.len() != want {
        return Err(mismatch(
            &format!("records[{id}]"),
            want.to_string(),
            format!("{} training records", data.train.len()),
        ));
    }
    for d in [&data.train, &data.test] {
        if d.num_features() != p.features {
            return Err(mismatch(
                "features",
                p.features.to_string(),
                format!("{} features", d.num_features()),
            ));
        }
    }
    let ours = data.train.target().num_classes();
    if ours != p.classes {
        let say = |c: Option<usize>| match c {
            Some(c) => format!("{c} classes"),
            None => "a real-valued target (no classes)".to_string(),
        };
        return Err(mismatch("classes", say(p.classes), say(ours)));
    }
    Ok(())
}

//! How every simulated run starts and steps (issue 28 item 3: one run policy): the plan's
//! requirements (the shuffle model's fixed number of silos per round, Lowy & Razaviyayn §5; the
//! shuffle stage), the ledger policy, and the refusal rule. `dpfl train`, `dpfl config check`,
//! the audit-free reproductions (SoteriaFL, DP-NormFedAvg, shuffle rates) start their runs with
//! [`Simulator::start`] and step them with [`Simulator::round`], so none of them bypasses a check
//! that another applies.

use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::ledger::{Budget, Ledger};
use dpfl_privacy::{Delta, Epsilon, Neighbouring};

use crate::algo::wing::Requirements;
use crate::algo::{BuildContext, BuiltAlgorithm};
use crate::data::SiloData;
use crate::round::Participation;
use crate::sim::{RoundReport, Simulator};

/// How a run's silos hold their budgets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ledgers {
    /// No ledger refuses: the events are recorded ([`Simulator::spent`]) and the run's ε is
    /// certified from them afterwards. For runs whose label is not their certificate (the
    /// papers' noise presets) and for non-private runs.
    Record,
    /// Every silo with a budget in the build context holds an in-memory ledger (replace-one,
    /// RDP) that refuses a release past its budget; by [`Simulator::round`]'s rule a refusal
    /// stops the run, since a simulated run plans every round within every budget.
    Enforce,
}

/// The run's knobs besides the algorithm and the data.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Which silos answer each round.
    pub participation: Participation,
    /// The silos' and the network's streams (`None`: seeded from the operating system).
    pub seed: Option<u64>,
    /// The shuffle stage's stream, when the algorithm needs one (`None` with `seed` set would
    /// draw it from the OS; runners pass `seed` unless they keep an older stream).
    pub shuffle_seed: Option<u64>,
    /// The ledger policy.
    pub ledgers: Ledgers,
}

impl RunOptions {
    /// All knobs from one seed; the shuffle stage uses the same seed.
    pub fn seeded(participation: Participation, seed: Option<u64>, ledgers: Ledgers) -> Self {
        RunOptions {
            participation,
            seed,
            shuffle_seed: seed,
            ledgers,
        }
    }
}

/// The ledger a simulated silo with `budget` holds under [`Ledgers::Enforce`]: replace-one,
/// charged by RDP, in memory. Checks that judge a plan "as the run's ledger would" (`dpfl
/// config check`) build theirs here, so the two cannot drift apart.
pub fn silo_ledger((eps, delta): (Epsilon, Delta)) -> crate::Result<Ledger> {
    let budget = Budget::new(eps.get(), delta.get(), Neighbouring::ReplaceOne)?;
    Ok(Ledger::in_memory(budget, AccountantKind::Rdp))
}

impl<'a> Simulator<'a> {
    /// A run as every runner of a plan starts one: the simulator over `data`, refused when
    /// `needs` asks for a fixed number of silos per round and `opts.participation` is not
    /// `all` or `fixed`, with the shuffle stage when `needs.shuffler`, and with the ledgers of
    /// `opts.ledgers` (budgets from `ctx.silos`).
    pub fn start(
        data: &'a [SiloData],
        built: BuiltAlgorithm,
        ctx: &BuildContext,
        needs: &Requirements,
        opts: RunOptions,
    ) -> crate::Result<Self> {
        let mut sim = Simulator::new(data, built, opts.participation.clone(), opts.seed)?;
        if needs.fixed_participation
            && !matches!(
                opts.participation,
                Participation::All | Participation::Fixed { .. }
            )
        {
            return Err(crate::Error::config(
                "participation",
                "shuffle-model algorithms need a fixed number of silos per round (all or fixed)",
            ));
        }
        if needs.shuffler {
            sim = sim.with_shuffle(opts.shuffle_seed)?;
        }
        if opts.ledgers == Ledgers::Enforce {
            let ledgers = ctx
                .silos
                .iter()
                .map(|s| s.budget.map(silo_ledger).transpose())
                .collect::<crate::Result<Vec<_>>>()?;
            sim.attach_ledgers(ledgers)?;
        }
        Ok(sim)
    }

    /// One round under the run's refusal rule: the round core leaves a refusing silo out of
    /// its round, but a simulated run plans every round within every silo's budget, so a
    /// refusal means the plan does not fit: it is reported as the error, rather than finishing
    /// a different experiment.
    pub fn round(&mut self) -> crate::Result<RoundReport> {
        let report = self.step()?;
        match self.take_refusals().into_iter().next() {
            None => Ok(report),
            Some((silo, refusal)) => Err(match refusal.privacy {
                Some(e) => e.into(),
                None => crate::Error::Protocol(format!("silo {silo}: {refusal}")),
            }),
        }
    }
}

/// What a driven run does when a round diverges (`Error::Diverged`: the iterate left the
/// finite numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDiverged {
    /// The run fails with the divergence (`dpfl train`: a diverged model is no result).
    Fail,
    /// The run stops and reports it ([`Finished::Diverged`]): a reproduction records a
    /// diverged run (the noise overwhelms the step size) as a result and goes on.
    Stop,
}

/// How a driven run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Finished {
    /// Every round ran.
    Completed,
    /// Round `round` (from 1) diverged under [`OnDiverged::Stop`]; rounds before it completed.
    Diverged {
        /// The round that diverged, from 1.
        round: usize,
        /// Why.
        why: String,
    },
}

impl Simulator<'_> {
    /// The one run loop (issue 28 item 3): rounds [`Self::rounds_done`]` + 1 ..= rounds`, each
    /// under [`Self::round`]'s refusal rule, then `after_round(sim, round, report)` (`round`
    /// from 1) for evaluation, checkpoints and progress. A run restored from a snapshot
    /// continues where the snapshot stands. A divergence fails the run or stops it, as
    /// `on_diverged` says; any other error fails it.
    pub fn drive(
        &mut self,
        rounds: usize,
        on_diverged: OnDiverged,
        mut after_round: impl FnMut(&Self, usize, &RoundReport) -> crate::Result<()>,
    ) -> crate::Result<Finished> {
        for k in self.rounds_done()..rounds {
            let report = match self.round() {
                Err(crate::Error::Diverged(why)) if on_diverged == OnDiverged::Stop => {
                    return Ok(Finished::Diverged { round: k + 1, why });
                }
                r => r?,
            };
            after_round(self, k + 1, &report)?;
        }
        Ok(Finished::Completed)
    }
}

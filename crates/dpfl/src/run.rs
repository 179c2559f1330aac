//! How every run starts and steps (issue 28 item 3: one run policy): the plan's requirements
//! (the shuffle model's fixed number of silos per round, Lowy & Razaviyayn §5; the shuffle
//! stage), the ledger policy, and the run loop. `dpfl train`, `dpfl config check`, the audit
//! and the reproductions start their simulated runs with [`Simulator::start`] and drive them
//! with [`Simulator::drive`], so none of them bypasses a check that another applies.
//!
//! [`RunLoop`] holds the run policy itself, once for both runners: which round is next (a
//! resumed run continues at its rounds done), what ends a run (the last round, a pause after
//! `stop_after` rounds, a round that released nothing), and what a refusal ([`OnRefused`]) or a
//! divergence ([`OnDiverged`]) does. [`Simulator::drive`] is the simulator between its calls;
//! `dpfl-net`'s server runs the same loop with a network round between its calls
//! ([`Policy::simulated`] and [`Policy::federated`] name where the two runners differ).

use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::ledger::{Budget, Ledger};
use dpfl_privacy::{Delta, Epsilon, Neighbouring};

use crate::algo::Round;
use crate::algo::wing::Requirements;
use crate::algo::{BuildContext, BuiltAlgorithm};
use crate::data::SiloData;
use crate::round::{Participation, Refusal};
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

    /// One round under the simulated runs' refusal rule ([`OnRefused::Fail`]): the round core
    /// leaves a refusing silo out of its round, but a simulated run plans every round within
    /// every silo's budget, so a refusal means the plan does not fit: it is reported as the
    /// error, rather than finishing a different experiment.
    pub fn round(&mut self) -> crate::Result<RoundReport> {
        let report = self.step()?;
        fail_on_refusal(self.take_refusals())?;
        Ok(report)
    }
}

/// What a run does when a round diverges (`Error::Diverged`: the iterate left the finite
/// numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnDiverged {
    /// The run fails with the divergence (`dpfl train`, `dpfl federate`: a diverged model is
    /// no result).
    Fail,
    /// The run stops and reports it ([`Finished::Diverged`]): a reproduction records a
    /// diverged run (the noise overwhelms the step size) as a result and goes on.
    Stop,
}

/// What a run does when a silo's ledger refuses a round (the round core has already left the
/// silo out of that round's aggregate, [`crate::round`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnRefused {
    /// The run fails with the first refusal: a simulated run plans every round within every
    /// silo's budget, so a refusal means the plan does not fit, and finishing would report a
    /// different experiment than the one planned.
    Fail,
    /// The run goes on without the refusing silo: in a federation each silo's durable ledger
    /// may hold spending this run never planned (an earlier run, a restarted silo), which only
    /// the silo knows; the server learns of the refusal, logs who answered, and goes on.
    LeaveOut,
}

/// A run's policy: what a divergence and a refusal do, and whether this process stops early.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// What a divergence does.
    pub on_diverged: OnDiverged,
    /// What a refusal does.
    pub on_refused: OnRefused,
    /// Stop after this many rounds of this process (`server.stop_after_rounds`); a restarted
    /// runner resumes from its checkpoint. `None`: run to the last round.
    pub stop_after: Option<usize>,
}

impl Policy {
    /// Every simulated run ([`Simulator::drive`]): a refusal fails it, it runs to the end.
    pub fn simulated(on_diverged: OnDiverged) -> Self {
        Policy {
            on_diverged,
            on_refused: OnRefused::Fail,
            stop_after: None,
        }
    }

    /// A federation's server (`dpfl-net`): a refusal leaves the silo out, a divergence fails
    /// the run (as `dpfl train`'s does), and the process stops after `stop_after` rounds.
    pub fn federated(stop_after: Option<usize>) -> Self {
        Policy {
            on_diverged: OnDiverged::Fail,
            on_refused: OnRefused::LeaveOut,
            stop_after,
        }
    }
}

/// How a run ended.
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
    /// This process ran its [`Policy::stop_after`] rounds before the last; a runner restarted
    /// from its checkpoint goes on at `rounds_done`.
    Paused {
        /// Rounds done so far (the next round's number).
        rounds_done: usize,
    },
    /// Round `round` released nothing (a network shuffler withheld a batch smaller than the
    /// quorum its privacy was calibrated for): the round is not done, the run stops there, and
    /// a runner restarted from its checkpoint runs that round again.
    Withheld {
        /// The round that released nothing, the next round to run.
        round: Round,
    },
}

/// What a run does next ([`RunLoop::next`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Run this round, then report it with [`RunLoop::released`], [`RunLoop::failed`] or
    /// [`RunLoop::withheld`].
    Run(Round),
    /// The run ends here.
    End(Finished),
}

/// The one run policy of every runner (issue 28 item 3), synchronous and free of transport:
/// which round is next (a resumed run starts at its rounds done), when the run ends (the last
/// round, [`Policy::stop_after`], a round that released nothing), and what a refusal
/// ([`OnRefused`]) or a divergence ([`OnDiverged`]) does. [`Simulator::drive`] steps the
/// simulator between its calls; `dpfl-net`'s server does the network I/O of a round between
/// them, so both runners follow the same rules.
#[derive(Debug, Clone)]
pub struct RunLoop {
    rounds: usize,
    done: usize,
    this_process: usize,
    policy: Policy,
}

impl RunLoop {
    /// A run of `rounds` rounds of which `done` are done (0, or what a checkpoint or
    /// snapshot holds).
    pub fn new(rounds: usize, done: usize, policy: Policy) -> Self {
        RunLoop {
            rounds,
            done,
            this_process: 0,
            policy,
        }
    }

    /// Rounds done (the next round's number).
    pub fn rounds_done(&self) -> usize {
        self.done
    }

    /// Rounds this loop has seen released (a resumed run's earlier rounds excluded).
    pub fn rounds_this_process(&self) -> usize {
        self.this_process
    }

    /// The next round, or how the run ends before it: completed once every round is done
    /// (even when `stop_after` is also reached), paused after `stop_after` rounds.
    pub fn next(&self) -> crate::Result<Next> {
        if self.done >= self.rounds {
            return Ok(Next::End(Finished::Completed));
        }
        if self
            .policy
            .stop_after
            .is_some_and(|k| self.this_process >= k)
        {
            return Ok(Next::End(Finished::Paused {
                rounds_done: self.done,
            }));
        }
        Ok(Next::Run(Round::checked(self.done)?))
    }

    /// The round [`Self::next`] gave was aggregated, with these refusals: under
    /// [`OnRefused::Fail`] the first one fails the run; otherwise the round is done.
    pub fn released(&mut self, refused: Vec<(u32, Refusal)>) -> crate::Result<()> {
        if self.policy.on_refused == OnRefused::Fail {
            fail_on_refusal(refused)?;
        }
        self.done += 1;
        self.this_process += 1;
        Ok(())
    }

    /// The round failed with `e`: a divergence ends the run under [`OnDiverged::Stop`]
    /// ([`Finished::Diverged`], the round from 1); anything else, and a divergence under
    /// [`OnDiverged::Fail`], fails it.
    pub fn failed(&self, e: crate::Error) -> crate::Result<Finished> {
        match e {
            crate::Error::Diverged(why) if self.policy.on_diverged == OnDiverged::Stop => {
                Ok(Finished::Diverged {
                    round: self.done + 1,
                    why,
                })
            }
            e => Err(e),
        }
    }

    /// The round released nothing: it is not done, and the run stops at it
    /// ([`Finished::Withheld`]), so a restarted runner runs it again.
    pub fn withheld(&self) -> crate::Result<Finished> {
        Ok(Finished::Withheld {
            round: Round::checked(self.done)?,
        })
    }
}

/// [`OnRefused::Fail`]: the first refusal as the run's error (the accountant's own error when
/// a budget refused).
fn fail_on_refusal(refused: Vec<(u32, Refusal)>) -> crate::Result<()> {
    match refused.into_iter().next() {
        None => Ok(()),
        Some((silo, refusal)) => Err(match refusal.privacy {
            Some(e) => e.into(),
            None => crate::Error::Protocol(format!("silo {silo}: {refusal}")),
        }),
    }
}

impl Simulator<'_> {
    /// The one simulated run loop: [`RunLoop`] under [`Policy::simulated`] (rounds
    /// [`Self::rounds_done`]` + 1 ..= rounds`, so a run restored from a snapshot continues
    /// where it stands; a refusal fails the run; a divergence fails or stops it, as
    /// `on_diverged` says), with `after_round(sim, round, report)` (`round` from 1) after each
    /// round for evaluation, checkpoints and progress.
    pub fn drive(
        &mut self,
        rounds: usize,
        on_diverged: OnDiverged,
        mut after_round: impl FnMut(&Self, usize, &RoundReport) -> crate::Result<()>,
    ) -> crate::Result<Finished> {
        let mut run = RunLoop::new(rounds, self.rounds_done(), Policy::simulated(on_diverged));
        loop {
            if let Next::End(end) = run.next()? {
                return Ok(end);
            }
            let report = match self.step() {
                Ok(report) => report,
                Err(e) => return run.failed(e),
            };
            run.released(self.take_refusals())?;
            after_round(self, run.rounds_done(), &report)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(round: u32, privacy: Option<dpfl_privacy::PrivacyError>) -> Refusal {
        Refusal {
            round: Round::new(round),
            reason: "budget".into(),
            privacy,
        }
    }

    /// Runs `run` to its end, releasing every round without refusals; the rounds it ran.
    fn run_out(run: &mut RunLoop) -> (Vec<u32>, Finished) {
        let mut ran = Vec::new();
        loop {
            match run.next().unwrap() {
                Next::Run(r) => {
                    ran.push(r.get());
                    run.released(Vec::new()).unwrap();
                }
                Next::End(end) => return (ran, end),
            }
        }
    }

    #[test]
    fn a_resumed_run_starts_at_its_rounds_done_and_completes_at_the_last() {
        let mut run = RunLoop::new(5, 3, Policy::simulated(OnDiverged::Fail));
        assert_eq!(run_out(&mut run), (vec![3, 4], Finished::Completed));
        assert_eq!((run.rounds_done(), run.rounds_this_process()), (5, 2));
        // Past the last round (a snapshot of a longer run): nothing runs.
        let mut run = RunLoop::new(5, 7, Policy::simulated(OnDiverged::Fail));
        assert_eq!(run_out(&mut run), (vec![], Finished::Completed));
    }

    #[test]
    fn stop_after_pauses_this_process_but_the_last_round_completes() {
        let mut run = RunLoop::new(10, 2, Policy::federated(Some(3)));
        assert_eq!(
            run_out(&mut run),
            (vec![2, 3, 4], Finished::Paused { rounds_done: 5 })
        );
        // The restarted process goes on where this one paused.
        let mut run = RunLoop::new(10, 5, Policy::federated(Some(3)));
        assert_eq!(run_out(&mut run).0, vec![5, 6, 7]);
        // Reaching the pause and the last round together is a completed run.
        let mut run = RunLoop::new(10, 7, Policy::federated(Some(3)));
        assert_eq!(run_out(&mut run), (vec![7, 8, 9], Finished::Completed));
        let run = RunLoop::new(10, 0, Policy::federated(Some(0)));
        assert_eq!(
            run.next().unwrap(),
            Next::End(Finished::Paused { rounds_done: 0 })
        );
    }

    #[test]
    fn a_withheld_round_is_not_done_and_ends_the_run_at_it() {
        let mut run = RunLoop::new(4, 0, Policy::federated(None));
        assert_eq!(run.next().unwrap(), Next::Run(Round::new(0)));
        run.released(Vec::new()).unwrap();
        assert_eq!(run.next().unwrap(), Next::Run(Round::new(1)));
        assert_eq!(
            run.withheld().unwrap(),
            Finished::Withheld {
                round: Round::new(1)
            }
        );
        assert_eq!(run.rounds_done(), 1, "the withheld round is the next round");
        assert_eq!(run.next().unwrap(), Next::Run(Round::new(1)));
    }

    #[test]
    fn a_divergence_stops_or_fails_as_the_policy_says() {
        let diverged = || crate::Error::Diverged("w is NaN".into());
        let mut stop = RunLoop::new(5, 0, Policy::simulated(OnDiverged::Stop));
        stop.released(Vec::new()).unwrap();
        assert_eq!(
            stop.failed(diverged()).unwrap(),
            Finished::Diverged {
                round: 2,
                why: "w is NaN".into()
            }
        );
        // Any other error fails the run even under Stop.
        let e = stop.failed(crate::Error::Protocol("lost".into()));
        assert!(matches!(e, Err(crate::Error::Protocol(m)) if m == "lost"));
        let fail = RunLoop::new(5, 0, Policy::simulated(OnDiverged::Fail));
        assert!(
            matches!(fail.failed(diverged()), Err(crate::Error::Diverged(m)) if m == "w is NaN")
        );
        // The federated policy fails a diverged run too (as `dpfl train` does).
        let fed = RunLoop::new(5, 0, Policy::federated(None));
        assert!(matches!(
            fed.failed(diverged()),
            Err(crate::Error::Diverged(_))
        ));
    }

    #[test]
    fn a_refusal_fails_a_simulated_run_and_leaves_a_federated_silo_out() {
        let exceeded = dpfl_privacy::PrivacyError::BudgetExceeded {
            release: 3,
            spent: 0.9,
            requested: 1.2,
            budget: 1.0,
            delta: 1e-5,
        };
        let mut sim = RunLoop::new(5, 3, Policy::simulated(OnDiverged::Stop));
        let e = sim
            .released(vec![(2, refusal(3, Some(exceeded))), (4, refusal(3, None))])
            .unwrap_err();
        assert!(
            matches!(
                e,
                crate::Error::Privacy(dpfl_privacy::PrivacyError::BudgetExceeded {
                    release: 3,
                    ..
                })
            ),
            "{e:?}"
        );
        assert_eq!(sim.rounds_done(), 3, "a refused round is not counted done");
        let e = sim.released(vec![(4, refusal(3, None))]).unwrap_err();
        assert!(
            matches!(&e, crate::Error::Protocol(m) if m == "silo 4: round 3 refused: budget"),
            "{e:?}"
        );
        let mut fed = RunLoop::new(5, 3, Policy::federated(None));
        fed.released(vec![(4, refusal(3, None))]).unwrap();
        assert_eq!(fed.next().unwrap(), Next::Run(Round::new(4)));
    }
}

//! Shuffle-model runs under `enforce_budget` (issue 15 leftover): the silos' RDP ledgers
//! charge the (ε, δ) events of PVEC silos by δ-approximate RDP
//! (`dpfl_privacy::accountant::approximate`) instead of refusing them, and refuse a round
//! once the composed spend would pass the budget.

use dpfl::algo::AlgorithmSpec;
use dpfl::experiment::{ExperimentSpec, prepare_trial, train_one};
use dpfl::sim::{Participation, Simulator};
use dpfl_privacy::accountant::AccountantKind;
use dpfl_privacy::ledger::{Budget, Ledger};
use dpfl_privacy::rng::Purpose;
use dpfl_privacy::{DpRng, Neighbouring};

fn experiment(algorithm: &str) -> ExperimentSpec {
    let text = format!(
        r#"
name = "shuffle-enforced"
rounds = 10
seed = 3
participation = {{ kind = "all" }}
[data]
source = {{ kind = "synthetic", task = "binary", silos = 4, train = 200, test = 50, features = 4, shift = 0.5 }}
[model]
kind = "logistic"
[privacy]
epsilon = 2.0
delta = 1e-5
lipschitz = 1.0
enforce_budget = true
[[algorithms]]
{algorithm}
"#
    );
    ExperimentSpec::from_toml(&text, "shuffle-enforced.toml").unwrap()
}

#[test]
fn shuffle_runs_with_enforce_budget_are_charged_not_refused() {
    // PSGD (untrusted shuffler: each silo's own binomial-noise guarantee per disjoint batch)
    // and PGD (trusted: the per-round (ε₀, δ₀) of advanced composition) both planned within
    // (2, 1e-5); before the ledger took (ε, δ) events both failed closed here.
    for alg in [
        "kind = \"psgd\"\nstep_size = 0.5",
        "kind = \"pgd\"\nshuffler = \"trusted\"\nstep_size = 0.5",
    ] {
        let spec = experiment(alg);
        let mut rng = DpRng::from_seed(5, Purpose::Data, 0);
        let trial = prepare_trial(&spec, None, &mut rng).unwrap();
        let run = train_one(&spec, &spec.algorithms[0].spec, &trial, Some(7), 5, |_| {})
            .unwrap_or_else(|e| panic!("{alg}: {e}"));
        assert!(run.final_model.iter().all(|v| v.is_finite()), "{alg}");
    }
}

#[test]
fn a_pgd_silo_is_charged_every_round_and_refused_past_its_budget() {
    // PGD at (ε, δ) = (2, 1e-5) over R = 10 rounds: each round is (ε₀, δ₀) =
    // (0.0640025, 5e-7) (tests/shuffle_wing.rs by hand). By δ-approximate RDP the 10 rounds
    // spend well under 2; every further round adds ε₀ and δ₀, and after round 2R = 20 the
    // rounds' own δ reach δ, so the ledger must refuse the 21st round (index 20) at the
    // latest.
    let spec = experiment("kind = \"pgd\"\nshuffler = \"trusted\"\nstep_size = 0.5");
    let mut rng = DpRng::from_seed(5, Purpose::Data, 0);
    let trial = prepare_trial(&spec, None, &mut rng).unwrap();
    let setup = dpfl::experiment::setup(&spec, &trial).unwrap();
    let ctx = setup.context_with(trial.model.clone()).unwrap();
    let alg: AlgorithmSpec = spec.algorithms[0].spec.clone();
    let built = alg.build(&ctx).unwrap();
    let silos = ctx.silos.len();
    let mut sim = Simulator::new(&trial.silos, built, Participation::All, Some(1))
        .unwrap()
        .with_shuffle(Some(1))
        .unwrap();
    let ledgers = (0..silos)
        .map(|_| {
            Some(Ledger::in_memory(
                Budget::new(2.0, 1e-5, Neighbouring::ReplaceOne).unwrap(),
                AccountantKind::Rdp,
            ))
        })
        .collect();
    sim.attach_ledgers(ledgers).unwrap();
    for r in 0..10 {
        let report = sim.step().unwrap();
        assert!(report.refused.is_empty(), "round {r}: {:?}", report.refused);
        assert_eq!(report.participants, silos);
    }
    // Each silo has charged ten (ε₀, δ₀) events.
    for events in sim.spent() {
        assert_eq!(events.len(), 10);
    }
    let mut refused_at = None;
    for r in 10..25 {
        match sim.step() {
            Ok(report) if report.refused.is_empty() => {}
            Ok(report) => {
                assert_eq!(report.refused.len(), silos, "round {r}");
                refused_at = Some(r);
                break;
            }
            // Every silo refused and the analyzer had nothing to sum: also a refusal.
            Err(e) => {
                assert!(sim.take_refusals().len() == silos, "round {r}: {e}");
                refused_at = Some(r);
                break;
            }
        }
    }
    let r = refused_at.expect("never refused");
    assert!((10..=20).contains(&r), "refused at round {r}");
    for events in sim.spent() {
        assert_eq!(events.len(), r, "a refused round must not be charged");
    }
}

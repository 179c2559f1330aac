//! The round core with a toy algorithm: multi-message replies of packed, labelled messages,
//! the simulator's shuffle stage, and the one refusal rule (a refusing silo is left out of
//! its round; the others answer).

use dpfl::data::SiloData;
use dpfl::sim::{Participation, Simulator};
use dpfl_testkit::{MESSAGES, tiny_silo, toy_algorithm};

fn data(silos: usize) -> Vec<SiloData> {
    (0..silos).map(|_| tiny_silo(2)).collect()
}

fn toy(silos: u32, private: bool) -> (dpfl::algo::BuiltAlgorithm, dpfl_testkit::Seen) {
    toy_algorithm(silos, 1, private)
}

fn in_silo_order(silos: u32) -> Vec<(u32, u64)> {
    (0..silos)
        .flat_map(|id| (0..MESSAGES).map(move |k| (k, u64::from(10 * id + k))))
        .collect()
}

#[test]
fn multi_message_replies_reach_the_server_in_silo_order_without_a_shuffler() {
    let d = data(3);
    let (built, seen) = toy(3, false);
    let mut sim = Simulator::new(&d, built, Participation::All, Some(1)).unwrap();
    let report = sim.step().unwrap();
    assert_eq!(report.participants, 3);
    // 12 messages of 32 label bits + 8 value bits.
    assert_eq!(report.message_bits, 12 * 40);
    assert_eq!(seen.lock().unwrap()[0], in_silo_order(3));
}

#[test]
fn the_shuffle_stage_permutes_messages_not_replies_reproducibly() {
    let run = |seed| {
        let d = data(3);
        let (built, seen) = toy(3, false);
        let mut sim = Simulator::new(&d, built, Participation::All, Some(seed))
            .unwrap()
            .with_shuffle(Some(seed))
            .unwrap();
        sim.step().unwrap();
        sim.step().unwrap();
        seen.lock().unwrap().clone()
    };
    let a = run(5);
    assert_eq!(a, run(5), "seeded shuffles repeat");
    for round in &a {
        let mut sorted = round.clone();
        sorted.sort_by_key(|&(_, v)| v);
        assert_eq!(sorted, in_silo_order(3), "the same 12 messages");
        // Messages of one silo do not stay together: a permutation of 12 messages keeps all
        // three replies contiguous with probability 3!·(4!)³/12! ≈ 1.7e-4.
        let contiguous = round
            .chunks(MESSAGES as usize)
            .all(|c| c.iter().all(|&(_, v)| v / 10 == c[0].1 / 10));
        assert!(!contiguous, "{round:?}");
    }
    assert_ne!(a[0], a[1], "a fresh permutation each round");
}

#[test]
fn a_refusing_silo_is_left_out_of_its_round() {
    use dpfl_privacy::accountant::AccountantKind;
    use dpfl_privacy::ledger::{Budget, Ledger};
    let d = data(3);
    let (built, seen) = toy(3, true);
    let mut sim = Simulator::new(&d, built, Participation::All, Some(2)).unwrap();
    // Silo 1's budget cannot pay one Gaussian release at noise multiplier 0.5 (ε ≫ 0.01).
    let budget = |eps| Budget::new(eps, 1e-5, dpfl_privacy::Neighbouring::AddRemove).unwrap();
    sim.attach_ledgers(vec![
        None,
        Some(Ledger::in_memory(budget(0.01), AccountantKind::Rdp)),
        Some(Ledger::in_memory(budget(100.0), AccountantKind::Rdp)),
    ])
    .unwrap();
    let report = sim.step().unwrap();
    assert_eq!(report.refused, vec![1]);
    assert_eq!(report.participants, 2);
    let refusals = sim.take_refusals();
    assert_eq!(refusals.len(), 1);
    assert!(refusals[0].1.reason.contains("budget"), "{}", refusals[0].1);
    let expected: Vec<_> = in_silo_order(3)
        .into_iter()
        .filter(|&(_, v)| v / 10 != 1)
        .collect();
    assert_eq!(seen.lock().unwrap()[0], expected);
    // The refused silo spent nothing; the others one event each.
    let spent: Vec<usize> = sim.spent().iter().map(Vec::len).collect();
    assert_eq!(spent, vec![1, 0, 1]);
}

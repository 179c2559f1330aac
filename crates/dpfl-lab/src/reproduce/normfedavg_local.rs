//! The local-training knobs of the DP-NormFedAvg reproductions (issue 32 item 3): `--momentum`
//! and `--step-decay` set every algorithm's heavy-ball momentum and η_k = η₀·decay^k factor,
//! so the suspected causes of the level gap can be tested without editing the plans;
//! `--algorithms` runs a chosen subset.
//!
//! Why these two: Das et al. §6 say "the standard momentum of PyTorch with its default value",
//! which is 0 in PyTorch, while the plans use 0.9 (digest §6.2 item 3); App. H's η_k = 0.99^k η₀
//! has spent 98 % of its step sum by round 400, so the decay decides how much the rounds the
//! paper never states can still change. Each spec carries both values, and the plan (specs
//! included) is the checkpoint's fingerprint, so a resumed run never mixes settings; unset,
//! the plans are untouched.

use super::normfedavg::Plan;

/// Sets every algorithm's momentum and step decay where given (`None` keeps the plan's 0.9
/// and 0.99). A value outside momentum ∈ [0, 1) or decay ∈ (0, 1] is refused, naming the flag.
pub fn set_local_training(
    plan: &mut Plan,
    momentum: Option<f64>,
    step_decay: Option<f64>,
) -> dpfl::Result<()> {
    if let Some(m) = momentum {
        // Momentum 1 never forgets a gradient (the steps grow without bound within a round).
        if !(0.0..1.0).contains(&m) {
            return Err(dpfl::Error::config(
                "--momentum",
                format!("{m} is outside [0, 1) (0 is plain SGD, PyTorch's default)"),
            ));
        }
    }
    if let Some(q) = step_decay {
        // Above 1 the local step grows every round; 0 stops training after round 0.
        if !(q > 0.0 && q <= 1.0) {
            return Err(dpfl::Error::config(
                "--step-decay",
                format!("{q} is outside (0, 1] (eta_k = eta_0 * decay^k; the paper's 0.99)"),
            ));
        }
    }
    for (_, spec) in &mut plan.algorithms {
        if let Some(m) = momentum {
            spec.momentum = m;
        }
        if let Some(q) = step_decay {
            spec.step_decay = q;
        }
    }
    Ok(())
}

/// Keeps only the named algorithms, in the order named (`--algorithms`: a reduced run on a
/// loaded machine puts the comparison that matters first). The list is part of the plan, so
/// of the checkpoint's fingerprint. An unknown or repeated label is refused, listing the plan's.
pub fn keep_algorithms(plan: &mut Plan, labels: &[String]) -> dpfl::Result<()> {
    let known = || {
        plan.algorithms
            .iter()
            .map(|(l, _)| format!("{l:?}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut kept = Vec::with_capacity(labels.len());
    for (i, label) in labels.iter().enumerate() {
        if labels[..i].contains(label) {
            return Err(dpfl::Error::config(
                "--algorithms",
                format!("{label:?} is named twice"),
            ));
        }
        match plan.algorithms.iter().find(|(l, _)| l == label) {
            Some(a) => kept.push(a.clone()),
            None => {
                return Err(dpfl::Error::config(
                    "--algorithms",
                    format!(
                        "{label:?} is not in {}; its algorithms: {}",
                        plan.id,
                        known()
                    ),
                ));
            }
        }
    }
    if kept.is_empty() {
        return Err(dpfl::Error::config("--algorithms", "names no algorithm"));
    }
    plan.algorithms = kept;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::normfedavg::{IDS, plan};
    use super::*;

    #[test]
    fn the_flags_change_every_spec_and_the_fingerprint() {
        for id in IDS {
            let base = plan(id, false).unwrap();
            let mut same = base.clone();
            set_local_training(&mut same, None, None).unwrap();
            assert_eq!(same.fingerprint().unwrap(), base.fingerprint().unwrap());
            // The plan's own values are the default: naming them changes nothing.
            set_local_training(&mut same, Some(0.9), Some(0.99)).unwrap();
            assert_eq!(same.fingerprint().unwrap(), base.fingerprint().unwrap());

            let mut m0 = base.clone();
            set_local_training(&mut m0, Some(0.0), None).unwrap();
            assert!(m0.algorithms.iter().all(|(_, s)| s.momentum == 0.0));
            assert!(m0.algorithms.iter().all(|(_, s)| s.step_decay == 0.99));
            let mut q = base.clone();
            set_local_training(&mut q, None, Some(0.995)).unwrap();
            assert!(q.algorithms.iter().all(|(_, s)| s.step_decay == 0.995));
            assert_eq!(
                q.algorithms[0].1.eta().at(2),
                0.995 * 0.995 * q.algorithms[0].1.step_size
            );
            let prints = [
                base.fingerprint().unwrap(),
                m0.fingerprint().unwrap(),
                q.fingerprint().unwrap(),
            ];
            assert!(prints[0] != prints[1] && prints[0] != prints[2] && prints[1] != prints[2]);
        }
    }

    #[test]
    fn algorithms_are_kept_in_the_order_named() {
        let base = plan("normfedavg-fmnist-bits", false).unwrap();
        let mut p = base.clone();
        let names = ["Bin s = 2^12", "QTDL s = 2^6 (paper's claim)"].map(String::from);
        keep_algorithms(&mut p, &names).unwrap();
        let labels: Vec<&str> = p.algorithms.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, names);
        assert_eq!(p.algorithms[0].1, base.algorithms[4].1);
        assert_ne!(p.fingerprint().unwrap(), base.fingerprint().unwrap());
        let e = keep_algorithms(&mut p.clone(), &["QTDL s = 2^8".into()]).unwrap_err();
        assert!(
            e.to_string().contains("Bin s = 2^12"),
            "lists the known: {e}"
        );
        let twice = ["Bin s = 2^12".to_string(), "Bin s = 2^12".to_string()];
        assert!(keep_algorithms(&mut p.clone(), &twice).is_err());
        assert!(keep_algorithms(&mut p.clone(), &[]).is_err());
        assert_eq!(p.algorithms.len(), 2, "a refusal leaves the plan");
    }

    #[test]
    fn bad_values_are_refused_naming_the_flag() {
        let mut p = plan("normfedavg-fmnist-fedavg", true).unwrap();
        let before = p.fingerprint().unwrap();
        for m in [1.0, -0.1, f64::NAN, 2.0] {
            let e = set_local_training(&mut p, Some(m), None).unwrap_err();
            assert!(e.to_string().contains("--momentum"), "{e}");
        }
        for q in [0.0, -0.5, 1.01, f64::NAN, f64::INFINITY] {
            let e = set_local_training(&mut p, None, Some(q)).unwrap_err();
            assert!(e.to_string().contains("--step-decay"), "{e}");
        }
        // A refused pair leaves the plan as it was, even when one of the two is good.
        assert!(set_local_training(&mut p, Some(0.0), Some(2.0)).is_err());
        assert_eq!(p.fingerprint().unwrap(), before);
        // The boundaries that are allowed: plain SGD and a constant step.
        set_local_training(&mut p, Some(0.0), Some(1.0)).unwrap();
        assert_eq!(p.algorithms[1].1.eta().at(50), p.algorithms[1].1.step_size);
    }
}

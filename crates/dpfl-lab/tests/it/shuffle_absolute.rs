//! The absolute-loss model kind (`kind = "absolute"`, issue 15; Cheu, Joseph, Mao & Peng 2022
//! §4.2's non-smooth Lipschitz setting) under the shuffle algorithms:
//! `experiments/shuffle-absolute.toml` in the simulator, and the model's config.

use dpfl::model::{ModelSpec, mean_loss};
use dpfl_lab::experiment::{ExperimentSpec, prepare_trial, train_one};
use dpfl_privacy::DpRng;
use dpfl_privacy::rng::Purpose;

#[test]
fn the_absolute_loss_trains_under_smoothed_pagd_and_psgd() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let name = "shuffle-absolute.toml";
    let text = std::fs::read_to_string(root.join(name)).unwrap();
    let spec = ExperimentSpec::from_toml(&text, name).unwrap();
    let mut rng = DpRng::from_seed(5, Purpose::Data, 0);
    let trial = prepare_trial(&spec, None, &mut rng).unwrap();
    let m = trial.model.as_ref();
    assert_eq!(m.name(), "absolute");
    let pop = |w: &[f64]| {
        trial
            .silos
            .iter()
            .map(|s| mean_loss(m, w, &s.test))
            .sum::<f64>()
            / trial.silos.len() as f64
    };
    let start = pop(&[0.0; 4]);
    let mut means = Vec::new();
    for a in &spec.algorithms {
        let mut f = Vec::new();
        for seed in 0..4 {
            let run = train_one(&spec, &a.spec, &trial, Some(seed), 10, |_| {}).unwrap();
            assert!(run.final_model.iter().all(|v| v.is_finite()));
            f.push(pop(&run.final_model));
            if seed == 0 {
                // PVEC's Δ₂ is L = 3 on subgradients, 2L = 6 on the Moreau envelope.
                let text = &run.calibration[0].formula;
                let l = if a.spec.default_label().contains("PAGD") {
                    6
                } else {
                    3
                };
                assert!(text.contains(&format!("L = {l}:")), "{text}");
            }
        }
        eprintln!(
            "{:?}: mean absolute deviation {f:?} (untrained {start})",
            a.label
        );
        means.push(f.iter().sum::<f64>() / f.len() as f64);
    }
    // Both cut the untrained model's mean absolute deviation (1.63) at least threefold: 0.348
    // (PAGD, 4 seeds) and 0.334 (PSGD); the label noise alone leaves E|N(0, 0.1²)| = 0.08.
    assert!(means[0] < start / 3.0, "PAGD {} vs {start}", means[0]);
    assert!(means[1] < start / 3.0, "PSGD {} vs {start}", means[1]);

    // The config: a real target only; the Moreau β must be positive.
    let absolute: ModelSpec = toml::from_str("kind = \"absolute\"").unwrap();
    assert!(absolute.build(4, None).is_ok());
    let e = absolute.build(4, Some(2)).err().unwrap().to_string();
    assert!(e.contains("real target"), "{e}");
    let smoothed: ModelSpec = toml::from_str("kind = \"absolute\"\nsmoothing = 2.0").unwrap();
    assert_eq!(smoothed.build(4, None).unwrap().lipschitz(3.0), Some(6.0));
    let bad: ModelSpec = toml::from_str("kind = \"absolute\"\nsmoothing = -1.0").unwrap();
    let e = bad.build(4, None).err().unwrap().to_string();
    assert!(e.contains("model.smoothing"), "{e}");
}

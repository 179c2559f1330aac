//! The issue-3 speed target: the official obesity script's grid for one trial at ε = 3 (29
//! training runs of 100 rounds: 8 step sizes each for MB-SGD, Local SGD and ISRL-DP MB-SGD, 5
//! for ISRL-DP Local SGD; M = 3 of 7 silos, K = 30), including loading and splitting the data.
//! The Python script needs 7 min 9 s on 2 cores; the target is < 4.3 s.
//!
//! `cargo bench -p dpfl-lab --bench isrl_grid`

use criterion::{Criterion, criterion_group, criterion_main};

use dpfl_lab::reproduce::{jobs, obesity_speed_grid, prepare, run_grid};

fn grid(c: &mut Criterion) {
    let spec = obesity_speed_grid().expect("the built-in obesity spec parses");
    let all = jobs(&spec);
    assert_eq!(all.len(), 29, "the issue's grid has 29 runs");
    let mut g = c.benchmark_group("isrl_grid");
    g.sample_size(10);
    g.bench_function("obesity_eps3_one_trial_29_runs", |b| {
        b.iter(|| {
            let data = prepare(&spec, None).expect("bundled obesity data");
            run_grid(&spec, &data, &all, &|_, _| {}).expect("grid runs")
        })
    });
    g.finish();
}

criterion_group!(benches, grid);
criterion_main!(benches);

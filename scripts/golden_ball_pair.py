#!/usr/bin/env python3
"""Golden values for Poisson sampling under replace-one (issue 27 finding 3), from Google's
dp-accounting 0.6.0: the REPLACE_ONE subsampled Gaussian, whose pair is
(1-q)N(0) + qN(-s) vs (1-q)N(0) + qN(s) (the "ball pair" of clipped contributions).

dpfl's noise multiplier z is sigma over the replace-one sensitivity (the ball's diameter), so
dp-accounting, whose sensitivity 1 is the ball's radius, runs at noise multiplier 2z.

Usage (the venv is not committed):
    python3 -m venv /tmp/dpacc && /tmp/dpacc/bin/pip install dp-accounting==0.6.0
    /tmp/dpacc/bin/python scripts/golden_ball_pair.py
The Rust tests (crates/dpfl-privacy/tests/it/lower_bounds.rs, crates/dpfl-cli/tests/it/account.rs)
carry the printed values inline.
"""
import json

import dp_accounting
from dp_accounting.pld import privacy_loss_distribution as pldlib

NR = dp_accounting.NeighboringRelation
CASES = [  # (dpfl noise multiplier z, rate q, steps T, delta)
    (1.0, 0.01, 1000, 1e-5),
    (0.8, 0.05, 100, 1e-6),
    (2.0, 0.1, 10, 1e-5),
    (0.5, 0.2, 50, 1e-3),
    (1.5, 1.0, 5, 1e-5),
]
out = []
for z, q, t, d in CASES:
    res = {}
    for pessimistic in (True, False):
        pld = pldlib.from_gaussian_mechanism(
            2 * z,
            value_discretization_interval=1e-4,
            sampling_prob=q,
            neighboring_relation=NR.REPLACE_ONE,
            pessimistic_estimate=pessimistic,
            use_connect_dots=pessimistic,
        ).self_compose(t)
        res["upper" if pessimistic else "lower"] = pld.get_epsilon_for_delta(d)
    out.append(dict(noise_multiplier=z, rate=q, steps=t, delta=d, **res))
print(json.dumps(out, indent=1))

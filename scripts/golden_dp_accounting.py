#!/usr/bin/env python3
"""Golden values for dpfl's privacy accountants, from Google's dp-accounting 0.6.0.

Usage (PyPI reachable; the venv is not committed):
    python3 -m venv /tmp/dpacc && /tmp/dpacc/bin/pip install dp-accounting==0.6.0
    /tmp/dpacc/bin/python scripts/golden_dp_accounting.py \
        > crates/dpfl-privacy/tests/golden/dp_accounting.json

Cases (noise multiplier 0.5-10, rate 1e-3-1, steps 1-1e5, delta 1e-3-1e-9):
  * rdp-poisson: Poisson-sampled Gaussian, add/remove-one, RdpAccountant (default orders);
  * rdp-wor:     sampling m of n without replacement, replace-one, RdpAccountant;
  * pld-poisson: Poisson-sampled Gaussian, add/remove-one, PLD with connect-the-dots at
                 value_discretization_interval 1e-4, both the pessimistic (upper) and the
                 optimistic (lower) estimate: the truth lies between them, so their gap is
                 dp-accounting's discretisation error.
The Rust test (crates/dpfl-privacy/tests/golden.rs) reads only the JSON.
"""
import json
import sys
import time

import dp_accounting
from dp_accounting import dp_event
from dp_accounting.pld import privacy_loss_distribution as pldlib
from dp_accounting.rdp import rdp_privacy_accountant as rdplib

NR = dp_accounting.NeighboringRelation

RDP_POISSON = [
    # (noise multiplier, rate, steps, delta)
    (0.5, 1e-3, 1, 1e-5),
    (0.5, 1e-3, 1000, 1e-5),
    (0.5, 0.01, 100, 1e-3),
    (0.8, 0.004, 10000, 1e-5),
    (1.0, 0.01, 1000, 1e-5),
    (1.0, 0.01, 10000, 1e-6),
    (1.0, 1e-3, 100000, 1e-9),
    (1.1, 256 / 60000, 60000 // 256 * 60, 1e-5),
    (1.5, 0.1, 100, 1e-5),
    (2.0, 0.05, 1000, 1e-7),
    (2.0, 1.0, 1, 1e-5),
    (3.0, 1.0, 10, 1e-3),
    (4.0, 0.5, 100, 1e-9),
    (5.0, 0.2, 10000, 1e-6),
    (10.0, 1.0, 1, 1e-9),
    (10.0, 0.3, 100000, 1e-5),
    (0.7, 0.02, 50, 1e-4),
    (1.3, 0.001, 1, 1e-3),
    (2.5, 0.002, 100000, 1e-8),
    (6.0, 0.9, 1000, 1e-6),
]

RDP_WOR = [
    # (noise multiplier, sample size, population, steps, delta)
    (1.0, 10, 1000, 1000, 1e-5),
    (0.8, 100, 10000, 10000, 1e-6),
    (2.0, 50, 500, 100, 1e-5),
    (1.5, 1, 1000, 10000, 1e-7),
    (3.0, 30, 202, 100, 1.0 / 202**2),
    (5.0, 500, 1000, 1000, 1e-9),
    (0.6, 1, 100, 10, 1e-3),
    (10.0, 200, 1000, 100000, 1e-5),
    (1.2, 25, 60000, 100000, 1e-6),
    (2.3, 10, 202, 100, 1e-4),
]

PLD_POISSON = [
    (1.0, 0.01, 1000, 1e-5),
    (0.5, 1e-3, 1, 1e-5),
    (0.8, 0.004, 10000, 1e-5),
    (1.5, 0.1, 100, 1e-5),
    (2.0, 1.0, 1, 1e-5),
    (2.0, 0.05, 1000, 1e-7),
    (3.0, 1.0, 10, 1e-3),
    (4.0, 0.5, 100, 1e-9),
    (1.0, 1e-3, 100000, 1e-9),
    (0.7, 0.02, 50, 1e-4),
    (10.0, 1.0, 1, 1e-9),
    (5.0, 0.2, 1000, 1e-6),
]


def rdp_eps(event, delta, rel):
    acc = rdplib.RdpAccountant(neighboring_relation=rel)
    acc.compose(event)
    return acc.get_epsilon(delta)


def pld_eps(z, q, steps, delta, pessimistic):
    pld = pldlib.from_gaussian_mechanism(
        standard_deviation=z,
        sensitivity=1.0,
        pessimistic_estimate=pessimistic,
        value_discretization_interval=1e-4,
        sampling_prob=q,
        use_connect_dots=True,
        neighboring_relation=NR.ADD_OR_REMOVE_ONE,
    )
    if steps > 1:
        pld = pld.self_compose(steps)
    return pld.get_epsilon_for_delta(delta)


def main():
    cases = []
    for z, q, t, d in RDP_POISSON:
        ev = dp_event.SelfComposedDpEvent(
            dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z)), t)
        cases.append(dict(kind="rdp-poisson", noise_multiplier=z, rate=q, steps=t, delta=d,
                          epsilon=rdp_eps(ev, d, NR.ADD_OR_REMOVE_ONE)))
    for z, m, n, t, d in RDP_WOR:
        ev = dp_event.SelfComposedDpEvent(
            dp_event.SampledWithoutReplacementDpEvent(n, m, dp_event.GaussianDpEvent(z)), t)
        cases.append(dict(kind="rdp-wor", noise_multiplier=z, size=m, population=n, steps=t,
                          delta=d, epsilon=rdp_eps(ev, d, NR.REPLACE_ONE)))
    for z, q, t, d in PLD_POISSON:
        t0 = time.time()
        hi = pld_eps(z, q, t, d, True)
        lo = pld_eps(z, q, t, d, False)
        print(f"pld z={z} q={q} T={t}: {lo} .. {hi} ({time.time() - t0:.1f}s)", file=sys.stderr)
        cases.append(dict(kind="pld-poisson", noise_multiplier=z, rate=q, steps=t, delta=d,
                          epsilon=hi, epsilon_optimistic=lo))
    json.dump(dict(generator="scripts/golden_dp_accounting.py",
                   dp_accounting_version="0.6.0", cases=cases), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""dp-accounting 0.6.0's privacy calls on the inputs of dpfl's privacy benchmarks
(crates/dpfl-privacy/benches/privacy_calls.rs), timed the same way: the minimum over
repeated calls of one call's wall time (an idle-ish figure on a shared machine).

Usage (PyPI reachable; the venv is not committed):
    python3 -m venv /tmp/dpacc && /tmp/dpacc/bin/pip install dp-accounting==0.6.0
    nice -n 10 /tmp/dpacc/bin/python scripts/bench_dp_accounting.py [REPEATS]

Prints one JSON object per case: its name (the criterion bench id of the same call), ε or z,
and the seconds. Cases dp-accounting has no rule for (K draws *with* replacement, dpfl's
lower bound of a concrete pair) are listed with "unsupported" so the table says so.
"""
import json
import sys
import time

import dp_accounting
from dp_accounting import dp_event, mechanism_calibration
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

NR = dp_accounting.NeighboringRelation


def poisson_steps(z, q=0.01, steps=10_000):
    return dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z)), steps)


def rdp(rel):
    return lambda: rdp_privacy_accountant.RdpAccountant(neighboring_relation=rel)


def pld(rel, h=1e-4):
    return lambda: pld_privacy_accountant.PLDAccountant(
        neighboring_relation=rel, value_discretization_interval=h)


def epsilon(make, event, delta):
    acc = make()
    acc.compose(event)
    return acc.get_epsilon(delta)


def calibrate(make, event_of, target, delta):
    # Bisection to dp-accounting's default tolerance, bracketed from [0, 1] by doubling
    # (LowerEndpointAndGuess, as its docs suggest for noise multipliers).
    return mechanism_calibration.calibrate_dp_mechanism(
        make, event_of, target, delta,
        mechanism_calibration.LowerEndpointAndGuess(0.0, 1.0))


def timed(f, repeats):
    best, value = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        value = f()
        best = min(best, time.perf_counter() - t0)
    return value, best


def main():
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    d5 = 1e-5
    cases = [
        ("poisson/rdp-account/q0.01-10k-steps",
         lambda: epsilon(rdp(NR.ADD_OR_REMOVE_ONE), poisson_steps(1.0), d5)),
        ("poisson/pld-account/q0.01-10k-steps",
         lambda: epsilon(pld(NR.ADD_OR_REMOVE_ONE), poisson_steps(1.0), d5)),
        ("poisson/pld-account-replace-one/q0.01-10k-steps",
         lambda: epsilon(pld(NR.REPLACE_ONE), poisson_steps(1.0), d5)),
        ("poisson/rdp-calibrate/q0.01-10k-steps-eps1",
         lambda: calibrate(rdp(NR.ADD_OR_REMOVE_ONE), poisson_steps, 1.0, d5)),
        ("poisson/pld-calibrate/q0.01-10k-steps-eps1",
         lambda: calibrate(pld(NR.ADD_OR_REMOVE_ONE), poisson_steps, 1.0, d5)),
    ]
    for name, f in cases:
        # The PLD calibrations take minutes per call: timed once.
        value, secs = timed(f, 1 if "pld-calibrate" in name else repeats)
        print(json.dumps(dict(name=name, value=value, seconds=secs)), flush=True)
    for name in ["demo/calibrate", "demo/pld-account", "demo/rdp-account",
                 "demo/lower-bound", "with-replacement/mnist-1238-443-35/pld-account",
                 "with-replacement/insurance-107-19-35/pld-account"]:
        print(json.dumps(dict(name=name, value=None, seconds=None,
                              unsupported="dp-accounting 0.6.0 has no rule for K draws with "
                                          "replacement nor a concrete-pair lower bound")))


if __name__ == "__main__":
    main()

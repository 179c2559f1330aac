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
  * pld-gaussian: a Gaussian composed T times without sampling (issue 11: z = 0.8,
                 T = 3000 once printed 5e-324), both estimates as above, and the exact ε
                 (one Gaussian of μ = √T/z, mpmath at 50 digits): at z = 0.8, T = 3000 both
                 of dp-accounting's estimates lie above the truth.
  * pld-discrete-laplace / pld-discrete-gaussian: DiscreteLaplacePrivacyLoss /
                 DiscreteGaussianPrivacyLoss at sensitivity 1, connect-the-dots (pessimistic)
                 and privacy buckets (optimistic) at interval 1e-4.
  * exact-discrete-laplace: no dp-accounting; the exact ε of T discrete Laplace releases
                 at sensitivity 1 (the loss is ±a, so T of them sum to a(2K − T) with
                 K ~ Binomial(T, 1/(1 + e^{−a}))), by bisection on δ(ε) in log space; this
                 covers parameters far below dp-accounting's grid (issue 11: a = 1e-6,
                 T = 1e6).
The Rust test (crates/dpfl-privacy/tests/it/golden.rs) reads only the JSON.
"""
import json
import math
import sys
import time

import mpmath
import numpy as np
from scipy import special, stats

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

PLD_GAUSSIAN = [
    # (noise multiplier, steps, delta)
    (0.8, 3000, 1e-5),
    (2.0, 10, 1e-5),
    (1.0, 1000, 1e-6),
    (0.3, 100, 1e-5),
]

PLD_POISSON_LONG = [
    # z down to 0.3 and T up to 1e5 (property tests; issue 11 item 1).
    (0.3, 1e-4, 100000, 1e-5),
    (0.5, 0.01, 100000, 1e-5),
    (0.3, 0.001, 10000, 1e-6),
]

PLD_DISCRETE_LAPLACE = [
    # (parameter a = 1/noise multiplier, steps, delta)
    (1.0, 1, 1e-5),
    (0.5, 100, 1e-5),
    (0.1, 1000, 1e-6),
]

PLD_DISCRETE_GAUSSIAN = [
    # (sigma, steps, delta)
    (1.0, 1, 1e-5),
    (2.0, 100, 1e-5),
    (5.0, 1000, 1e-6),
    (0.5, 10, 1e-3),
]

EXACT_DISCRETE_LAPLACE = [
    # (parameter, steps, delta)
    (1e-6, 1000000, 1e-5),
    (0.01, 10000, 1e-6),
    (1.0, 20, 1e-5),
]


def exact_dlap_eps(a, t, delta):
    """Smallest eps with delta(eps) <= delta for t releases of loss +-a (prob p, 1 - p)."""
    p = 1.0 / (1.0 + math.exp(-a))
    k = np.arange(t + 1)
    logpmf = stats.binom.logpmf(k, t, p)
    loss = a * (2.0 * k - t)

    def d(eps):
        m = loss > eps
        if not m.any():
            return 0.0
        # sum p (1 - e^{eps - l}) in log space per term.
        terms = logpmf[m] + np.log(-np.expm1(eps - loss[m]))
        return float(np.exp(special.logsumexp(terms)))

    lo, hi = 0.0, a * t
    if d(0.0) <= delta:
        return 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if d(mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def exact_gaussian_eps(z, steps, delta):
    """The truth for T Gaussians: one Gaussian of mu = sqrt(T)/z (Dong, Roth & Su 2019),
    delta(eps) = Phi(mu/2 - eps/mu) - e^eps Phi(-mu/2 - eps/mu) solved at 50 digits."""
    mpmath.mp.dps = 50
    mu = mpmath.sqrt(steps) / mpmath.mpf(z)

    def d(e):
        return (mpmath.ncdf(mu / 2 - e / mu) - mpmath.exp(e) * mpmath.ncdf(-mu / 2 - e / mu)
                - mpmath.mpf(delta))

    lo, hi = mpmath.mpf(0), mu * mu + 20 * mu + 10
    for _ in range(200):
        mid = (lo + hi) / 2
        if d(mid) <= 0:
            hi = mid
        else:
            lo = mid
    return float(hi)


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


def discrete_eps(kind, x, steps, delta, pessimistic):
    make = (pldlib.from_discrete_laplace_mechanism if kind == "laplace"
            else pldlib.from_discrete_gaussian_mechanism)
    # Connect-the-dots is pessimistic only; the optimistic estimate uses privacy buckets.
    pld = make(x, sensitivity=1, pessimistic_estimate=pessimistic,
               value_discretization_interval=1e-4, use_connect_dots=pessimistic)
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
    for z, q, t, d in PLD_POISSON + PLD_POISSON_LONG:
        t0 = time.time()
        hi = pld_eps(z, q, t, d, True)
        lo = pld_eps(z, q, t, d, False)
        print(f"pld z={z} q={q} T={t}: {lo} .. {hi} ({time.time() - t0:.1f}s)", file=sys.stderr)
        cases.append(dict(kind="pld-poisson", noise_multiplier=z, rate=q, steps=t, delta=d,
                          epsilon=hi, epsilon_optimistic=lo))
    for z, t, d in PLD_GAUSSIAN:
        t0 = time.time()
        hi = pld_eps(z, 1.0, t, d, True)
        lo = pld_eps(z, 1.0, t, d, False)
        print(f"pld gaussian z={z} T={t}: {lo} .. {hi} ({time.time() - t0:.1f}s)",
              file=sys.stderr)
        cases.append(dict(kind="pld-gaussian", noise_multiplier=z, steps=t, delta=d,
                          epsilon=hi, epsilon_optimistic=lo,
                          epsilon_exact=exact_gaussian_eps(z, t, d)))
    for kind, table in (("laplace", PLD_DISCRETE_LAPLACE),
                        ("gaussian", PLD_DISCRETE_GAUSSIAN)):
        for x, t, d in table:
            hi = discrete_eps(kind, x, t, d, True)
            lo = discrete_eps(kind, x, t, d, False)
            print(f"pld discrete {kind} {x} T={t}: {lo} .. {hi}", file=sys.stderr)
            # The event's noise multiplier: 1/a for the discrete Laplace, sigma otherwise.
            z = 1.0 / x if kind == "laplace" else x
            cases.append(dict(kind=f"pld-discrete-{kind}", noise_multiplier=z, steps=t,
                              delta=d, epsilon=hi, epsilon_optimistic=lo))
    for a, t, d in EXACT_DISCRETE_LAPLACE:
        e = exact_dlap_eps(a, t, d)
        print(f"exact discrete laplace a={a} T={t}: {e}", file=sys.stderr)
        cases.append(dict(kind="exact-discrete-laplace", noise_multiplier=1.0 / a, steps=t,
                          delta=d, epsilon=e))
    json.dump(dict(generator="scripts/golden_dp_accounting.py",
                   dp_accounting_version="0.6.0", cases=cases), sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()

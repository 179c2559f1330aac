#!/usr/bin/env python3
# docs/audit.md "Limits": why PVEC is audited with one-coordinate canaries.
# Dirac vs spread (random-sign) canaries against i.i.d. per-coordinate Gaussian noise
# (PVEC's binomial noise in the Gaussian limit). d = 104 coordinates (4 data + 100 canary
# columns), m = 100 canaries, k = 25 guesses per side, R = 5 rounds, signal per round g = 40
# counts for a Dirac canary (its coordinate 0 or 2 on PVEC's [0, 2] scale); the spread
# canary's coordinates are 1 ± 1/sqrt(d) (same l2 distance 2), scored by its sign pattern.
import numpy as np
rng = np.random.default_rng(1)
d, m, k, R, g = 104, 100, 25, 5, 40.0
def run(std, spread, trials=200):
    right = []
    for _ in range(trials):
        bits = rng.integers(0, 2, m)
        if spread:
            pat = rng.choice([-1.0, 1.0], size=(m, d))
            signal = ((2 * bits - 1)[:, None] * pat).sum(0) * g / 2 / np.sqrt(d)
            noise = rng.normal(0, std, (R, d)).sum(0)
            u = R * signal + noise
            score = pat @ u / np.sqrt(d)
        else:
            u = R * (2 * bits - 1) * g / 2 + rng.normal(0, std, (R, m)).sum(0)
            score = u
        o = np.argsort(-score)
        right.append(bits[o[:k]].sum() + (1 - bits[o[-k:]]).sum())
    return np.mean(right), np.min(right)
for std in [40.0, 80.0, 230.0]:
    print(std, "dirac", run(std, False), "spread", run(std, True))

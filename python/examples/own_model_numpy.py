"""Your own model on dpfl's algorithms, in numpy: logistic regression written as a per-example
gradients callable, trained by ISRL-DP MB-SGD over three silos through dpfl.halves.

Each silo keeps its own records (here numpy arrays); dpfl asks its callable for the gradients
of the records it samples, clips each at min(clip, lipschitz), noises, and charges the silo's
ledger before anything leaves the silo. Run: ``python own_model_numpy.py``.
"""

import numpy as np

from dpfl import halves


def make_silos(seed=3, silos=3, n=400, d=5):
    rng = np.random.default_rng(seed)
    w_true = rng.normal(size=d)
    out = []
    for _ in range(silos):
        X = rng.normal(size=(n, d)) / np.sqrt(d)
        y = (X @ w_true + 0.3 * rng.normal(size=n) > 0).astype(np.float64)
        out.append((X, y))
    return out


def logistic_gradients(X, y):
    """Per-example gradients (σ(<w, x>) − y)·x of this silo's records: row j depends on
    ``params`` and record ``indices[j]`` only, and nothing is kept between calls."""

    def gradients(indices, params):
        x = X[indices]
        p = 1.0 / (1.0 + np.exp(-(x @ params)))
        return (p - y[indices])[:, None] * x

    return gradients


def main(seed=3, rounds=30):
    data = make_silos(seed)
    d = data[0][0].shape[1]
    plan = halves.Plan.build(
        {"kind": "mb-sgd", "calibration": "accountant", "step_size": 1.0, "batch_size": 40},
        dim=d,
        records=[len(y) for _, y in data],
        epsilon=2.0,
        delta=1e-5,
        clip=1.0,
        rounds=rounds,
        seed=seed,  # a simulation: omit the seed (and seed="plan" below) in a deployment
    )
    silos = [halves.SiloHalf(plan, i, gradients=logistic_gradients(X, y), seed="plan")
             for i, (X, y) in enumerate(data)]
    w = halves.simulate(plan, silos)
    X = np.vstack([X for X, _ in data])
    y = np.concatenate([y for _, y in data])
    error = float(np.mean((X @ w > 0) != (y > 0.5)))
    return {"model": w, "train_error": error, "epsilon": [s.epsilon for s in silos],
            "sigma": [c["sigma"] for c in plan.calibration]}


if __name__ == "__main__":
    r = main()
    print(f"model {np.round(r['model'], 3)}; training error {r['train_error']:.3f}")
    print(f"each silo's certified epsilon: {np.round(r['epsilon'], 3)} (budget 2.0, delta 1e-5)")

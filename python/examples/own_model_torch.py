"""Your own PyTorch model on dpfl's algorithms: per-example gradients with ``torch.func``
(``vmap(grad(loss))``), handed to a dpfl silo half, which clips each at min(clip, lipschitz),
noises, accounts and refuses past the silo's budget exactly as for dpfl's own models.

Needs ``torch`` (>= 2.0). Run: ``python own_model_torch.py``. The data stay in a PyTorch
tensor (any ``Dataset`` indexed by record number works the same way: gather the sampled
records inside ``gradients``).

The callable must compute each row from the parameters and its own record only: no batch
norm or other statistics across the batch (use GroupNorm/LayerNorm or none), no dropout state
kept between calls, nothing sent anywhere. dpfl starts the model at zeros, as its algorithms
do: a linear (softmax) model is shown; a network needs its own symmetric-free parametrisation.
"""

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from dpfl import halves

torch.manual_seed(0)
FEATURES, CLASSES = 8, 3
model = torch.nn.Linear(FEATURES, CLASSES).double()
NAMES = [n for n, _ in model.named_parameters()]
SHAPES = [p.shape for _, p in model.named_parameters()]
DIM = sum(p.numel() for p in model.parameters())


def unflatten(flat):
    out, k = {}, 0
    for name, shape in zip(NAMES, SHAPES):
        n = int(np.prod(shape))
        out[name] = flat[k:k + n].reshape(shape)
        k += n
    return out


def loss(params, x, y):
    logits = functional_call(model, params, (x.unsqueeze(0),))
    return torch.nn.functional.cross_entropy(logits, y.unsqueeze(0))


per_example = vmap(grad(loss), in_dims=(None, 0, 0))


def silo_gradients(X, Y):
    def gradients(indices, params):
        p = unflatten(torch.from_numpy(params))
        idx = torch.from_numpy(indices)
        g = per_example(p, X[idx], Y[idx])
        return torch.cat([g[n].reshape(len(indices), -1) for n in NAMES], dim=1).numpy()

    return gradients


def main(rounds=20, seed=1):
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(CLASSES, FEATURES, generator=g, dtype=torch.float64)
    silos = []
    for _ in range(3):
        Y = torch.randint(0, CLASSES, (300,), generator=g)
        X = centres[Y] + 0.8 * torch.randn(300, FEATURES, generator=g, dtype=torch.float64)
        silos.append((X, Y))
    plan = halves.Plan.build(
        {"kind": "mb-sgd", "calibration": "accountant", "step_size": 1.0, "batch_size": 30},
        dim=DIM, records=[len(Y) for _, Y in silos], epsilon=2.0, delta=1e-5, clip=1.0,
        rounds=rounds, seed=seed)
    halves_ = [halves.SiloHalf(plan, i, gradients=silo_gradients(X, Y), seed="plan")
               for i, (X, Y) in enumerate(silos)]
    w = halves.simulate(plan, halves_)
    params = unflatten(torch.from_numpy(w))
    X = torch.cat([X for X, _ in silos])
    Y = torch.cat([Y for _, Y in silos])
    with torch.no_grad():
        error = (functional_call(model, params, (X,)).argmax(1) != Y).double().mean().item()
    print(f"training error {error:.3f}; epsilon per silo {[round(s.epsilon, 3) for s in halves_]}")
    return error


if __name__ == "__main__":
    main()

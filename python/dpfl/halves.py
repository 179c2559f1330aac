"""Every dpfl algorithm as its two halves, from Python (issue 29 items 1 and 2).

An algorithm is a **silo half** (one per silo: its data, its generator, its privacy ledger)
and a **server half**; a round is::

    b = server.broadcast(r)                     # bytes
    msgs = [silo[i].step(b) for i in server.participants(r)]   # bytes, in silo order
    server.aggregate(r, msgs)

Messages and broadcasts are opaque bytes (``dpflB``/``dpflR`` + version + postcard), so any
transport (Flower, a queue, a file) can carry them. :func:`simulate` is that loop.

* :class:`Plan` — a run's public plan: the setup (N, n_i, d, L, budgets, rounds,
  participation), the algorithm and every silo's calibration (σ_i, K_i, formula, run event),
  computed once; each party builds only its own half from it and calibrates nothing.
  ``Plan.from_federation(path)`` reads a ``dpfl federate`` file (``[plan]`` and ``seed``);
  ``Plan.from_experiment(path, algorithm=0)`` plans exactly as ``dpfl train`` does (trial 0:
  same split, L, calibration and seed derivation); ``Plan.build(algorithm, dim=, records=,
  epsilon=, delta=, clip=, rounds=, ...)`` plans a user's own model. ``to_json()`` /
  ``Plan.from_json(text)``, picklable; ``silos``, ``rounds``, ``dim``, ``seed``,
  ``requirements`` (``shuffler``, ``every_silo``, ``fixed_participation``, ``quorum``),
  ``calibration`` (per silo ``sigma``, ``batch_size``, ``formula``, ``delta`` and ``epsilon``,
  the RDP ε certified for the whole run's event).
* :class:`SiloHalf` ``(plan, silo, *, data=(X, y) | gradients=callable, ledger_path=None,
  seed=None | "plan" | int, state=None, data_ledger=None, plan_id=None, budget=None)`` — ``step(broadcast) -> bytes`` charges the silo's
  ledger for the round's privacy event *before* its half reads data or draws noise (the
  round core's ``silo_step``, as in ``dpfl train`` and ``dpfl silo``); a refusal raises
  :class:`BudgetExceeded` and releases nothing; asked again for the last round it answered
  it returns the same bytes, for an older round it raises :class:`AlreadyReleased`.
  ``state() -> bytes``: the half's state (SoteriaFL's shift, a one-pass position, ...), a
  seeded generator's position, the last round answered with its bytes, and an in-memory
  ledger. An OS-seeded silo (``seed=None``, for deployments) stores no key and draws from a
  fresh OS key after a restore; a restored seeded silo continues its stream. A silo built
  without ``state`` on a durable ``ledger_path`` that records releases refuses if it is
  seeded (its stream would draw release 0's noise again) or its algorithm keeps silo state;
  otherwise it continues after the ledger's last release. ``data_ledger`` (a file) with
  ``plan_id`` (a name of the plan, e.g. the SHA-256 of ``plan.to_json()``) is the silo's data
  set's ledger, shared by every plan run on the same records: each round is charged there too,
  under the plan's own release ids, and the silo's budget (``budget=(ε, δ)``, replace-one;
  default the plan's when it enforces one; a budget the file records stays) is enforced over
  all of them. ``epsilon``: ε its releases certify at the silo's δ, the tighter of
  ``rdp_epsilon`` and ``pld_epsilon`` (``dpfl train``'s figures; with a data ledger, of every
  plan's releases on the data), ``None`` where no accountant certifies them;
  ``epsilons(plan=False)`` → (RDP, PLD, the tighter), ``plan=True`` for this plan's releases
  alone; ``round_event_epsilon``, ``releases``, ``last_round``.
* :class:`ServerHalf` ``(plan, *, seed=None | "plan" | int, state=None)`` —
  ``participants(r)`` (the plan's participation draw), ``broadcast(r)``,
  ``aggregate(r, messages)`` (messages in silo order; the shuffle stage first when
  ``plan.requirements["shuffler"]``; a round short of a participant refused when
  ``every_silo``), ``output()`` (numpy), ``state()``, ``dim``, ``round``. Rounds run in order,
  once each. Its shuffle stage is the simulator's: the process running it sees the messages
  unshuffled, so the shuffle model's guarantee against the server needs the shuffle in a
  party the server does not control; a silo's own guarantee (ISRL-DP) needs no one.

Seeded runs: with ``seed="plan"`` on both halves a run over the halves of
``Plan.from_experiment`` equals ``dpfl train``'s model bit for bit (each silo draws stream
(Silo, i), the server (Participation, 0) and (Shuffle, 0) of the plan's seed, as the
simulator). A seed lets whoever holds it recompute the noise: simulations only.

Your own model
--------------
``Plan.build`` plans a model of ``dim`` parameters that dpfl does not implement; each silo
passes ``gradients(indices, params)``: ``indices`` an int64 array of record numbers in
``0..records[i]``, ``params`` the float64 parameters (d,); it returns the per-example
gradients, a float64 array of shape ``(len(indices), d)`` (numpy, or anything
``numpy.asarray`` takes). dpfl clips each row at min(``clip``, ``lipschitz``) before any
noise, compression, quantisation or shuffling, and calibrates and accounts exactly as for its
built-in models, so the bound holds whatever the callable returns. For the guarantee the
callable must compute row j from ``params`` and record ``indices[j]`` alone: it must not read
other records (no batch statistics such as batch norm, no data-dependent normalisation across
records) and keep no state between calls (no running averages, no caching that changes later
answers); it must not send anything anywhere. A wrong shape, a non-finite value or an
exception raises :class:`RunError` and the round's message is discarded, never sent (the
round stays charged); build the silo again from its last ``state()``. The data stays where
you keep it: numpy, pandas, a PyTorch ``Dataset`` indexed by record number
(``python/examples/own_model_torch.py`` uses ``torch.func.vmap(grad(...))``). The model starts
at zeros.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np

from ._core import (
    AlreadyReleased,
    BudgetExceeded,
    ConfigError,
    Plan,
    ServerHalf,
    SiloHalf,
)
from ._core import experiment_silos as _experiment_silos

__all__ = [
    "AlreadyReleased",
    "BudgetExceeded",
    "Plan",
    "ServerHalf",
    "SiloHalf",
    "experiment_data",
    "simulate",
]


def experiment_data(
    path, seed: Optional[int] = None, data_dir=None
) -> List[Tuple[np.ndarray, np.ndarray]]:
    """Every silo's training data ``(X, y)`` of trial 0 of the experiment at ``path``, split
    as ``dpfl train`` splits it (for ``SiloHalf(plan, i, data=...)`` with a plan from
    ``Plan.from_experiment``); ``y`` holds class indices as float64 for a classifier."""
    out = []
    for x, rows, cols, y, _classes in _experiment_silos(str(path), seed, data_dir):
        X = np.frombuffer(x, dtype="<f8").reshape(rows, cols).astype(np.float64)
        out.append((X, np.frombuffer(y, dtype="<f8").astype(np.float64)))
    return out


def simulate(
    plan: Plan,
    silos: Sequence[SiloHalf],
    server: Optional[ServerHalf] = None,
    rounds: Optional[int] = None,
) -> np.ndarray:
    """Runs ``rounds`` (default ``plan.rounds``) rounds of ``plan`` over the halves ``silos``
    (silo i at index i) and ``server`` (default ``ServerHalf(plan, seed="plan")`` when the
    plan has a seed, OS-seeded otherwise) and returns the final model: the loop every runner
    of the halves follows (the Flower apps too)."""
    if len(silos) != plan.silos:
        raise ConfigError(f"config field `silos`: {len(silos)} silo halves for a plan of {plan.silos} silos")
    if server is None:
        server = ServerHalf(plan, seed="plan" if plan.seed is not None else None)
    total = plan.rounds if rounds is None else rounds
    for r in range(server.round, total):
        b = server.broadcast(r)
        msgs = [silos[i].step(b) for i in server.participants(r)]
        server.aggregate(r, msgs)
    return server.output()

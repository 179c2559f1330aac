"""ISRL-DP for any Flower client: :class:`DpflClient` wraps a ``flwr.client.NumPyClient``.

Three lines make a client private::

    from dpfl.flower import DpflClient
    client = DpflClient(MyClient(), update_clip=1.0, epsilon=1.0, delta=1e-5, rounds=10)
    app = ClientApp(client_fn=lambda context: client.to_client())

What happens inside the client, in each ``fit``:

1. the silo's ledger checks that one more round stays within (``epsilon``, ``delta``); past
   the budget ``fit`` raises :class:`BudgetExceeded` and nothing is released;
2. the wrapped client trains; its update u = (new parameters − received parameters), all
   arrays flattened together, is clipped to L2 norm ``update_clip`` (so any change of the
   silo's data moves it by at most Δ = 2·``update_clip``), or, with ``sensitivity`` instead,
   trusted to have that replace-one L2 sensitivity (the user's per-example clipping);
3. dpfl's Gaussian mechanism (ChaCha20, OS-seeded unless ``seed`` is given) adds
   N(0, σ²) per coordinate, σ = z·Δ, z calibrated by dpfl's accountant so that ``rounds``
   such releases are (ε, δ)-DP (or given as ``noise_multiplier``, Opacus-style);
4. the server receives received + u + noise, and the metrics ``dpfl_epsilon`` (what the
   ledger certifies after this round, at ``delta``), ``dpfl_delta``, ``dpfl_noise_multiplier``,
   ``dpfl_sigma`` and ``dpfl_rounds`` (releases so far).

What the Flower server can see: the noisy parameters, the number of examples the wrapped
client reports (not protected: pass a public count), the metrics above and any metrics the
wrapped client returns from ``fit`` (not protected: return none that depend on data).
``evaluate`` releases a loss computed on the silo's data without noise, so it is refused
unless ``allow_evaluate=True``; ``get_parameters`` is passed through (it should return the
initial, data-independent model). The guarantee is per silo (ISRL-DP): it needs no trust in
the server or the other clients, and does not compose across silos.

The ledger survives restarts when ``ledger_path`` names a file: every release is recorded
there (written to a temporary file, flushed to disk and renamed over the old one, so a crash
leaves either the old or the new ledger, never a torn one) *before* the noisy update leaves
``fit``, so a crash can charge a round that was never sent but never send an uncharged one.
A restarted client loads it, refuses rounds past the budget, and refuses to answer a round it
already answered (``config["server_round"]``, which Flower's strategies can send through
``on_fit_config_fn``) rather than release the same data again with fresh noise. A ledger file
that cannot be read is an error, never a fresh budget.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
from flwr.client import NumPyClient

from ._core import DpflError
from .accounting import account, calibrate
from .events import ComposedDpEvent, DpEvent, GaussianDpEvent
from .mechanisms import GaussianMechanism


class BudgetExceeded(DpflError):
    """A round would take the silo past its (ε, δ) budget; nothing was released."""


class AlreadyReleased(BudgetExceeded):
    """The ledger holds a release for this ``server_round`` already; nothing was released."""


LEDGER_FORMAT = "dpfl-flower-ledger"
LEDGER_VERSION = 1


def _write_atomic(path: str, text: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".ledger-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    if hasattr(os, "O_DIRECTORY"):
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


class DpflClient(NumPyClient):
    """A Flower ``NumPyClient`` whose ``fit`` releases a clipped, noised update and keeps
    the silo's privacy ledger. Give exactly one of ``update_clip`` (dpfl clips the update)
    and ``sensitivity`` (the update's replace-one L2 sensitivity, from your clipping)."""

    def __init__(
        self,
        client: NumPyClient,
        *,
        epsilon: float,
        delta: float,
        rounds: int,
        update_clip: Optional[float] = None,
        sensitivity: Optional[float] = None,
        noise_multiplier: Optional[float] = None,
        accountant: str = "rdp",
        seed: Optional[int] = None,
        silo: int = 0,
        allow_evaluate: bool = False,
        ledger_path: Optional[str] = None,
    ) -> None:
        if (update_clip is None) == (sensitivity is None):
            raise ValueError("give exactly one of update_clip and sensitivity")
        bound = update_clip if update_clip is not None else sensitivity
        if not (bound is not None and np.isfinite(bound) and bound > 0):
            raise ValueError(f"update_clip / sensitivity must be finite and > 0, got {bound}")
        if rounds < 1:
            raise ValueError(f"rounds must be at least 1, got {rounds}")
        self.client = client
        self.epsilon = float(epsilon)
        self.delta = float(delta)
        self.rounds = int(rounds)
        self.update_clip = update_clip
        self.sensitivity = float(2.0 * update_clip if update_clip is not None else sensitivity)
        self.accountant = accountant
        self.allow_evaluate = allow_evaluate
        if noise_multiplier is None:
            cal = calibrate(
                self.epsilon, self.delta, mechanism="gaussian", steps=self.rounds, accountant=accountant
            )
            noise_multiplier = cal.noise_multiplier
        self.noise_multiplier = float(noise_multiplier)
        self.sigma = self.noise_multiplier * self.sensitivity
        self._mechanism = GaussianMechanism(self.sigma, self.sensitivity, seed=seed, stream=silo)
        self.ledger: List[DpEvent] = []
        self.released_rounds: List[Optional[int]] = []
        self.ledger_path = os.fspath(ledger_path) if ledger_path is not None else None
        if self.ledger_path is not None and os.path.exists(self.ledger_path):
            self._load_ledger()

    # The durable ledger.
    def _load_ledger(self) -> None:
        path = self.ledger_path
        assert path is not None
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            if data.get("format") != LEDGER_FORMAT or data.get("version") != LEDGER_VERSION:
                raise ValueError(f"not a {LEDGER_FORMAT} version {LEDGER_VERSION} file")
            releases = data["releases"]
            zs = [float(r["noise_multiplier"]) for r in releases]
            rounds = [None if r.get("server_round") is None else int(r["server_round"]) for r in releases]
            delta = float(data["delta"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise DpflError(f"{path}: the privacy ledger cannot be read ({e}); refusing to start afresh") from e
        if delta != self.delta:
            raise DpflError(f"{path}: the ledger accounts at delta {delta}, this client at {self.delta}")
        if not all(np.isfinite(z) and z > 0 for z in zs):
            raise DpflError(f"{path}: a recorded noise multiplier is not finite and > 0")
        self.ledger = [GaussianDpEvent(z) for z in zs]
        self.released_rounds = rounds

    def _save_ledger(self) -> None:
        if self.ledger_path is None:
            return
        releases = [
            {"release": i + 1, "server_round": r, "noise_multiplier": e.noise_multiplier}
            for i, (e, r) in enumerate(zip(self.ledger, self.released_rounds))
        ]
        data = {
            "format": LEDGER_FORMAT,
            "version": LEDGER_VERSION,
            "epsilon_budget": self.epsilon,
            "delta": self.delta,
            "accountant": self.accountant,
            "releases": releases,
            "epsilon_spent": self.spent(),
        }
        _write_atomic(self.ledger_path, json.dumps(data, indent=1) + "\n")

    # The ledger.
    def spent(self, extra: int = 0) -> float:
        """ε the ledger certifies at ``delta`` for the releases so far (plus ``extra`` more)."""
        events = self.ledger + [self._mechanism.event] * extra
        if not events:
            return 0.0
        event = events[0] if len(events) == 1 else ComposedDpEvent(events)
        return account(event, self.delta, self.accountant).epsilon

    def get_parameters(self, config: Dict[str, Any]) -> List[np.ndarray]:
        return self.client.get_parameters(config)

    def fit(
        self, parameters: List[np.ndarray], config: Dict[str, Any]
    ) -> Tuple[List[np.ndarray], int, Dict[str, Any]]:
        server_round = config.get("server_round") if config else None
        if server_round is not None and int(server_round) in self.released_rounds:
            raise AlreadyReleased(
                f"round {server_round} was released already (ledger: {self.ledger_path or 'in memory'}); "
                "answering it again would release the data twice"
            )
        would = self.spent(extra=1)
        if not would <= self.epsilon * (1 + 1e-9):
            raise BudgetExceeded(
                f"budget exceeded: release {len(self.ledger) + 1} would bring epsilon to {would} "
                f"at delta {self.delta}, over the budget epsilon {self.epsilon}"
            )
        received = [np.asarray(p, dtype="f8") for p in parameters]
        new, num_examples, metrics = self.client.fit(parameters, config)
        shapes = [np.shape(p) for p in received]
        if [np.shape(p) for p in new] != shapes:
            raise ValueError("the wrapped client's fit returned parameters of other shapes")
        update = np.concatenate([(np.asarray(n, dtype="f8") - r).ravel() for n, r in zip(new, received)])
        if self.update_clip is not None:
            norm = float(np.linalg.norm(update))
            if norm > self.update_clip:
                update = update * (self.update_clip / norm)
        noisy = self._mechanism(update)
        # Charged (and on disk) before anything leaves: a crash may cost a round never sent,
        # never send one uncharged.
        self.ledger.append(self._mechanism.event)
        self.released_rounds.append(None if server_round is None else int(server_round))
        try:
            self._save_ledger()
        except BaseException:
            self.ledger.pop()
            self.released_rounds.pop()
            raise
        out, at = [], 0
        for r in received:
            out.append(r + noisy[at : at + r.size].reshape(r.shape))
            at += r.size
        metrics = dict(metrics or {})
        metrics.update(
            dpfl_epsilon=self.spent(),
            dpfl_delta=self.delta,
            dpfl_noise_multiplier=self.noise_multiplier,
            dpfl_sigma=self.sigma,
            dpfl_rounds=len(self.ledger),
        )
        return out, int(num_examples), metrics

    def evaluate(self, parameters: List[np.ndarray], config: Dict[str, Any]) -> Tuple[float, int, Dict[str, Any]]:
        if not self.allow_evaluate:
            raise DpflError(
                "evaluate releases a loss computed on the silo's data without noise; "
                "construct DpflClient(..., allow_evaluate=True) to allow it"
            )
        return self.client.evaluate(parameters, config)


__all__ = ["AlreadyReleased", "BudgetExceeded", "DpflClient", "GaussianDpEvent"]

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
   such releases are (ε, δ)-DP (or given as ``noise_multiplier``, Opacus-style). A seeded
   client (simulation only) draws each release from its own stream, derived from the seed
   and the release number — ``config["server_round"]``, or the durable ledger's count — so a
   client Flower re-creates for every message never repeats a round's noise; without either,
   a seeded client refuses to fit;
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

The ledger survives restarts when ``ledger_path`` names a file. It is dpfl's one ledger
(``dpfl._core.Ledger``: the Rust ``dpfl_privacy::ledger::Ledger`` of ``dpfl silo``, its JSON
format ``dpfl-ledger/2`` with a SHA-256 of its content, and its checks). Every release is
recorded there (a temporary file, flushed to disk and renamed over the old one, so a crash
leaves either the old or the new ledger) *before* the noisy update leaves ``fit``, so a crash
can charge a round that was never sent but never send an uncharged one. A restarted client
loads it, refuses rounds past the budget, and refuses to answer a round it already answered
(``config["server_round"]``, which Flower's strategies can send through ``on_fit_config_fn``)
rather than release the same data again with fresh noise. Only a missing file starts a fresh
ledger: an empty (0-byte) file, ``[]``, ``null``, a cut-short file, one whose release list was
emptied or edited (its checksum no longer matches), or one kept with another budget or
accountant raises :class:`LedgerError`, never a fresh budget. A release without a
``server_round`` is recorded under an id from 2⁶³ up, apart from the rounds' ids.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
from flwr.client import NumPyClient

from ._checks import uint
# One class each for every silo of the package (dpfl.halves raises them too).
from ._core import AlreadyReleased, BudgetExceeded, DpflError, Ledger, LedgerError
from .accounting import calibrate
from .events import GaussianDpEvent
from .mechanisms import GaussianMechanism


# Ids of releases without a ``server_round``: 2^63, 2^63 + 1, … (rounds keep their own number).
_UNNUMBERED = 1 << 63


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
        self._seed = None if seed is None else int(seed)
        self._silo = int(silo)
        # OS-seeded: one generator for the client's life. Seeded: one stream per release
        # (``_release_seed``), so a client Flower re-creates for every message never draws a
        # round's noise again (issue 29: it did, and two rounds' difference cancelled it).
        self._mechanism = GaussianMechanism(self.sigma, self.sensitivity, seed=None, stream=silo) \
            if seed is None else None
        self._event = (self._mechanism or GaussianMechanism(self.sigma, self.sensitivity)).event.to_json()
        self.ledger_path = os.fspath(ledger_path) if ledger_path is not None else None
        # The unsampled Gaussian's ε is the same under either relation (its noise multiplier
        # is relative to Δ, the update's replace-one sensitivity); add-remove is the relation
        # ``dpfl.account`` uses for it, so the ledger's ε is ``account``'s, by ``accountant``.
        self.ledger = Ledger(self.ledger_path, self.epsilon, self.delta, accountant, "add-remove")

    # The ledger.
    def spent(self) -> float:
        """ε the ledger certifies at ``delta`` for the releases so far."""
        return self.ledger.spent_epsilon()

    def get_parameters(self, config: Dict[str, Any]) -> List[np.ndarray]:
        return self.client.get_parameters(config)

    def fit(
        self, parameters: List[np.ndarray], config: Dict[str, Any]
    ) -> Tuple[List[np.ndarray], int, Dict[str, Any]]:
        server_round = config.get("server_round") if config else None
        if server_round is not None:
            release = uint("server_round", int(server_round))
            if release in self.ledger:
                raise AlreadyReleased(
                    f"round {server_round} was released already (ledger: {self.ledger_path or 'in memory'}); "
                    "answering it again would release the data twice"
                )
        else:
            if self._seed is not None and self.ledger_path is None:
                # The release would be numbered by an in-memory count, which a client Flower
                # re-creates for every message restarts: the same seed, the same noise again.
                raise DpflError(
                    "a seeded DpflClient needs a round number (config['server_round']) or a "
                    "durable ledger (ledger_path=...): Flower re-creates clients, and a seeded "
                    "client numbered from memory would draw the same noise every round"
                )
            release = _UNNUMBERED + sum(1 for r in self.ledger.releases() if r >= _UNNUMBERED)
        if not self.ledger.would_allow(self._event):
            raise BudgetExceeded(
                f"budget exceeded: release {len(self.ledger) + 1} would bring epsilon past the "
                f"budget epsilon {self.epsilon} at delta {self.delta} (spent: {self.spent()})"
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
        mechanism = self._mechanism
        if mechanism is None:
            mechanism = GaussianMechanism(
                self.sigma, self.sensitivity, seed=_release_seed(self._seed, release), stream=self._silo
            )
        noisy = mechanism(update)
        # Charged (and on disk) before anything leaves: a crash may cost a round never sent,
        # never send one uncharged.
        self.ledger.charge(release, self._event)
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


def _release_seed(seed: int, release: int) -> int:
    """A 64-bit seed for release ``release`` of a client seeded with ``seed``: splitmix64 of
    the pair, so distinct releases (the ledger refuses a release id twice) get unrelated
    ChaCha20 streams, and the same (seed, release) the same noise (reproducible simulation)."""
    mask = (1 << 64) - 1
    h = 0x9E3779B97F4A7C15
    for w in (seed & mask, release & mask):
        z = (h ^ ((w + 0x9E3779B97F4A7C15) & mask)) & mask
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
        h = z ^ (z >> 31)
    return h


__all__ = ["AlreadyReleased", "BudgetExceeded", "DpflClient", "GaussianDpEvent", "LedgerError"]

"""ISRL-DP for any Flower ``NumPyClient``: :class:`DpflClient` (the legacy client API).

What happens inside the client, in each ``fit``, in one of two modes:

* **per-update** (``update_clip=`` or ``sensitivity=``): the wrapped client trains; its
  update u = (new − received parameters, all arrays together) is clipped to L2 norm
  ``update_clip`` (Δ = 2·``update_clip`` under replace-one) or trusted to have replace-one
  sensitivity ``sensitivity``; the Gaussian mechanism adds N(0, (zΔ)²) per coordinate, z
  calibrated so that ``rounds`` unsampled Gaussian releases are (ε, δ)-DP. No sampling
  amplification: at ε = 1 this is noisy.
* **per-step** (``example_clip=``, ``batch_size=``, ``records=``, ``local_steps=``,
  ``learning_rate=``): local DP-SGD (Abadi et al. 2016, Alg. 1) run by dpfl on the wrapped
  client's ``per_example_gradients(parameters, indices)``: each of ``local_steps`` steps
  Poisson-samples the silo's ``records`` with q = ``batch_size``/``records``, clips every
  example's gradient to ``example_clip``, sums, adds N(0, (z·C)²), divides by the expected
  batch q·n and steps. Accounted as ``rounds``·``local_steps`` Poisson-sampled Gaussians
  (add/remove; the RDP bound of Mironov, Talwar & Zhang 2019) — the amplification that makes a
  wrapped client useful at ε = 1.

Both modes check, before anything is released, that the round is within the plan (a
``server_round`` past ``rounds`` is refused, :class:`PastThePlan`), that the ledger allows
one more release (:class:`BudgetExceeded`), and that the round was not answered already
(:class:`AlreadyReleased`). The ledger is dpfl's one ledger (``dpfl-ledger/2``, checksummed)
and is always on disk: ``ledger_path``, or by default
``$DPFL_LEDGER_DIR/flower-silo-<silo>.ledger.json`` (``~/.dpfl/ledgers`` without the
variable), because Flower re-creates clients for every message and an in-memory ledger would
restart at 0 every round (issue 29). It is re-read under a file lock in every ``fit``, so any
number of client objects of one silo (a Ray actor's copies, a restarted SuperNode) share one
account. The release is charged (temporary file, flush, rename) before the noisy update leaves.

A seeded client (simulation only) draws each release from its own stream, derived from the
seed and the release number (the round, or the durable ledger's count), so a client Flower
re-creates never repeats a round's noise. Everything the client holds is picklable (the
mechanism and the ledger are rebuilt from their parameters when needed), so Ray can ship it.

The metrics carry ``dpfl_epsilon`` (the ledger's ε after this release), ``dpfl_delta``,
``dpfl_noise_multiplier``, ``dpfl_sigma``, ``dpfl_rounds``: aggregate them with
:func:`dpfl.flower.max_metrics` (Flower otherwise weighted-averages them).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np
from flwr.client import NumPyClient

from .._checks import uint
# One class each for every silo of the package (dpfl.halves raises them too).
from .._core import AlreadyReleased, BudgetExceeded, ConfigError, DpflError, Ledger, LedgerError, RunError
from ..accounting import calibrate
from ..events import DpEvent, GaussianDpEvent, PoissonSampledDpEvent, SelfComposedDpEvent
from ..mechanisms import GaussianMechanism


class PastThePlan(BudgetExceeded):
    """A round number past the ``rounds`` the noise was calibrated for; nothing was released."""


# Ids of releases without a round number: 2^63, 2^63 + 1, … (rounds keep their own number).
_UNNUMBERED = 1 << 63


def default_ledger_dir() -> Path:
    """``$DPFL_LEDGER_DIR``, else ``~/.dpfl/ledgers``: where a silo's ledger lives by default."""
    env = os.environ.get("DPFL_LEDGER_DIR")
    return Path(env) if env else Path.home() / ".dpfl" / "ledgers"


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on ``path`` + ``.lock`` (POSIX ``flock``; elsewhere none): one
    load-check-release-charge at a time per ledger file, across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    with open(str(path) + ".lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _round_of(config: Dict[str, Any]) -> Optional[int]:
    # Legacy strategies send nothing unless on_fit_config_fn does; Message-API ones "server-round".
    for key in ("server_round", "server-round"):
        if config and config.get(key) is not None:
            return uint(key, int(config[key]))
    return None


class DpflClient(NumPyClient):
    """A Flower ``NumPyClient`` whose ``fit`` releases a clipped, noised update (or runs
    local DP-SGD) and keeps the silo's durable ledger. See the module docs for the modes."""

    def __init__(
        self,
        client: NumPyClient,
        *,
        epsilon: float,
        delta: float,
        rounds: int,
        update_clip: Optional[float] = None,
        sensitivity: Optional[float] = None,
        example_clip: Optional[float] = None,
        batch_size: Optional[int] = None,
        records: Optional[int] = None,
        local_steps: int = 1,
        learning_rate: float = 0.1,
        noise_multiplier: Optional[float] = None,
        accountant: str = "rdp",
        seed: Optional[int] = None,
        silo: int = 0,
        allow_evaluate: bool = False,
        ledger_path: "Optional[str | os.PathLike[str]]" = None,
    ) -> None:
        modes = [x is not None for x in (update_clip, sensitivity, example_clip)]
        if sum(modes) != 1:
            raise ConfigError("config field `update_clip`: give exactly one of update_clip, sensitivity (per-update) "
                              "and example_clip (per-step)")
        bound = next(x for x in (update_clip, sensitivity, example_clip) if x is not None)
        if not (np.isfinite(bound) and bound > 0):
            name = ("update_clip", "sensitivity", "example_clip")[modes.index(True)]
            raise ConfigError(f"config field `{name}`: must be finite and > 0, got {bound}")
        if rounds < 1:
            raise ConfigError(f"config field `rounds`: must be at least 1, got {rounds}")
        self.client = client
        self.epsilon, self.delta, self.rounds = float(epsilon), float(delta), int(rounds)
        self.update_clip = update_clip
        self.accountant = accountant
        self.allow_evaluate = allow_evaluate
        self.per_step = example_clip is not None
        if self.per_step:
            if batch_size is None or records is None or not 0 < batch_size <= records:
                raise ConfigError(f"config field `batch_size`: per-step mode needs 0 < batch_size <= records, got "
                                  f"{batch_size} and {records}")
            if local_steps < 1 or not learning_rate > 0:
                raise ConfigError(f"config field `local_steps`/`learning_rate`: per-step mode needs local_steps >= 1 "
                                  f"and learning_rate > 0, got {local_steps} and {learning_rate}")
            self.records, self.local_steps = int(records), int(local_steps)
            self.rate = batch_size / records
            self.learning_rate = float(learning_rate)
            self.sensitivity = float(example_clip)  # add/remove one example moves the sum by <= C
        else:
            self.sensitivity = float(2.0 * update_clip if update_clip is not None else sensitivity)
        if noise_multiplier is None and self.per_step:
            total = self.rounds * self.local_steps
            noise_multiplier = calibrate(
                self.epsilon, self.delta, lambda z: self._event_of(z, total), accountant=accountant,
                neighbouring="add-remove",
            ).noise_multiplier
        elif noise_multiplier is None:
            noise_multiplier = calibrate(
                self.epsilon, self.delta, mechanism="gaussian", steps=self.rounds, accountant=accountant
            ).noise_multiplier
        self.noise_multiplier = float(noise_multiplier)
        self.sigma = self.noise_multiplier * self.sensitivity
        self._seed = None if seed is None else int(seed)
        self._silo = uint("silo", silo, 32)
        self._event = self._event_of(self.noise_multiplier, self.local_steps if self.per_step else 1).to_json()
        path = ledger_path if ledger_path is not None else default_ledger_dir() / f"flower-silo-{self._silo}.ledger.json"
        self.ledger_path = os.fspath(path)
        Path(self.ledger_path).parent.mkdir(parents=True, exist_ok=True)
        self.ledger  # opened once now: a damaged file or another budget fails at construction

    def _event_of(self, z: float, steps: int) -> DpEvent:
        # The unsampled Gaussian's ε is the same under either relation (z is relative to Δ);
        # Poisson sampling is accounted under add/remove, the ledger's relation.
        one: DpEvent = GaussianDpEvent(z)
        if self.per_step:
            one = PoissonSampledDpEvent(self.rate, one)
        return one if steps == 1 else SelfComposedDpEvent(one, steps)

    @property
    def ledger(self) -> Ledger:
        """The silo's ledger as it is on disk now (re-read every time: never a stale copy)."""
        return Ledger(self.ledger_path, self.epsilon, self.delta, self.accountant, "add-remove")

    def spent(self) -> float:
        """ε the ledger certifies at ``delta`` for the releases so far."""
        return self.ledger.spent_epsilon()

    def get_parameters(self, config: Dict[str, Any]) -> List[np.ndarray]:
        return self.client.get_parameters(config)

    def fit(
        self, parameters: List[np.ndarray], config: Dict[str, Any]
    ) -> Tuple[List[np.ndarray], int, Dict[str, Any]]:
        with locked(Path(self.ledger_path)):
            ledger = self.ledger
            release = self._check(ledger, _round_of(config))
            mechanism = GaussianMechanism(
                self.sigma, self.sensitivity, stream=self._silo,
                seed=None if self._seed is None else _release_seed(self._seed, release),
            )
            received = [np.asarray(p, dtype="f8") for p in parameters]
            if self.per_step:
                out, num_examples, metrics = self._dp_sgd(received, config, mechanism, release)
            else:
                out, num_examples, metrics = self._per_update(parameters, received, config, mechanism)
            # Charged (and on disk) before anything leaves: a crash may cost a round never
            # sent, never send one uncharged.
            ledger.charge(release, self._event)
        metrics = dict(metrics or {})
        metrics.update(
            dpfl_epsilon=ledger.spent_epsilon(), dpfl_delta=self.delta,
            dpfl_noise_multiplier=self.noise_multiplier, dpfl_sigma=self.sigma, dpfl_rounds=len(ledger),
        )
        return out, int(num_examples), metrics

    def _check(self, ledger: Ledger, server_round: Optional[int]) -> int:
        """The release id of this fit, or the refusal (nothing released)."""
        if server_round is not None:
            if server_round > self.rounds:
                raise PastThePlan(
                    f"round {server_round} is past the {self.rounds} rounds the noise was calibrated "
                    "for: configure the server with the same number of rounds"
                )
            if server_round in ledger:
                raise AlreadyReleased(
                    f"round {server_round} was released already (ledger: {self.ledger_path}); "
                    "answering it again would release the data twice"
                )
            release = server_round
        else:
            release = _UNNUMBERED + sum(1 for r in ledger.releases() if r >= _UNNUMBERED)
        if not ledger.would_allow(self._event):
            raise BudgetExceeded(
                f"budget exceeded: release {len(ledger) + 1} would bring epsilon past the budget "
                f"epsilon {self.epsilon} at delta {self.delta} (spent: {ledger.spent_epsilon()}; "
                f"ledger: {self.ledger_path})"
            )
        return release

    def _per_update(self, parameters, received, config, mechanism):
        new, num_examples, metrics = self.client.fit(parameters, config)
        if [np.shape(p) for p in new] != [np.shape(p) for p in received]:
            raise RunError("the wrapped client's fit returned parameters of other shapes")
        update = np.concatenate([(np.asarray(n, dtype="f8") - r).ravel() for n, r in zip(new, received)])
        if self.update_clip is not None:
            norm = float(np.linalg.norm(update))
            if norm > self.update_clip:
                update = update * (self.update_clip / norm)
        return _unflatten(received, np.concatenate([r.ravel() for r in received]) + mechanism(update)), \
            num_examples, metrics

    def _dp_sgd(self, received, config, mechanism, release):
        grads_of = getattr(self.client, "per_example_gradients", None)
        if grads_of is None:
            raise DpflError("per-step mode needs the wrapped client's per_example_gradients(parameters, indices)")
        # Poisson sampling must be secret from the server: OS entropy, or (seeded simulation)
        # a stream apart from the noise's.
        rng = np.random.default_rng(None if self._seed is None else _release_seed(self._seed ^ 0x5A5A, release))
        theta = np.concatenate([r.ravel() for r in received])
        expected = self.rate * self.records
        for _ in range(self.local_steps):
            idx = np.flatnonzero(rng.random(self.records) < self.rate)
            total = np.zeros_like(theta)
            if idx.size:
                per = grads_of(_unflatten(received, theta), idx)
                g = np.concatenate([np.asarray(a, dtype="f8").reshape(idx.size, -1) for a in per], axis=1)
                if g.shape != (idx.size, theta.size):
                    raise RunError(f"per_example_gradients returned {g.shape}, want {(idx.size, theta.size)}")
                norms = np.linalg.norm(g, axis=1, keepdims=True)
                g = g * np.minimum(1.0, self.sensitivity / np.maximum(norms, 1e-300))
                total = g.sum(axis=0)
            theta = theta - self.learning_rate * mechanism(total) / expected
        return _unflatten(received, theta), int(round(expected)), {}

    def evaluate(self, parameters: List[np.ndarray], config: Dict[str, Any]) -> Tuple[float, int, Dict[str, Any]]:
        if not self.allow_evaluate:
            raise DpflError(
                "evaluate releases a loss computed on the silo's data without noise; "
                "construct DpflClient(..., allow_evaluate=True) to allow it"
            )
        return self.client.evaluate(parameters, config)


def _unflatten(like: List[np.ndarray], flat: np.ndarray) -> List[np.ndarray]:
    out, at = [], 0
    for r in like:
        out.append(flat[at : at + r.size].reshape(r.shape))
        at += r.size
    return out


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


__all__ = ["AlreadyReleased", "BudgetExceeded", "DpflClient", "LedgerError", "PastThePlan", "default_ledger_dir"]

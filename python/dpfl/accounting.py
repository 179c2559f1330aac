"""The accountant, in the shape of Google's ``dp_accounting``: events (``dpfl.events``),
``account(event, delta, accountant=...)``, accountant objects with ``compose`` /
``get_epsilon``, and ``calibrate``. Every number comes from the same Rust code as
``dpfl account`` / ``dpfl calibrate`` (crates/dpfl-privacy), so they agree exactly.

Neighbouring relation: ``"add-remove"`` or ``"replace-one"``. Unless given, it is
``"replace-one"`` when the event samples fixed-size batches (with or without replacement) and
``"add-remove"`` otherwise, as in the CLI. (``dp_accounting`` defaults to add-or-remove and does
not account sampling with replacement.)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional

from . import _core
from ._checks import opt_uint, uint
from .events import ComposedDpEvent, DpEvent, SelfComposedDpEvent, from_dict, from_dp_accounting


@dataclass(frozen=True)
class Accounting:
    """The ε of an event at δ, and a lower bound on its true ε (``None`` where dpfl has no
    concrete neighbouring pair for the event, e.g. Laplace, or where the lower bound's
    optimistic grid put it above the upper bound: the reason is then under ``notes``).

    ``accountant`` names the accountant whose ε is ``epsilon``. Unless one was named, RDP and
    the PLD are both computed (both sound upper bounds) and ``epsilon`` is the tighter, as
    ``dpfl account`` prints it; ``rdp_epsilon`` and ``pld_epsilon`` show both (``None`` where one
    does not support the event, with the reason under ``notes``)."""

    epsilon: float
    epsilon_lower_bound: Optional[float]
    delta: float
    accountant: str
    neighbouring: str
    event: DpEvent
    rdp_epsilon: Optional[float] = None
    pld_epsilon: Optional[float] = None
    notes: Dict[str, str] = field(default_factory=dict)


def account(
    event: Any,
    delta: float,
    accountant: Optional[str] = None,
    neighbouring: Optional[str] = None,
) -> Accounting:
    """ε at ``delta`` of ``event`` (a dpfl event, or a ``dp_accounting`` event object, converted
    by :func:`dpfl.events.from_dp_accounting`).

    With no ``accountant``: the tighter of RDP and the PLD, both shown, as the CLI's ``dpfl
    account`` (its default). A named accountant (``"pld"``, ``"rdp"``, ``"zcdp"``, ``"basic"``,
    ``"advanced"``, ``"optimal"``) gives exactly its own ε. Raises ``ConfigError`` for an event
    the accountant(s) cannot account, ``RunError`` on a numerical failure (never an optimistic
    ε)."""
    event = from_dp_accounting(event)
    out = json.loads(_core.account_event(event.to_json(), float(delta), accountant, neighbouring))
    return Accounting(
        epsilon=out["epsilon"],
        epsilon_lower_bound=out["epsilon_lower_bound"],
        delta=out["delta"],
        accountant=out["accountant"],
        neighbouring=out["neighbouring"],
        event=event,
        rdp_epsilon=out.get("rdp_epsilon"),
        pld_epsilon=out.get("pld_epsilon"),
        notes=dict(out.get("notes") or {}),
    )


def get_delta(
    event: Any, epsilon: float, accountant: str = "pld", neighbouring: Optional[str] = None
) -> float:
    """δ at ``epsilon`` of ``event`` by the PLD (the larger over both directions) or RDP
    (Canonne, Kamath & Steinke 2020 Prop. 12 with the KL bound) accountant, as
    ``dp_accounting``'s ``get_delta``."""
    event = from_dp_accounting(event)
    return _core.delta_event(event.to_json(), float(epsilon), accountant, neighbouring)


class _Accountant:
    _kind = ""

    def __init__(self, neighboring_relation: Optional[str] = None) -> None:
        self.neighbouring = neighboring_relation
        self._events: List[DpEvent] = []

    def supports(self, event: Any) -> bool:
        """Whether this accountant accounts ``event`` (as ``dp_accounting``'s ``supports``):
        ``False`` for an event it refuses or one that does not convert, never an exception."""
        try:
            account(from_dp_accounting(event), 1e-5, self._kind, self.neighbouring)
        except _core.ConfigError:
            return False
        return True

    def compose(self, event: Any, count: int = 1) -> "_Accountant":
        """Adds ``count`` adaptive repetitions of ``event`` (a dpfl or ``dp_accounting`` event;
        a ``dp_accounting`` ``NoOpDpEvent`` adds nothing); returns self (as ``dp_accounting``)."""
        if type(event).__name__ == "NoOpDpEvent" and (type(event).__module__ or "").startswith(
            "dp_accounting"
        ):
            return self
        event = from_dp_accounting(event)
        count = uint("count", count)
        self._events.append(event if count == 1 else SelfComposedDpEvent(event, count))
        return self

    @property
    def ledger(self) -> DpEvent:
        """Everything composed so far, as one event."""
        if len(self._events) == 1:
            return self._events[0]
        return ComposedDpEvent(list(self._events))

    def get_epsilon(self, target_delta: float) -> float:
        """ε at ``target_delta`` of everything composed so far (0 events: 0)."""
        if not self._events:
            return 0.0
        return account(self.ledger, target_delta, self._kind, self.neighbouring).epsilon

    def get_delta(self, target_epsilon: float) -> float:
        """δ at ``target_epsilon`` of everything composed so far (0 events: 0)."""
        if not self._events:
            return 0.0
        return get_delta(self.ledger, target_epsilon, self._kind, self.neighbouring)


class RdpAccountant(_Accountant):
    """Rényi DP accountant (Mironov 2017; Poisson: Mironov, Talwar & Zhang 2019)."""

    _kind = "rdp"


class PldAccountant(_Accountant):
    """Privacy-loss-distribution accountant (pessimistic discretisation, FFT composition)."""

    _kind = "pld"


@dataclass(frozen=True)
class Calibration:
    """The smallest noise multiplier certified for (epsilon, delta), and what it achieves.
    ``raw`` is ``dpfl calibrate``'s JSON object when called in the CLI's form."""

    noise_multiplier: float
    epsilon: float
    epsilon_achieved: float
    delta: float
    accountant: str
    event: DpEvent
    raw: Dict[str, Any] = field(default_factory=dict)


def calibrate(
    epsilon: float,
    delta: float,
    make_event: Optional[Callable[[float], DpEvent]] = None,
    *,
    mechanism: str = "gaussian",
    sampling: Optional[str] = None,
    rate: Optional[float] = None,
    steps: int = 1,
    dataset_size: Optional[int] = None,
    neighbouring: Optional[str] = None,
    accountant: str = "rdp",
) -> Calibration:
    """The smallest noise multiplier z whose event the accountant certifies for
    (``epsilon``, ``delta``); the result always meets the target.

    Either ``make_event(z) -> DpEvent`` (as ``dp_accounting.calibrate_dp_mechanism``), or the
    release in ``dpfl calibrate``'s terms: ``mechanism`` (``gaussian``, ``laplace``,
    ``discrete-gaussian``, ``discrete-laplace``), ``sampling`` (``None``, ``poisson``,
    ``with-replacement``, ``without-replacement``), ``rate`` (q, or batch/dataset size),
    ``steps``, ``dataset_size``. The second form returns exactly the CLI's numbers (``raw``).
    """
    if make_event is not None:
        z, achieved = _core.calibrate_event(
            lambda z: make_event(z).to_json(), float(epsilon), float(delta), accountant, neighbouring
        )
        return Calibration(z, float(epsilon), achieved, float(delta), accountant, make_event(z))
    raw = json.loads(
        _core.calibrate_release(
            float(epsilon), float(delta), mechanism, sampling, rate, uint("steps", steps), neighbouring,
            opt_uint("dataset_size", dataset_size), accountant,
        )
    )
    return Calibration(
        noise_multiplier=raw["noise_multiplier"],
        epsilon=raw["epsilon"],
        epsilon_achieved=raw["epsilon_achieved"],
        delta=raw["delta"],
        accountant=raw["accountant"],
        event=from_dict(raw["event"]),
        raw=raw,
    )


def account_release(
    noise_multiplier: float,
    delta: float,
    *,
    mechanism: str = "gaussian",
    sampling: Optional[str] = None,
    rate: Optional[float] = None,
    steps: int = 1,
    dataset_size: Optional[int] = None,
    neighbouring: Optional[str] = None,
    accountant: str = "rdp",
    poisson_pair: str = "ball",
) -> Dict[str, Any]:
    """``dpfl account`` with the same parameters: returns the JSON object the CLI prints.

    ``epsilon`` is the tighter of the RDP and PLD figures (both sound upper bounds), named by
    ``epsilon_accountant``; ``rdp_epsilon`` and ``pld_epsilon`` show both (null where one does
    not support the event, with the reason under ``notes``). ``epsilon_lower_bound`` is best
    effort: null, with the reason under ``notes``, when dpfl has no concrete neighbouring pair
    for the event or it is not computed within 20 s. ``poisson_pair`` picks the pair Poisson
    sampling under replace-one is accounted with: ``"ball"`` (clipped contributions, every dpfl
    mechanism) or ``"generic"`` (looser).
    """
    return json.loads(
        _core.account_release(
            float(noise_multiplier), float(delta), mechanism, sampling, rate, uint("steps", steps),
            neighbouring, opt_uint("dataset_size", dataset_size), accountant, poisson_pair,
        )
    )


def analytic_gaussian(epsilon: float, delta: float) -> float:
    """The exact noise multiplier of one Gaussian release at (ε, δ) (Balle & Wang 2018)."""
    return _core.analytic_gaussian(float(epsilon), float(delta))

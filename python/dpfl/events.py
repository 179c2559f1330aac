"""Privacy events, in the shape of Google's ``dp_accounting`` (``GaussianDpEvent``,
``PoissonSampledDpEvent``, ...), serialised to dpfl's event JSON (the serde form of
``dpfl_privacy::PrivacyEvent``) for the Rust accountants.

Noise multipliers are the noise's standard deviation (Laplace: scale) divided by the
sensitivity of the released quantity under the neighbouring relation used for accounting.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence


class DpEvent:
    """Base class of every event."""

    def to_dict(self) -> Dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def to_json(self) -> str:
        """The event as dpfl's JSON (what ``dpfl account`` prints under ``"event"``)."""
        return json.dumps(self.to_dict())



@dataclass(frozen=True)
class GaussianDpEvent(DpEvent):
    """The Gaussian mechanism with noise multiplier σ/Δ₂."""

    noise_multiplier: float

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": "gaussian", "noise_multiplier": float(self.noise_multiplier)}


@dataclass(frozen=True)
class LaplaceDpEvent(DpEvent):
    """The Laplace mechanism with scale b/Δ₁."""

    noise_multiplier: float

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": "laplace", "noise_multiplier": float(self.noise_multiplier)}


@dataclass(frozen=True)
class DiscreteGaussianDpEvent(DpEvent):
    """The discrete Gaussian on ℤ (Canonne, Kamath & Steinke 2020) with σ/Δ₂."""

    noise_multiplier: float

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": "discrete-gaussian", "noise_multiplier": float(self.noise_multiplier)}


@dataclass(frozen=True)
class DiscreteLaplaceDpEvent(DpEvent):
    """The discrete Laplace (two-sided geometric) mechanism with scale t/Δ₁."""

    noise_multiplier: float

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": "discrete-laplace", "noise_multiplier": float(self.noise_multiplier)}


@dataclass(frozen=True)
class EpsilonDeltaDpEvent(DpEvent):
    """A mechanism known only by an (ε, δ) guarantee."""

    epsilon: float
    delta: float

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": "epsilon-delta", "epsilon": float(self.epsilon), "delta": float(self.delta)}


@dataclass(frozen=True)
class PoissonSampledDpEvent(DpEvent):
    """``event`` applied to a Poisson sample: each record with probability ``sampling_probability``."""

    sampling_probability: float
    event: DpEvent

    def to_dict(self) -> Dict[str, Any]:
        return {
            "kind": "sampled",
            "sampling": {"kind": "poisson", "rate": float(self.sampling_probability)},
            "event": self.event.to_dict(),
        }


@dataclass(frozen=True)
class SampledWithReplacementDpEvent(DpEvent):
    """``event`` applied to ``sample_size`` records drawn i.i.d. uniformly (with replacement)
    from ``source_dataset_size`` (the ISRL-DP papers' minibatches)."""

    source_dataset_size: int
    sample_size: int
    event: DpEvent

    def to_dict(self) -> Dict[str, Any]:
        return {
            "kind": "sampled",
            "sampling": {
                "kind": "with-replacement",
                "population": int(self.source_dataset_size),
                "draws": int(self.sample_size),
            },
            "event": self.event.to_dict(),
        }


@dataclass(frozen=True)
class SampledWithoutReplacementDpEvent(DpEvent):
    """``event`` applied to a uniformly random subset of ``sample_size`` records."""

    source_dataset_size: int
    sample_size: int
    event: DpEvent

    def to_dict(self) -> Dict[str, Any]:
        return {
            "kind": "sampled",
            "sampling": {
                "kind": "without-replacement",
                "population": int(self.source_dataset_size),
                "size": int(self.sample_size),
            },
            "event": self.event.to_dict(),
        }


@dataclass(frozen=True)
class SelfComposedDpEvent(DpEvent):
    """``event`` repeated ``count`` times (adaptively)."""

    event: DpEvent
    count: int

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": "self-composed", "event": self.event.to_dict(), "count": int(self.count)}


@dataclass(frozen=True)
class ComposedDpEvent(DpEvent):
    """Several events in sequence."""

    events: Sequence[DpEvent]

    def to_dict(self) -> Dict[str, Any]:
        return {"kind": "composed", "events": [e.to_dict() for e in self.events]}


def from_dict(d: Dict[str, Any]) -> DpEvent:
    """The event of dpfl's JSON form (e.g. ``dpfl account``'s ``"event"``); anything else (a
    list, ``null``, a number) raises ``ConfigError``."""
    if not isinstance(d, dict):
        from ._core import ConfigError

        raise ConfigError(f"config field `event`: not a dpfl event (a JSON object): {d!r:.80}")
    kind = d.get("kind")
    if kind == "gaussian":
        return GaussianDpEvent(d["noise_multiplier"])
    if kind == "laplace":
        return LaplaceDpEvent(d["noise_multiplier"])
    if kind == "discrete-gaussian":
        return DiscreteGaussianDpEvent(d["noise_multiplier"])
    if kind == "discrete-laplace":
        return DiscreteLaplaceDpEvent(d["noise_multiplier"])
    if kind == "epsilon-delta":
        return EpsilonDeltaDpEvent(d["epsilon"], d["delta"])
    if kind == "self-composed":
        return SelfComposedDpEvent(from_dict(d["event"]), d["count"])
    if kind == "composed":
        return ComposedDpEvent([from_dict(e) for e in d["events"]])
    if kind == "sampled":
        s, inner = d["sampling"], from_dict(d["event"])
        if s["kind"] == "poisson":
            return PoissonSampledDpEvent(s["rate"], inner)
        if s["kind"] == "with-replacement":
            return SampledWithReplacementDpEvent(s["population"], s["draws"], inner)
        if s["kind"] == "without-replacement":
            return SampledWithoutReplacementDpEvent(s["population"], s["size"], inner)
    return _RawDpEvent(d)


def from_dp_accounting(event: Any) -> DpEvent:
    """The dpfl event of a ``dp_accounting`` event object (duck-typed: dp_accounting need not be
    installed): Gaussian, Laplace, (ε, δ), Poisson / with / without replacement sampling,
    self-composed and composed events, whose fields mean the same in both libraries (noise
    multiplier = standard deviation or Laplace scale over the sensitivity). A dpfl event is
    returned as is. Any other kind (e.g. ``NoOpDpEvent``, whose accounting is trivially zero,
    or ``UnsupportedDpEvent``) raises ``ConfigError`` naming it, never a guess."""
    if isinstance(event, DpEvent):
        return event
    name = type(event).__name__
    module = type(event).__module__ or ""
    if not module.startswith("dp_accounting"):
        from ._core import ConfigError

        raise ConfigError(f"config field `event`: not a dpfl or dp_accounting event: {name}")
    if name == "GaussianDpEvent":
        return GaussianDpEvent(float(event.noise_multiplier))
    if name == "LaplaceDpEvent":
        return LaplaceDpEvent(float(event.noise_multiplier))
    if name == "EpsilonDeltaDpEvent":
        return EpsilonDeltaDpEvent(float(event.epsilon), float(event.delta))
    if name == "PoissonSampledDpEvent":
        return PoissonSampledDpEvent(float(event.sampling_probability), from_dp_accounting(event.event))
    if name == "SampledWithReplacementDpEvent":
        return SampledWithReplacementDpEvent(
            int(event.source_dataset_size), int(event.sample_size), from_dp_accounting(event.event)
        )
    if name == "SampledWithoutReplacementDpEvent":
        return SampledWithoutReplacementDpEvent(
            int(event.source_dataset_size), int(event.sample_size), from_dp_accounting(event.event)
        )
    if name == "SelfComposedDpEvent":
        return SelfComposedDpEvent(from_dp_accounting(event.event), int(event.count))
    if name == "ComposedDpEvent":
        return ComposedDpEvent([from_dp_accounting(e) for e in event.events])
    from ._core import ConfigError

    raise ConfigError(
        f"config field `event`: dp_accounting's {name} has no dpfl equivalent (convertible: "
        "Gaussian, Laplace, EpsilonDelta, PoissonSampled, SampledWith/WithoutReplacement, "
        "SelfComposed, Composed)"
    )


@dataclass(frozen=True)
class _RawDpEvent(DpEvent):
    """An event kind this module has no class for (e.g. truncated discrete Laplace)."""

    raw: Dict[str, Any]

    def to_dict(self) -> Dict[str, Any]:
        return dict(self.raw)


__all__: List[str] = [
    "DpEvent",
    "GaussianDpEvent",
    "LaplaceDpEvent",
    "DiscreteGaussianDpEvent",
    "DiscreteLaplaceDpEvent",
    "EpsilonDeltaDpEvent",
    "PoissonSampledDpEvent",
    "SampledWithReplacementDpEvent",
    "SampledWithoutReplacementDpEvent",
    "SelfComposedDpEvent",
    "ComposedDpEvent",
    "from_dict",
    "from_dp_accounting",
]

"""Noise mechanisms on numpy arrays, seedable. Each object owns one ChaCha20 generator
(dpfl's ``DpRng``): with ``seed``, the stream ``(seed, silo, stream)`` that a silo's noise uses
in dpfl's simulator; without, seeded from the operating system (use that for real releases: a
seeded guarantee holds only against parties who do not know the seed)."""

from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

from . import _core
from ._checks import opt_uint, sint, uint
from .events import DpEvent, from_dict

import json


def _f64(x: "np.typing.ArrayLike") -> np.ndarray:
    return np.ascontiguousarray(x, dtype="<f8")


class GaussianMechanism:
    """x + N(0, sigma² I) per coordinate (continuous; rand_distr's ziggurat on ChaCha20).

    ``sensitivity`` is the L2 sensitivity of x under the relation you account in; the event
    is ``GaussianDpEvent(sigma / sensitivity)``."""

    def __init__(self, sigma: float, sensitivity: float = 1.0, *, seed: Optional[int] = None, stream: int = 0) -> None:
        self._m = _core.GaussianMechanism(
            float(sigma), float(sensitivity), opt_uint("seed", seed), uint("stream", stream, 32)
        )

    def __call__(self, x: "np.typing.ArrayLike") -> np.ndarray:
        """A noisy copy of ``x`` (same shape, float64)."""
        a = _f64(x)
        out = np.frombuffer(self._m.privatize(a.tobytes()), dtype="<f8")
        return out.reshape(a.shape).copy()

    privatize = __call__

    @property
    def event(self) -> DpEvent:
        """What one call spends."""
        return from_dict(json.loads(self._m.event()))

    @property
    def sigma(self) -> float:
        return self._m.sigma

    @property
    def noise_multiplier(self) -> float:
        return self._m.noise_multiplier


class DiscreteGaussianMechanism(GaussianMechanism):
    """The exact discrete Gaussian on the grid ``granularity``·ℤ (Canonne, Kamath & Steinke
    2020, Alg. 3): γ·(round(x/γ) + N_ℤ(0, (σ'/γ)²)), σ' = σ(Δ + γ√dim)/Δ so that the event's
    noise multiplier σ'/(Δ + γ√dim) stays σ/Δ (rounding moves x by up to γ√dim/2 each side).
    Arrays may have at most ``dim`` values."""

    def __init__(
        self,
        sigma: float,
        sensitivity: float,
        granularity: float,
        dim: int,
        *,
        seed: Optional[int] = None,
        stream: int = 0,
    ) -> None:
        self._m = _core.GaussianMechanism(
            float(sigma),
            float(sensitivity),
            opt_uint("seed", seed),
            uint("stream", stream, 32),
            float(granularity),
            uint("dim", dim),
        )

    @property
    def granularity(self) -> float:
        return self._m.granularity


class TruncatedDiscreteLaplace:
    """QTDL's truncated discrete Laplace TDL(m, α): P[Y = y] ∝ exp(−α|y|) on {−m..m}, drawn
    exactly (Das et al., DP-NormFedAvg, eq. 3). α is rounded down to a dyadic rational."""

    def __init__(self, m: int, alpha: float, *, seed: Optional[int] = None, stream: int = 0) -> None:
        self._t = _core.TruncatedDiscreteLaplace(
            uint("m", m), float(alpha), opt_uint("seed", seed), uint("stream", stream, 32)
        )

    def sample(self, size: "int | Tuple[int, ...]" = 1) -> np.ndarray:
        """int64 draws of the given shape."""
        shape = (size,) if isinstance(size, int) else tuple(size)
        n = uint("size", int(np.prod(shape)))
        return np.frombuffer(self._t.sample(n), dtype="<i8").reshape(shape).copy()

    def pmf(self, y: int) -> float:
        return self._t.pmf(sint("y", y))

    def variance(self) -> float:
        return self._t.variance()

    @property
    def m(self) -> int:
        return self._t.m

    @property
    def alpha(self) -> float:
        return self._t.alpha


class StochasticQuantizer:
    """QTDL's Q_s: each coordinate of x ∈ [−1, 1] (clamped) to an integer level k ∈ {−s..s},
    unbiased (E[k/s] = x), variance at most 1/(4s²)."""

    def __init__(self, s: int, *, seed: Optional[int] = None, stream: int = 0) -> None:
        self._q = _core.StochasticQuantizer(uint("s", s), opt_uint("seed", seed), uint("stream", stream, 32))

    def __call__(self, x: "np.typing.ArrayLike") -> np.ndarray:
        """int64 levels of the same shape as ``x``."""
        a = _f64(x)
        return np.frombuffer(self._q.quantize(a.tobytes()), dtype="<i8").reshape(a.shape).copy()

    quantize = __call__

    @property
    def s(self) -> int:
        return self._q.s


def qtdl_theorem1(epsilon: float, delta_1: float, delta_inf: float, d: int) -> Tuple[int, float, float]:
    """DP-NormFedAvg Theorem 1: (ε, Δ₁, Δ∞) → (m, α), with the correct δ for dimension ``d``
    as ln δ (the paper's 2^−d is wrong for d ≥ 2; see crates/dpfl-privacy/src/qtdl/)."""
    return _core.qtdl_theorem1(float(epsilon), float(delta_1), float(delta_inf), uint("d", d))

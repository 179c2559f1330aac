"""Integer arguments checked before they reach the Rust core: a value outside the Rust type's
range is a :class:`ConfigError` naming the parameter (a ``DpflError``), not the
``OverflowError`` the binding would raise (issue 31: every dpfl failure is a ``DpflError``).
Non-integers still raise ``TypeError``, as any Python function does."""

from __future__ import annotations

import operator
from typing import Any, Optional

from ._core import ConfigError


def uint(name: str, value: Any, bits: int = 64) -> int:
    """``value`` as an int in 0..2^bits − 1, else ``ConfigError`` naming ``name``."""
    v = operator.index(value)
    if not 0 <= v < (1 << bits):
        raise ConfigError(f"config field `{name}`: {v} is outside 0..={(1 << bits) - 1}")
    return v


def opt_uint(name: str, value: Any, bits: int = 64) -> Optional[int]:
    """:func:`uint`, or ``None``."""
    return None if value is None else uint(name, value, bits)


def sint(name: str, value: Any, bits: int = 64) -> int:
    """``value`` as an int in −2^(bits−1)..2^(bits−1) − 1, else ``ConfigError``."""
    v = operator.index(value)
    half = 1 << (bits - 1)
    if not -half <= v < half:
        raise ConfigError(f"config field `{name}`: {v} is outside {-half}..={half - 1}")
    return v

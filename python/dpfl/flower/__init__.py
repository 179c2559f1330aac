"""dpfl on Flower (tested with flwr 1.42.0, Ray backend; see the README's Flower section).

* :mod:`dpfl.flower.apps` — the current way (Message API): :func:`silo_mod` /
  :func:`silo_app` run a dpfl silo half inside the SuperNode, :func:`server_app` runs the
  server half in the ServerApp; any algorithm of a dpfl experiment or plan, seeded runs equal
  ``dpfl train`` bit for bit.
* :class:`DpflClient` — the legacy ``NumPyClient`` wrapper (per-update or per-step DP-SGD),
  with :func:`max_metrics` / :func:`max_fit_metrics` (ε aggregated as a max), :func:`strict`
  (a refusal fails the run) and :func:`numpy_client_app` (Message-API strategies).
"""

from .client import AlreadyReleased, BudgetExceeded, DpflClient, PastThePlan, default_ledger_dir
from .strategy import RoundFailed, max_fit_metrics, max_metrics, numpy_client_app, strict
from .._core import LedgerError
from ..events import GaussianDpEvent

__all__ = [
    "AlreadyReleased",
    "BudgetExceeded",
    "DpflClient",
    "GaussianDpEvent",
    "LedgerError",
    "PastThePlan",
    "RoundFailed",
    "default_ledger_dir",
    "max_fit_metrics",
    "max_metrics",
    "numpy_client_app",
    "strict",
]

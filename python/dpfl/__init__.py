"""dpfl: differentially private federated learning without a trusted server, from Python.

* ``dpfl.events`` / ``dpfl.account`` / ``dpfl.calibrate``: the accountant in
  ``dp_accounting``'s shape (RDP, PLD, zCDP, composition theorems), with lower bounds on the
  true ε; the same numbers as ``dpfl account`` / ``dpfl calibrate``.
* ``dpfl.GaussianMechanism``, ``DiscreteGaussianMechanism``, ``TruncatedDiscreteLaplace``,
  ``StochasticQuantizer``: mechanisms on numpy arrays, seedable.
* ``dpfl.train``: an experiment as ``dpfl train`` runs it; results load into pandas.
* ``dpfl.init`` / ``dpfl.check_config``: an experiment for your own CSV (silos from a column);
  ``dpfl.load_model``: a saved model, its weights in numpy, ``predict`` / ``evaluate``.
* ``dpfl.flower``: dpfl on Flower 1.42 — ``dpfl.flower.apps`` (any algorithm's silo half in a
  SuperNode, its server half in a ServerApp) and ``DpflClient`` (a ``NumPyClient`` wrapper).
* ``dpfl.halves``: every algorithm as its silo and server halves (``Plan``, ``SiloHalf``,
  ``ServerHalf``, ``simulate``), with bytes between them, on dpfl's models or your own
  (a per-example ``gradients`` callable).

Errors: ``ConfigError`` (bad parameter or config; the CLI's exit code 2) and ``RunError``
(a failed run or computation; exit code 1), both ``DpflError``, with the CLI's messages;
``LedgerError`` (a ``DpflError``): a privacy ledger file that is empty, damaged or not a ledger
(never read as a fresh budget), kept with other limits, or a refused release;
``BudgetExceeded`` (``AlreadyReleased``): a silo refused a round, nothing was released.
"""

from ._core import (
    AlreadyReleased,
    BudgetExceeded,
    ConfigError,
    DpflError,
    LedgerError,
    RunError,
    __version__,
)
from .accounting import (
    Accounting,
    Calibration,
    PldAccountant,
    RdpAccountant,
    account,
    account_release,
    analytic_gaussian,
    calibrate,
    get_delta,
)
from .events import (
    ComposedDpEvent,
    DiscreteGaussianDpEvent,
    DiscreteLaplaceDpEvent,
    DpEvent,
    EpsilonDeltaDpEvent,
    GaussianDpEvent,
    LaplaceDpEvent,
    PoissonSampledDpEvent,
    SampledWithoutReplacementDpEvent,
    SampledWithReplacementDpEvent,
    SelfComposedDpEvent,
)
from .mechanisms import (
    DiscreteGaussianMechanism,
    GaussianMechanism,
    StochasticQuantizer,
    TruncatedDiscreteLaplace,
    qtdl_theorem1,
)
from .models import SavedModel, check_config, init, load_model
from .training import ReproduceResult, TrainResult, reproduce, train

__all__ = [
    "ConfigError",
    "DpflError",
    "LedgerError",
    "RunError",
    "AlreadyReleased",
    "BudgetExceeded",
    "__version__",
    "Accounting",
    "Calibration",
    "PldAccountant",
    "RdpAccountant",
    "account",
    "account_release",
    "analytic_gaussian",
    "calibrate",
    "get_delta",
    "ComposedDpEvent",
    "DiscreteGaussianDpEvent",
    "DiscreteLaplaceDpEvent",
    "DpEvent",
    "EpsilonDeltaDpEvent",
    "GaussianDpEvent",
    "LaplaceDpEvent",
    "PoissonSampledDpEvent",
    "SampledWithoutReplacementDpEvent",
    "SampledWithReplacementDpEvent",
    "SelfComposedDpEvent",
    "DiscreteGaussianMechanism",
    "GaussianMechanism",
    "StochasticQuantizer",
    "TruncatedDiscreteLaplace",
    "qtdl_theorem1",
    "SavedModel",
    "check_config",
    "init",
    "load_model",
    "ReproduceResult",
    "TrainResult",
    "reproduce",
    "train",
]

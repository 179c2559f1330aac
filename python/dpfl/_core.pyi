"""Type stubs of the Rust extension ``dpfl._core`` (use the wrappers in ``dpfl``)."""

from typing import Callable, Optional, Tuple

__version__: str

class DpflError(Exception): ...
class ConfigError(DpflError): ...
class RunError(DpflError): ...

def account_event(
    event: str, delta: float, accountant: str = "pld", neighbouring: Optional[str] = None
) -> str: ...
def account_release(
    noise_multiplier: float,
    delta: float,
    mechanism: str = "gaussian",
    sampling: Optional[str] = None,
    rate: Optional[float] = None,
    steps: int = 1,
    neighbouring: Optional[str] = None,
    dataset_size: Optional[int] = None,
    accountant: str = "rdp",
) -> str: ...
def calibrate_release(
    epsilon: float,
    delta: float,
    mechanism: str = "gaussian",
    sampling: Optional[str] = None,
    rate: Optional[float] = None,
    steps: int = 1,
    neighbouring: Optional[str] = None,
    dataset_size: Optional[int] = None,
    accountant: str = "rdp",
) -> str: ...
def calibrate_event(
    make_event: Callable[[float], str],
    epsilon: float,
    delta: float,
    accountant: str = "rdp",
    neighbouring: Optional[str] = None,
) -> Tuple[float, float]: ...
def analytic_gaussian(epsilon: float, delta: float) -> float: ...

class GaussianMechanism:
    def __init__(
        self,
        sigma: float,
        sensitivity: float,
        seed: Optional[int] = None,
        stream: int = 0,
        granularity: Optional[float] = None,
        dim: Optional[int] = None,
    ) -> None: ...
    def privatize(self, data: bytes) -> bytes: ...
    def event(self) -> str: ...
    @property
    def sigma(self) -> float: ...
    @property
    def sensitivity(self) -> float: ...
    @property
    def noise_multiplier(self) -> float: ...
    @property
    def granularity(self) -> Optional[float]: ...

class TruncatedDiscreteLaplace:
    def __init__(self, m: int, alpha: float, seed: Optional[int] = None, stream: int = 0) -> None: ...
    def sample(self, n: int) -> bytes: ...
    def pmf(self, y: int) -> float: ...
    def variance(self) -> float: ...
    @property
    def m(self) -> int: ...
    @property
    def alpha(self) -> float: ...
    @property
    def normaliser(self) -> float: ...

class StochasticQuantizer:
    def __init__(self, s: int, seed: Optional[int] = None, stream: int = 0) -> None: ...
    def quantize(self, data: bytes) -> bytes: ...
    @property
    def s(self) -> int: ...
    def variance_bound(self) -> float: ...

def qtdl_theorem1(epsilon: float, delta_1: float, delta_inf: float, d: int) -> Tuple[int, float, float]: ...
def train(
    config: Optional[str] = None,
    format: str = "toml",
    path: Optional[str] = None,
    seed: Optional[int] = None,
    data_dir: Optional[str] = None,
    out: Optional[str] = None,
    progress: Optional[Callable[[int, int], None]] = None,
) -> str: ...
def reproduce(
    id: str,
    quick: bool = False,
    trials: Optional[int] = None,
    data_dir: Optional[str] = None,
    out: Optional[str] = None,
    progress: Optional[Callable[[int, int], None]] = None,
) -> str: ...

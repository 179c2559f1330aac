"""``dpfl.train``: run an experiment (the ``dpfl train`` TOML, as a file or a dict) in-process."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Union

from . import _core
from ._checks import opt_uint

Config = Union[Dict[str, Any], str, "os.PathLike[str]", None]


@dataclass
class TrainResult:
    """``rounds``: one dict per evaluated round (trial, round, algorithm, train_loss,
    test_metric), as ``rounds.csv``; ``summary``: one dict per algorithm, as ``summary.json``
    (ε, δ, σ, the accountants' ε and the lower bound per silo under ``privacy``). Both are
    lists of dicts, so ``pandas.DataFrame(result.rounds)`` loads them."""

    rounds: List[Dict[str, Any]]
    summary: List[Dict[str, Any]]

    def rounds_frame(self) -> Any:
        """``rounds`` as a pandas DataFrame (needs pandas)."""
        import pandas as pd

        return pd.DataFrame(self.rounds)

    def summary_frame(self) -> Any:
        """``summary`` as a pandas DataFrame (needs pandas); nested per-silo lists stay lists."""
        import pandas as pd

        return pd.DataFrame(self.summary)


def _progress_bar(enabled: bool, unit: str = "rounds") -> Optional[Callable[[int, int], None]]:
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm  # notebooks get a widget, terminals a bar
    except ImportError:
        tqdm = None
    state: Dict[str, Any] = {}

    def report(done: int, total: int) -> None:
        if tqdm is not None:
            bar = state.get("bar")
            if bar is None:
                bar = state["bar"] = tqdm(total=total, unit=unit)
            bar.update(done - bar.n)
            if done >= total:
                bar.close()
        else:
            step = max(total // 20, 1)
            if done % step == 0 or done == total:
                print(f"\r{done}/{total} {unit}", end="" if done < total else "\n", file=sys.stderr)

    return report


def train(
    config: Config = None,
    *,
    seed: Optional[int] = None,
    data_dir: "Optional[str | os.PathLike[str]]" = None,
    out: "Optional[str | os.PathLike[str]]" = None,
    progress: bool = True,
) -> TrainResult:
    """Runs an experiment as ``dpfl train`` does and returns its results.

    ``config``: a path to an experiment TOML file (relative data paths are relative to it),
    a dict of the same fields (as ``tomllib.load`` would give; relative paths are relative
    to the working directory), or ``None`` for the bundled obesity demo. ``seed`` overrides the
    experiment's seed; ``data_dir`` holds the larger data sets (else ``$DPFL_DATA``); ``out``
    also writes ``rounds.csv`` and ``summary.json`` there. ``progress`` shows a bar (tqdm if
    installed). Raises ``ConfigError`` / ``RunError`` with the CLI's one-line messages.
    """
    seed = opt_uint("seed", seed)
    cb = _progress_bar(progress)
    dd = os.fspath(data_dir) if data_dir is not None else None
    od = os.fspath(out) if out is not None else None
    if config is None:
        text = _core.train(None, "toml", None, seed, dd, od, cb)
    elif isinstance(config, dict):
        text = _core.train(json.dumps(config), "json", None, seed, dd, od, cb)
    else:
        text = _core.train(None, "file", os.fspath(config), seed, dd, od, cb)
    out_ = json.loads(text)
    return TrainResult(rounds=out_["rounds"], summary=out_["summary"])


@dataclass
class ReproduceResult:
    """``rows``: one dict per row of ``summary.csv`` (figure, algorithm, M, epsilon, metric,
    mean, ci_low, ci_high, trials); ``pandas.DataFrame(result.rows)`` loads them."""

    rows: List[Dict[str, Any]]
    wall_seconds: float
    runs: int

    def frame(self) -> Any:
        """``rows`` as a pandas DataFrame (needs pandas)."""
        import pandas as pd

        return pd.DataFrame(self.rows)


def reproduce(
    id: str,
    *,
    quick: bool = False,
    trials: Optional[int] = None,
    data_dir: "Optional[str | os.PathLike[str]]" = None,
    out: "Optional[str | os.PathLike[str]]" = None,
    progress: bool = True,
) -> ReproduceResult:
    """A paper reproduction as ``dpfl reproduce ID`` runs it (``lowy-obesity``,
    ``lowy-insurance``, ``lowy-mnist``): ``quick`` the reduced run, ``trials`` fewer trials,
    ``out`` also writes ``summary.csv`` and the figures. No checkpoint/resume (use the CLI)."""
    trials = opt_uint("trials", trials)
    cb = _progress_bar(progress, unit="runs")
    dd = os.fspath(data_dir) if data_dir is not None else None
    od = os.fspath(out) if out is not None else None
    res = json.loads(_core.reproduce(id, quick, trials, dd, od, cb))
    return ReproduceResult(rows=res["rows"], wall_seconds=res["wall_seconds"], runs=res["runs"])

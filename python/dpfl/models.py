"""Saved models and your own data.

``dpfl train --out DIR`` (and ``dpfl.train(..., out=DIR)``) saves each algorithm's final model
in ``DIR/models/<k>-<label>/`` as ``model.safetensors`` (one F64 tensor ``weights``) and
``model.json`` (format ``dpfl-model`` version 1: model kind, feature names, classes, the fitted
preprocessing, the run's privacy guarantee, the SHA-256 of the weights file).
:func:`load_model` reads one, checking format, version and checksum, as ``dpfl predict`` does.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

import numpy as np

from . import _core

PathLike = "str | os.PathLike[str]"


@dataclass
class SavedModel:
    """A model ``dpfl train`` saved. ``weights``: the flat parameter vector (float64);
    ``meta``: ``model.json`` as a dict."""

    path: str
    meta: Dict[str, Any]
    weights: np.ndarray

    @property
    def classes(self) -> Optional[List[str]]:
        return self.meta.get("classes")

    @property
    def feature_names(self) -> List[str]:
        return list(self.meta["feature_names"])

    @property
    def certified_epsilon(self) -> Optional[float]:
        """The accountants' ε for the run that trained the model (largest over silos)."""
        return self.meta["privacy"].get("certified_epsilon")

    @property
    def input_format(self) -> str:
        """The source kind the model was trained on (``csv``, ``libsvm``, ``mnist``, ``idx``,
        ``synthetic``, ...): :meth:`predict` reads files of that source's format."""
        return str(self.meta["preprocessing"]["source"])

    def predict(self, data: PathLike) -> np.ndarray:
        """One prediction per record of ``data`` (class names as str, or float values),
        exactly as ``dpfl predict`` writes them. ``data`` has the training data's format: a
        CSV with the training columns, a LIBSVM file, an IDX image file, or (synthetic data)
        a CSV with one column per feature name."""
        preds = _core.predict_file(self.path, os.fspath(data))
        if self.classes is not None:
            return np.array(preds, dtype=object)
        return np.array([float(p) for p in preds], dtype="f8")

    def evaluate(self, data: PathLike, labels: Optional[PathLike] = None) -> Dict[str, Any]:
        """The test metric on a labelled file, as ``dpfl evaluate`` prints it (``labels``: the
        IDX label file, for models trained on images)."""
        lab = os.fspath(labels) if labels is not None else None
        value, metric, rows = _core.evaluate_file(self.path, os.fspath(data), lab)
        return {"metric": metric, "value": value, "rows": rows}


def load_model(path: PathLike) -> SavedModel:
    """Reads a saved model directory (raises ``RunError`` naming the file if it is damaged)."""
    p = os.fspath(path)
    meta, raw = _core.load_model(p)
    meta = json.loads(meta)
    if not isinstance(meta, dict):
        # The core checked the file; this guards the dict accesses of SavedModel.
        raise _core.RunError(f"{p}: model.json is not a JSON object")
    return SavedModel(path=p, meta=meta, weights=np.frombuffer(bytes(raw), dtype="<f8").copy())


def init(data: PathLike, label: str, silo_column: Optional[str] = None) -> str:
    """The experiment TOML ``dpfl init --data DATA --label LABEL [--silo-column C]`` writes:
    private defaults (ε = 1, δ = 1/n², a public clip bound, accountant calibration), silos
    from ``silo_column``."""
    return _core.init_experiment(os.fspath(data), label, silo_column)


def check_config(path: PathLike, data_dir: Optional[PathLike] = None) -> str:
    """``dpfl config check``: validates an experiment file (fields, data, model,
    calibration) without training; returns the report or raises ``ConfigError``/``RunError``."""
    dd = os.fspath(data_dir) if data_dir is not None else None
    return _core.check_config(os.fspath(path), dd)

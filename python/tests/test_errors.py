"""Issue 31: every failure of the package is a ``dpfl.DpflError`` subclass. Integers out of
the Rust types' range (negative seeds, 2^64, a 2^32 stream) raised Python's
``OverflowError``; a JSON list or ``null`` where an object belongs raised
``AttributeError``."""

import pytest

import dpfl
from dpfl import events as ev
from dpfl._core import Ledger

CASES = {
    "negative seed": lambda: dpfl.GaussianMechanism(1.0, seed=-1),
    "seed 2^64": lambda: dpfl.GaussianMechanism(1.0, seed=2**64),
    "stream 2^32": lambda: dpfl.GaussianMechanism(1.0, stream=2**32),
    "discrete dim -1": lambda: dpfl.DiscreteGaussianMechanism(1.0, 1.0, 0.1, -1),
    "tdl m 2^64": lambda: dpfl.TruncatedDiscreteLaplace(2**64, 0.5),
    "tdl pmf 2^63": lambda: dpfl.TruncatedDiscreteLaplace(5, 0.5, seed=1).pmf(2**63),
    "tdl size -1": lambda: dpfl.TruncatedDiscreteLaplace(5, 0.5, seed=1).sample(-1),
    "quantizer s -1": lambda: dpfl.StochasticQuantizer(-1),
    "calibrate steps -1": lambda: dpfl.calibrate(1.0, 1e-5, steps=-1),
    "account steps 2^64": lambda: dpfl.account_release(1.0, 1e-5, steps=2**64),
    "dataset size -5": lambda: dpfl.account_release(
        1.0, 1e-5, sampling="with-replacement", rate=0.1, dataset_size=-5
    ),
    "count 2^70": lambda: dpfl.account(ev.SelfComposedDpEvent(ev.GaussianDpEvent(1.0), 2**70), 1e-5),
    "theorem 1 d -1": lambda: dpfl.qtdl_theorem1(1.0, 1.0, 1.0, -1),
    "train seed -1": lambda: dpfl.train(seed=-1, progress=False),
    "reproduce trials 2^64": lambda: dpfl.reproduce("lowy-obesity", trials=2**64, progress=False),
    "event []": lambda: ev.from_dict([]),
    "event null": lambda: ev.from_dict(None),
}


@pytest.mark.parametrize("what", sorted(CASES))
def test_bad_integers_and_json_shapes_are_dpfl_errors(what):
    with pytest.raises(dpfl.DpflError) as e:
        CASES[what]()
    assert not isinstance(e.value, (OverflowError, AttributeError)), what
    assert "\n" not in str(e.value), what


@pytest.mark.parametrize("text", ["[]", "null"])
def test_a_ledger_file_holding_a_list_or_null_is_a_ledger_error(tmp_path, text):
    path = tmp_path / "silo.ledger.json"
    path.write_text(text)
    with pytest.raises(dpfl.LedgerError, match="silo.ledger.json"):
        Ledger(str(path), 1.0, 1e-5)
    assert path.read_text() == text

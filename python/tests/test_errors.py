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


# --- every config mistake is a ConfigError naming what is wrong (issue 29 item 6) -----------

import pathlib  # noqa: E402

import numpy as np  # noqa: E402

from dpfl import halves as h  # noqa: E402

HERE = pathlib.Path(__file__).parent
ALG = {"kind": "mb-sgd", "step_size": 0.5, "batch_size": 5, "calibration": "accountant"}


def _build(**kw):
    args = dict(dim=3, records=[30, 30], epsilon=2.0, delta=1e-5, clip=1.0, rounds=2, seed=1)
    args.update(kw)
    return h.Plan.build(kw.pop("algorithm", ALG), **{k: v for k, v in args.items() if k != "algorithm"})


def _grads(idx, w):
    return np.zeros((len(idx), 3))


def _data_plan():
    return h.Plan.from_experiment(HERE / "halves_fixed.toml", 0)


def _bad_toml(tmp):
    p = tmp / "bad.toml"
    p.write_text("rounds = [\n")
    return h.Plan.from_experiment(p)


def _unknown_field(tmp):
    p = tmp / "unknown.toml"
    p.write_text((HERE / "halves_fixed.toml").read_text().replace("rounds = 6", "rounds = 6\nroundz = 7"))
    return h.Plan.from_experiment(p)


def _flower_context(node, run):
    from flwr.app import Context, RecordDict

    return Context(run_id=1, node_id=7, node_config=node, state=RecordDict(), run_config=run)


def _silo_step(node, run):
    pytest.importorskip("flwr")
    from flwr.app import ConfigRecord, Message, MessageType, RecordDict
    from flwr.supercore.task_identity import TaskIdentity

    from dpfl.flower import apps

    TaskIdentity.run_id, TaskIdentity.task_id, TaskIdentity.node_id = 1, 1, 0
    exp = str(HERE / "flower.toml")
    run = {"dpfl-experiment": exp, "dpfl-algorithm": 0, **run}
    _, digest = apps.plan_of(run) if "dpfl-experiment" in run and run["dpfl-experiment"] else (None, "0" * 64)
    msg = Message(RecordDict({"dpfl": ConfigRecord({"plan": digest, "silo": 0, "round": 0, "answered": False}),
                              "dpfl-bytes": apps._bytes_record(b"x")}), dst_node_id=7, message_type=MessageType.TRAIN)
    return apps.silo_step(msg, _flower_context(node, run), lambda s, c: None)


def _client(**kw):
    pytest.importorskip("flwr")
    from dpfl.flower import DpflClient

    args = dict(epsilon=1.0, delta=1e-5, rounds=2, update_clip=1.0)
    args.update(kw)
    return DpflClient(object(), **args)


# (what, the call given a tmp directory, the field the message names)
MISTAKES = [
    ("bad TOML", _bad_toml, "bad.toml"),
    ("unknown field", _unknown_field, "roundz"),
    ("missing experiment", lambda t: h.Plan.from_experiment(t / "nope.toml"), "nope.toml"),
    ("algorithm index", lambda t: h.Plan.from_experiment(HERE / "halves_fixed.toml", 7), "algorithm"),
    ("negative algorithm index", lambda t: h.Plan.from_experiment(HERE / "halves_fixed.toml", -1), "algorithm"),
    ("plan json", lambda t: h.Plan.from_json("{}"), "plan"),
    ("unknown algorithm kind", lambda t: _build(algorithm={"kind": "nope"}), "algorithm"),
    ("algorithm not JSON", lambda t: _build(algorithm={"kind": object()}), "algorithm"),
    ("bad participation", lambda t: _build(participation={"kind": "fixed", "m": "three"}), "participation"),
    ("negative dim", lambda t: _build(dim=-1), "dim"),
    ("negative records", lambda t: _build(records=[30, -1]), "records[1]"),
    ("rounds 2^64", lambda t: _build(rounds=2**64), "rounds"),
    ("epsilon per silo", lambda t: _build(epsilon=[1.0, 2.0, 3.0]), "epsilon"),
    ("silo index", lambda t: h.SiloHalf(_build(), 2, gradients=_grads), "silo"),
    ("negative silo", lambda t: h.SiloHalf(_build(), -1, gradients=_grads), "silo"),
    ("data shape", lambda t: h.SiloHalf(_data_plan(), 0, data=(np.zeros((3, 2)), np.zeros(3))), "data"),
    ("data not a pair", lambda t: h.SiloHalf(_data_plan(), 0, data=np.zeros(3)), "data"),
    ("data for own model", lambda t: h.SiloHalf(_build(), 0, data=(np.zeros((30, 3)), np.zeros(30))), "gradients"),
    ("ledger path a directory", lambda t: h.SiloHalf(_build(), 0, gradients=_grads, ledger_path=str(t)), "ledger_path"),
    ("ledger path without its directory",
     lambda t: h.SiloHalf(_build(), 0, gradients=_grads, ledger_path=str(t / "no" / "l.json")), "ledger_path"),
    ("Ledger path a directory", lambda t: Ledger(str(t), 1.0, 1e-5), "path"),
    ("data ledger without plan_id",
     lambda t: h.SiloHalf(_build(), 0, gradients=_grads, data_ledger=str(t / "d.json")), "data_ledger"),
    ("budget", lambda t: h.SiloHalf(_build(), 0, gradients=_grads, budget=(-1.0, 1e-5)), "budget"),
    ("bad state", lambda t: h.SiloHalf(_build(), 0, gradients=_grads, state=b"dpflS\x01junk"), "state"),
    ("state of something else", lambda t: h.ServerHalf(_build(), state=b"hello"), "state"),
    ("seed string", lambda t: h.SiloHalf(_build(), 0, gradients=_grads, seed="abc"), "seed"),
    ("negative round", lambda t: h.ServerHalf(_build(), seed="plan").broadcast(-1), "round"),
    ("round out of order", lambda t: h.ServerHalf(_build(), seed="plan").broadcast(1), "round"),
    ("silos for simulate", lambda t: h.simulate(_build(), []), "silos"),
    ("client two modes", lambda t: _client(sensitivity=1.0), "update_clip"),
    ("client clip", lambda t: _client(update_clip=-1.0), "update_clip"),
    ("client rounds", lambda t: _client(rounds=0), "rounds"),
    ("client batch", lambda t: _client(update_clip=None, example_clip=1.0, batch_size=50, records=10), "batch_size"),
    ("flower: no plan", lambda t: _silo_step({"silo": 0}, {"dpfl-experiment": ""}), "plan"),
    ("flower: no silo", lambda t: _silo_step({}, {}), "silo"),
    ("flower: bad silo", lambda t: _silo_step({"silo": "first"}, {}), "silo"),
    ("flower: bad seed", lambda t: _silo_step({"silo": 0, "dpfl-ledger-dir": str(t)}, {"dpfl-seed": "abc"}),
     "dpfl-seed"),
    ("flower: bad data name", lambda t: _silo_step({"silo": 0, "dpfl-ledger-dir": str(t), "dpfl-data": "../x"}, {}),
     "dpfl-data"),
    ("flower: bad budget", lambda t: _silo_step({"silo": 0, "dpfl-ledger-dir": str(t), "dpfl-epsilon": "one",
                                                 "dpfl-delta": 1e-5}, {}), "dpfl-epsilon"),
]


@pytest.mark.parametrize("what,call,field", MISTAKES, ids=[m[0] for m in MISTAKES])
def test_every_config_mistake_is_a_config_error_naming_it(tmp_path, what, call, field):
    with pytest.raises(dpfl.ConfigError) as e:
        call(tmp_path)
    assert field in str(e.value), (what, str(e.value))
    assert "\n" not in str(e.value), what
    assert list(tmp_path.iterdir()) == [] or what.startswith(("ledger", "Ledger", "flower", "bad TOML", "unknown")), \
        list(tmp_path.iterdir())  # nothing written by a refused call

"""Killed mid-run, for real (issue 29 item 4): a SuperLink and three SuperNodes on 127.0.0.1,
started and killed by PID (flower_harness.py). The test's ClientApp is ``dpfl.flower.apps``'
``silo_step`` with a hook that, at one point of one round on one silo (node config ``pause``),
writes a marker file and waits; the test then kills that SuperNode (and its ClientApp process)
by PID and starts it again without the hook. The ServerApp has the same kind of hook after it
saved its state for a round (run config ``test-pause-after``); the test kills the
``flwr-serverapp`` process the SuperLink started, found among the SuperLink's descendants.

What is safe (decided here, ``dpfl.flower.apps`` module docs): a silo never releases two
different noisy answers for one round. Its state (with the reply's bytes) is on disk before the
reply leaves, so

* killed after that write and before the reply left: the round asked again gets the stored
  bytes; the run goes on and equals ``dpfl train`` bit for bit;
* killed after the ledgers charged the round and before the write: the silo cannot know
  whether a reply left, so restarted it refuses the round (its state is older than its
  ledger) and the run fails visibly; its ledgers keep the charge;
* the ServerApp killed mid-run: Flower fails the run ("No heartbeat received from the
  task") and no model is written; running the plan again without the server's state is
  refused at round 0 by every silo, with it the run continues after the last round saved and
  equals ``dpfl train``.

And a silo's budget holds across plans (one ledger per data set): a second plan whose first
round would take the composition past the silo's own budget is refused and its run fails."""

import hashlib
import json
import os
import pathlib
import signal
import time

import numpy as np
import pytest

pytest.importorskip("flwr")

import dpfl  # noqa: E402
import dpfl.halves  # noqa: E402
from flower_harness import Flower, _descendants, train_once, write_app  # noqa: E402

EXP = pathlib.Path(__file__).parent / "flower.toml"
ALG, SAVED = 1, "2-soteriafl-sgd"  # SoteriaFL-SGD: its silos keep a shift besides the stream

SERVER = """
import os, pathlib, time
from dpfl.flower import apps

# Test hook: after the server's state for round `test-pause-after` - 1 is on disk, write the
# marker and wait to be killed.
_write, _saved = apps._write_atomic, []

def _hooked(path, data):
    _write(path, data)
    rc = CONFIG.get("rc", {})
    if str(path) == str(rc.get("dpfl-server-state")):
        _saved.append(path)
        if len(_saved) == int(rc.get("test-pause-after", -1)):
            pathlib.Path(str(rc["test-marker"])).write_text("server")
            time.sleep(3600)

apps._write_atomic = _hooked
CONFIG = {}
from flwr.serverapp import ServerApp
app = ServerApp()

@app.main()
def main(grid, context):
    CONFIG["rc"] = context.run_config
    apps.run_server(grid, context)
"""

CLIENT = """
import functools, pathlib, time
from dpfl import halves
from dpfl.flower import apps
from flwr.clientapp import ClientApp

@functools.lru_cache(maxsize=None)
def silos(path):
    return halves.experiment_data(path)

def load(silo, context):
    return silos(str(context.run_config["dpfl-experiment"]))[silo]

# Test hook: node config `pause = "<round>:<where>"` and `marker = <file>`: at that point of
# that round, write the marker and wait to be killed.
NOW = {}

def _pause(where):
    msg, context = NOW.get("msg"), NOW.get("context")
    if msg is None:
        return
    nc = context.node_config
    if str(nc.get("pause", "")) == f"{msg.content.config_records['dpfl']['round']}:{where}":
        pathlib.Path(str(nc["marker"])).write_text(where)
        time.sleep(3600)

_write = apps._write_atomic

def _hooked(path, data):
    if path.suffix == ".state":
        _pause("before-state")  # the ledgers charged the round, its reply is computed
    _write(path, data)

apps._write_atomic = _hooked
app = ClientApp()

@app.train()
def train(msg, context):
    NOW.update(msg=msg, context=context)
    reply = apps.silo_step(msg, context, load)
    _pause("after-state")  # the state (with the reply's bytes) is on disk; the reply has not left
    return reply

@app.query()
def query(msg, context):
    return apps.silo_step(msg, context, load)
"""


def _app(root):
    return write_app(root, "dpflkilledapp", server=SERVER, client=CLIENT, config={
        "dpfl-experiment": str(EXP), "dpfl-algorithm": ALG, "dpfl-seed": "plan", "dpfl-out": "",
        "dpfl-server-state": "", "dpfl-stop-after": 1000, "dpfl-timeout": 300,
        "test-pause-after": -1, "test-marker": ""})


@pytest.fixture(scope="module")
def trained(cli, tmp_path_factory):
    return train_once(cli, tmp_path_factory, EXP)


def _wait(path, what, f, timeout=240):
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: no marker in {timeout} s\n" + f.log("superlink")[-3000:])
        time.sleep(0.5)


def _start(f, tmp, silo, **extra):
    cfg = " ".join([f"silo={silo}", f"dpfl-ledger-dir='{tmp / f'ledgers-{silo}'}'"]
                   + [f"{k}='{v}'" for k, v in extra.items()])
    f.supernode(f"node-{silo}", cfg)


def _digest():
    return hashlib.sha256(dpfl.halves.Plan.from_experiment(EXP, ALG).to_json().encode()).hexdigest()


def _ledger_rounds(tmp, digest, silo):
    ledger = json.loads((tmp / f"ledgers-{silo}" / digest[:16] / f"silo-{silo}.ledger.json").read_text())
    data = json.loads((tmp / f"ledgers-{silo}" / f"silo-{silo}.ledger.json").read_text())
    return [r["release"] for r in ledger["releases"]], [r["release"] for r in data["releases"]]


def _equals_train(trained, out):
    model = np.load(out / "model.npy")
    want = dpfl.load_model(trained / "models" / SAVED).weights
    assert np.array_equal(model.view(np.uint64), want.view(np.uint64)), np.abs(model - want).max()
    privacy = json.loads((trained / "summary.json").read_text())[ALG]["privacy"]
    last = {}
    for r in json.loads((out / "summary.json").read_text())["rounds"]:
        last.update(r["silos"])
    for s, p in enumerate(privacy):
        assert last[str(s)]["dpfl_plan_pld_epsilon"] == p["pld_epsilon"]


@pytest.mark.slow
@pytest.mark.parametrize("where", ["after-state", "before-state"])
def test_a_supernode_killed_mid_round_never_answers_a_round_twice(trained, tmp_path, where):
    with Flower(tmp_path) as f:
        f.superlink()
        marker = tmp_path / "marker"
        for s in range(3):
            _start(f, tmp_path, s, **({"pause": f"2:{where}", "marker": marker} if s == 1 else {}))
        app = _app(tmp_path)
        out, state = tmp_path / "out", tmp_path / "server.state"
        rc = f"dpfl-out='{out}' dpfl-server-state='{state}'"
        # Round 2 reaches silo 1, which stops at `where`; it is killed there and comes back (a
        # new process and Flower node, no context.state, its files on disk).
        run = f.start(app, run_config=rc + " dpfl-timeout=60")
        _wait(marker, "silo 1 at round 2", f)
        f.kill("node-1")
        _start(f, tmp_path, 1)
        first = f.wait(run, timeout=400)
        # The server waited for round 2's reply in vain: that run fails, visibly.
        assert first["status"] == "finished:failed", (first["status-details"], first["log"][-3000:])
        assert "round 2" in first["status-details"] + first["log"]
        digest = _digest()
        plan_rounds, data_rounds = _ledger_rounds(tmp_path, digest, 1)
        assert plan_rounds == [0, 1, 2] and data_rounds == [0, 1, 2]  # charged before it stopped
        # The run again from the server's state (after round 1).
        second = f.run(app, run_config=rc, timeout=400)
        plan_rounds, data_rounds = _ledger_rounds(tmp_path, digest, 1)
        if where == "after-state":
            # Round 2's stored bytes, then round 3: the model of a run never interrupted.
            assert second["status"] == "finished:completed", (second["status-details"], second["log"][-3000:])
            _equals_train(trained, out)
            assert plan_rounds == [0, 1, 2, 3] and data_rounds == [0, 1, 2, 3]
        else:
            # The reply of round 2 may have left for all the silo knows: refused, the run fails,
            # the charge stays and no other round is charged.
            assert second["status"] == "finished:failed", (second["status-details"], second["log"][-3000:])
            assert "older than the ledger" in second["status-details"] + second["log"], second["log"][-3000:]
            assert plan_rounds == [0, 1, 2] and data_rounds == [0, 1, 2]
            assert not (out / "model.npy").exists()


def _serverapp_pids(f):
    out = []
    for pid in _descendants(f.procs["superlink"].pid):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        except OSError:
            continue
        if any(c.endswith(b"flwr-serverapp") for c in cmd[:2]):
            out.append(pid)
    return out


@pytest.mark.slow
def test_a_serverapp_killed_mid_run_fails_the_run_and_resets_no_ledger(trained, tmp_path):
    with Flower(tmp_path) as f:
        f.superlink()
        for s in range(3):
            _start(f, tmp_path, s)
        app = _app(tmp_path)
        out, state, marker = tmp_path / "out", tmp_path / "server.state", tmp_path / "marker"
        rc = f"dpfl-out='{out}' dpfl-server-state='{state}'"
        run = f.start(app, run_config=rc + f" test-pause-after=2 test-marker='{marker}'")
        _wait(marker, "the ServerApp after round 1", f)
        pids = _serverapp_pids(f)
        assert pids, "no flwr-serverapp process under the SuperLink"
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        first = f.wait(run, timeout=400)
        # Flower's SuperLink stops hearing the ServerApp and fails the run (about a minute here).
        assert first["status"] == "finished:failed", first
        assert "heartbeat" in str(first["status-details"]), first["status-details"]
        assert not (out / "model.npy").exists()
        digest = _digest()
        for s in range(3):
            assert _ledger_rounds(tmp_path, digest, s) == ([0, 1], [0, 1])
        # The plan again without the server's state: round 0 was answered; every silo refuses.
        again = f.run(app, run_config=f"dpfl-out='{tmp_path / 'again'}'", timeout=400)
        assert again["status"] == "finished:failed", (again["status-details"], again["log"][-3000:])
        assert "round 0" in again["status-details"] + again["log"]
        for s in range(3):
            assert _ledger_rounds(tmp_path, digest, s) == ([0, 1], [0, 1])  # nothing reset, nothing new
        # With the server's state (saved after round 1): rounds 2 and 3, equal to dpfl train.
        second = f.run(app, run_config=rc, timeout=400)
        assert second["status"] == "finished:completed", (second["status-details"], second["log"][-3000:])
        _equals_train(trained, out)
        for s in range(3):
            assert _ledger_rounds(tmp_path, digest, s) == ([0, 1, 2, 3], [0, 1, 2, 3])


@pytest.mark.slow
def test_a_second_plan_past_the_silos_budget_fails_the_run(tmp_path):
    with Flower(tmp_path) as f:
        f.superlink()
        # Each silo's own budget, across every plan on its data: MB-SGD (ε 2.0 by PLD) fits;
        # DP-NormFedAvg's first round (a (0.5, 1e-7) release) would take it to ≈ 2.36.
        for s in range(3):
            _start(f, tmp_path, s, **{"dpfl-epsilon": 2.2, "dpfl-delta": 1e-5})
        app = _app(tmp_path)
        first = f.run(app, run_config=f"dpfl-algorithm=0 dpfl-out='{tmp_path / 'a'}'", timeout=400)
        assert first["status"] == "finished:completed", (first["status-details"], first["log"][-3000:])
        data = [(tmp_path / f"ledgers-{s}" / f"silo-{s}.ledger.json").read_bytes() for s in range(3)]
        second = f.run(app, run_config=f"dpfl-algorithm=2 dpfl-out='{tmp_path / 'b'}'", timeout=400)
        assert second["status"] == "finished:failed", (second["status-details"], second["log"][-3000:])
        assert "over the budget epsilon 2.2" in second["status-details"] + second["log"], second["log"][-3000:]
        # Refused before anything was released: the data sets' ledgers are as the first plan left them.
        assert [(tmp_path / f"ledgers-{s}" / f"silo-{s}.ledger.json").read_bytes() for s in range(3)] == data

"""dpfl's halves on Flower (issue 29 item 4): the silo half in real SuperNodes, the server half
in a real ServerApp, for MB-SGD, SoteriaFL-SGD, DP-NormFedAvg and a shuffle-model algorithm
(SDP MB-SGD), in a real simulation (``flwr run`` on a ``--simulation`` SuperLink, Ray
backend) and a real deployment (a SuperLink and three SuperNodes on 127.0.0.1). A seeded run
equals ``dpfl train`` bit for bit and every silo's ledger ε equals train's (and ``dpfl
account``'s); a SuperNode killed and restarted mid-plan continues its ledger and its stream."""

import json
import pathlib

import numpy as np
import pytest

pytest.importorskip("flwr")
pytest.importorskip("ray")

import dpfl  # noqa: E402
from flower_harness import Flower, train_once, write_app  # noqa: E402

halves = pytest.importorskip("dpfl.halves")

EXP = pathlib.Path(__file__).parent / "flower.toml"
# (algorithm index in flower.toml, dpfl train's saved model)
CASES = [(0, "1-isrl-dp-mb-sgd"), (1, "2-soteriafl-sgd"), (2, "3-dp-normfedavg"), (3, "4-sdp-mb-sgd")]
IDS = [c[1] for c in CASES]

SERVER = """
from dpfl.flower.apps import server_app

app = server_app()
"""

# What a user writes: one function giving a silo its data (here: the experiment's split, as
# `dpfl train` draws it), and the app.
CLIENT = """
import functools
from dpfl import halves
from dpfl.flower.apps import silo_app

@functools.lru_cache(maxsize=None)
def silos(path):
    return halves.experiment_data(path)

app = silo_app(lambda silo, context: silos(str(context.run_config["dpfl-experiment"]))[silo])
"""


def _app(root):
    return write_app(root, "dpflhalvesapp", server=SERVER, client=CLIENT, config={
        "dpfl-experiment": str(EXP), "dpfl-algorithm": 0, "dpfl-seed": "plan", "dpfl-out": "",
        "dpfl-server-state": "", "dpfl-stop-after": 1000, "dpfl-timeout": 300})


@pytest.fixture(scope="module")
def trained(cli, tmp_path_factory):
    return train_once(cli, tmp_path_factory, EXP)


def _check_equals_train(trained, out, alg, saved, cli):
    model = np.load(out / "model.npy")
    want = dpfl.load_model(trained / "models" / saved).weights
    assert model.shape == want.shape and np.any(model != 0)
    assert np.array_equal(model.view(np.uint64), want.view(np.uint64)), np.abs(model - want).max()
    summary = json.loads((out / "summary.json").read_text())
    privacy = json.loads((trained / "summary.json").read_text())[alg]["privacy"]
    last = {}
    for r in summary["rounds"]:
        last.update(r["silos"])
        for key in ("dpfl_epsilon", "dpfl_plan_epsilon"):
            assert r[key] == max(m[key] for m in r["silos"].values())  # a max, not a mean
    plan = halves.Plan.from_experiment(EXP, alg)
    for s, p in enumerate(privacy):
        m = last[str(s)]
        # Each silo's ledger certifies for this plan what train's summary reports for it,
        # accountant by accountant, and its ε is the tighter of the two (every algorithm of
        # flower.toml is certified, DP-NormFedAvg by PLD).
        assert m.get("dpfl_plan_rdp_epsilon") == p["rdp_epsilon"] and m["dpfl_plan_pld_epsilon"] == p["pld_epsilon"], (s, m, p)
        certified = [e for e in (p["rdp_epsilon"], p["pld_epsilon"]) if e is not None]
        assert m["dpfl_plan_epsilon"] == min(certified)
        # Over its data set (every plan these SuperNodes ran on it): at least the plan's.
        assert m["dpfl_epsilon"] >= m["dpfl_plan_epsilon"]
        if p["rdp_epsilon"] is None:
            continue
        # ... the RDP figure being the accountant's on the plan's run event for the silo.
        c = plan.calibration[s]
        event = dpfl.events.from_dict(json.loads(c["run_event"]))
        assert p["rdp_epsilon"] == pytest.approx(dpfl.account(event, c["delta"], "rdp", "replace-one").epsilon, rel=1e-12)
        args = _account_args(json.loads(c["run_event"]))
        if args is not None:  # the CLI's flags cover this event's shape: ask `dpfl account` itself
            got = cli.json("account", *args, "--delta", repr(c["delta"]), "--accountant", "rdp")
            assert m["dpfl_plan_rdp_epsilon"] == got["rdp_epsilon"]
    return summary


def _account_args(e):
    """`dpfl account` flags for R rounds of a K-of-n sampled Gaussian (MB-SGD's run event)."""
    if e["kind"] != "self-composed" or e["event"]["kind"] != "sampled":
        return None
    inner, sampling = e["event"]["event"], e["event"]["sampling"]
    if inner["kind"] != "gaussian" or sampling["kind"] != "with-replacement":
        return None
    n, k = sampling["population"], sampling["draws"]
    return ["--noise-multiplier", repr(inner["noise_multiplier"]), "--sampling", "with-replacement",
            "--rate", repr(k / n), "--dataset-size", str(n), "--steps", str(e["count"])]


@pytest.fixture(scope="module")
def simulation(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("flower-sim")
    with Flower(tmp) as f:
        f.env["DPFL_LEDGER_DIR"] = str(tmp / "ledgers")
        f.superlink(simulation=True)
        yield f, _app(tmp)


@pytest.mark.slow  # 31–74 s a case here (2 cores, loaded)
@pytest.mark.parametrize("alg,saved", CASES, ids=IDS)
def test_halves_in_a_real_ray_simulation_equal_dpfl_train(simulation, trained, cli, tmp_path, alg, saved):
    f, app = simulation
    out = tmp_path / "out"
    run = f.run(app, federation_config="num-supernodes=3", run_config=f"dpfl-algorithm={alg} dpfl-out='{out}'",
                timeout=300)
    assert run["status"] == "finished:completed", (run["status-details"], run["log"][-4000:])
    _check_equals_train(trained, out, alg, saved, cli)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("flower-dep")
    with Flower(tmp) as f:
        f.superlink()
        for s in range(3):
            f.supernode(f"node-{s}", f"silo={s} dpfl-ledger-dir='{tmp / f'ledgers-{s}'}'")
        yield f, _app(tmp), tmp


@pytest.mark.slow  # 35–117 s a case here
@pytest.mark.parametrize("alg,saved", [c for c in CASES if c[0] != 1], ids=[i for i in IDS if "soteria" not in i])
def test_halves_on_a_real_superlink_equal_dpfl_train(deployment, trained, cli, tmp_path, alg, saved):
    f, app, _ = deployment
    out = tmp_path / "out"
    run = f.run(app, run_config=f"dpfl-algorithm={alg} dpfl-out='{out}'", timeout=300)
    assert run["status"] == "finished:completed", (run["status-details"], run["log"][-4000:])
    _check_equals_train(trained, out, alg, saved, cli)


@pytest.mark.slow  # three runs: 152–240 s here (2 cores, loaded)
def test_a_killed_supernode_restarts_without_resetting_its_ledger_or_repeating_noise(
        deployment, trained, cli, tmp_path):
    # SoteriaFL-SGD: its silos keep state (the shift) besides the generator and the ledger.
    f, app, tmp = deployment
    alg, saved = CASES[1]
    out, state = tmp_path / "out", tmp_path / "server.state"
    rc = f"dpfl-algorithm={alg} dpfl-out='{out}' dpfl-server-state='{state}'"
    first = f.run(app, run_config=rc + " dpfl-stop-after=2", timeout=300)
    assert first["status"] == "finished:completed", (first["status-details"], first["log"][-4000:])
    assert not (out / "model.npy").exists()
    # Silo 1's SuperNode dies and comes back (a new process, a new Flower node id, no
    # context.state): it rebuilds its half from the state and ledger on its disk.
    f.kill("node-1")
    f.supernode("node-1", f"silo=1 dpfl-ledger-dir='{tmp / 'ledgers-1'}'")
    second = f.run(app, run_config=rc, timeout=300)
    assert second["status"] == "finished:completed", (second["status-details"], second["log"][-4000:])
    summary = _check_equals_train(trained, out, alg, saved, cli)  # no reset, no repeated noise
    assert [r["round"] for r in summary["rounds"]] == [0, 1, 2, 3]
    digest = summary["plan"]
    for s in range(3):
        ledger = json.loads((tmp / f"ledgers-{s}" / digest[:16] / f"silo-{s}.ledger.json").read_text())
        assert [r["release"] for r in ledger["releases"]] == [0, 1, 2, 3]
    # The plan again on the same silos (no server state): round 0 was answered already; the
    # silos refuse and the run fails, visibly.
    again = f.run(app, run_config=f"dpfl-algorithm={alg} dpfl-out='{tmp_path / 'again'}'", timeout=300)
    assert again["status"] == "finished:failed", (again["status-details"], again["log"][-4000:])
    assert "round 0" in again["status-details"] + again["log"], again


# A user's own model on Flower: the numpy example's logistic gradients callable in every
# SuperNode (`load` returns the callable instead of data), the plan from `Plan.build` handed to
# both sides as a `Plan.to_json` file.
EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
OWN_CLIENT = f"""
import sys
sys.path.insert(0, {str(EXAMPLES)!r})
from own_model_numpy import logistic_gradients, make_silos
from dpfl.flower.apps import silo_app

DATA = make_silos()
app = silo_app(lambda silo, context: logistic_gradients(*DATA[silo]))
"""


@pytest.mark.slow  # one simulation: about a minute here
def test_an_own_numpy_model_in_a_real_ray_simulation_equals_halves_simulate(tmp_path):
    import sys
    sys.path.insert(0, str(EXAMPLES))
    from own_model_numpy import logistic_gradients, make_silos

    data = make_silos()
    plan = halves.Plan.build(
        {"kind": "mb-sgd", "calibration": "accountant", "step_size": 1.0, "batch_size": 40},
        dim=data[0][0].shape[1], records=[len(y) for _, y in data], epsilon=2.0, delta=1e-5,
        clip=1.0, rounds=5, seed=3)
    (tmp_path / "plan.json").write_text(plan.to_json())
    silos = [halves.SiloHalf(plan, i, gradients=logistic_gradients(X, y), seed="plan")
             for i, (X, y) in enumerate(data)]
    want = halves.simulate(plan, silos)
    app = write_app(tmp_path, "dpflownmodelapp", server=SERVER, client=OWN_CLIENT, config={
        "dpfl-plan": str(tmp_path / "plan.json"), "dpfl-seed": "plan", "dpfl-out": "",
        "dpfl-server-state": "", "dpfl-stop-after": 1000, "dpfl-timeout": 300})
    out = tmp_path / "out"
    with Flower(tmp_path / "flower") as f:
        f.env["DPFL_LEDGER_DIR"] = str(tmp_path / "ledgers")
        f.superlink(simulation=True)
        run = f.run(app, federation_config="num-supernodes=3", run_config=f"dpfl-out='{out}'", timeout=300)
    assert run["status"] == "finished:completed", (run["status-details"], run["log"][-4000:])
    model = np.load(out / "model.npy")
    assert np.any(want != 0) and np.array_equal(model.view(np.uint64), want.view(np.uint64)), (model, want)
    # Each silo's ledger holds the plan's 5 rounds, certified at the silo's budget.
    summary = json.loads((out / "summary.json").read_text())
    eps = [m["dpfl_plan_epsilon"] for m in summary["rounds"][-1]["silos"].values()]
    assert len(eps) == 3 and all(e == pytest.approx(s.epsilon, rel=1e-12) for e, s in zip(eps, silos)), (eps, [s.epsilon for s in silos])

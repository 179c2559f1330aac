"""dpfl.flower.apps in one process (the real Flower runs are in test_flower_apps_real.py): a
silo refuses a broadcast of another plan, and a silo the server saw answer earlier in the run
refuses when its state has vanished (a ledger directory that is not shared storage); a
DP-NormFedAvg silo reports the ε `dpfl train` certifies, and one no accountant certifies makes
the round's max say so; one ledger per data set composes a silo's plans and enforces its budget
across them."""

import json
import pathlib

import pytest

flwr = pytest.importorskip("flwr")
halves = pytest.importorskip("dpfl.halves")

from flwr.app import ConfigRecord, Context, Message, MessageType, RecordDict  # noqa: E402

import dpfl  # noqa: E402
from dpfl.flower import apps  # noqa: E402

EXP = pathlib.Path(__file__).parent / "flower.toml"
FIXED = pathlib.Path(__file__).parent / "halves_fixed.toml"


def _context(tmp_path, silo, exp=EXP, alg=0, **node):
    return Context(run_id=1, node_id=7, node_config={"silo": silo, "dpfl-ledger-dir": str(tmp_path), **node},
                   state=RecordDict(), run_config={"dpfl-experiment": str(exp), "dpfl-algorithm": alg,
                                                   "dpfl-seed": "plan"})


def _train(digest, silo, round_, broadcast, answered=False):
    rec = ConfigRecord({"plan": digest, "silo": silo, "round": round_, "answered": answered})
    return Message(RecordDict({"dpfl": rec, "dpfl-bytes": apps._bytes_record(broadcast)}), dst_node_id=7,
                   message_type=MessageType.TRAIN)


@pytest.fixture(autouse=True)
def _server_identity():
    # Messages with a destination are made in a ServerApp, where Flower sets these.
    from flwr.supercore.task_identity import TaskIdentity

    TaskIdentity.run_id, TaskIdentity.task_id, TaskIdentity.node_id = 1, 1, 0


def test_a_silo_steps_refuses_another_plan_and_a_vanished_state(tmp_path):
    data = halves.experiment_data(EXP)
    load = lambda silo, context: data[silo]  # noqa: E731
    plan, digest = apps.plan_of({"dpfl-experiment": str(EXP), "dpfl-algorithm": 0})
    server = halves.ServerHalf(plan, seed="plan")
    ctx = _context(tmp_path, 1)
    b0 = bytes(server.broadcast(0))
    reply = apps.silo_step(_train(digest, 1, 0, b0), ctx, load)
    m = dict(reply.content.metric_records["metrics"])
    assert m["dpfl_releases"] == 1 and m["dpfl_epsilon"] == min(m["dpfl_rdp_epsilon"], m["dpfl_pld_epsilon"])
    assert "dpfl" in ctx.state.config_records  # the half's state, also on disk:
    assert (tmp_path / digest[:16] / "silo-1.state").exists()
    # The server's plan is not this silo's: refused before anything is read.
    with pytest.raises(dpfl.DpflError, match="is not this silo's"):
        apps.silo_step(_train("0" * 64, 1, 0, b0), ctx, load)
    # Silo 2 never answered but the server says it did (its directory is elsewhere): refused.
    with pytest.raises(dpfl.DpflError, match="refusing to start afresh"):
        apps.silo_step(_train(digest, 2, 0, b0, answered=True), _context(tmp_path, 2), load)
    # The same round again, from a fresh context (a restarted SuperNode): the state on disk
    # answers with the bytes it sent, never fresh noise.
    again = apps.silo_step(_train(digest, 1, 0, b0, answered=True), _context(tmp_path, 1), load)
    assert apps._record_bytes(again.content) == apps._record_bytes(reply.content)


def _run(tmp_path, alg, exp=EXP, rounds=None, **node):
    """``rounds`` rounds of the plan through ``silo_step`` (each silo its own context, as its
    SuperNode): every round's replies' metrics."""
    plan, digest = apps.plan_of({"dpfl-experiment": str(exp), "dpfl-algorithm": alg})
    data = halves.experiment_data(exp)
    server = halves.ServerHalf(plan, seed="plan")
    ctxs = {i: _context(tmp_path, i, exp, alg, **node) for i in range(plan.silos)}
    out = []
    for r in range(plan.rounds if rounds is None else rounds):
        b = bytes(server.broadcast(r))
        ids = list(server.participants(r))
        replies = {i: apps.silo_step(_train(digest, i, r, b, answered=r > 0), ctxs[i], lambda s, c: data[s])
                   for i in ids}
        server.aggregate(r, [apps._record_bytes(replies[i].content) for i in ids])
        out.append({str(i): dict(replies[i].content.metric_records["metrics"]) for i in ids})
    return out, digest


@pytest.fixture(scope="module")
def trained(cli, tmp_path_factory):
    out = {}
    for exp in (EXP, FIXED):
        d = tmp_path_factory.mktemp(exp.stem)
        r = cli.run("train", "--config", str(exp), "--out", str(d), "--quiet", "--force")
        assert r.returncode == 0, r.stderr
        out[exp] = json.loads((d / "summary.json").read_text())
    return out


def test_dp_normfedavg_silos_report_the_epsilon_dpfl_train_certifies(tmp_path, trained):
    # flower.toml's DP-NormFedAvg: per-round (0.5, 1e-7) TDL releases, whose δ's add up within
    # the run's δ: train's summary certifies them by PLD (RDP has no curve for (ε, δ) events).
    rounds, _ = _run(tmp_path / "a", 2)
    want = trained[EXP][2]["privacy"]
    for s, p in enumerate(want):
        m = rounds[-1][str(s)]
        assert p["rdp_epsilon"] is None and p["pld_epsilon"] is not None
        assert "dpfl_plan_rdp_epsilon" not in m and m["dpfl_plan_pld_epsilon"] == p["pld_epsilon"]
        # One plan on the data so far: the silo's ε is the plan's.
        assert m["dpfl_epsilon"] == m["dpfl_plan_epsilon"] == p["pld_epsilon"] > 0
        assert "dpfl_uncertified" not in m
    last = apps.round_epsilon(rounds[-1])
    top = max(p["pld_epsilon"] for p in want)  # the round's max over silos, as train's summary
    assert last == {"dpfl_epsilon": top, "dpfl_plan_epsilon": top}
    # halves_fixed.toml's DP-NormFedAvg: per-round δ = the run's δ, so from the second round on
    # no accountant certifies the releases (train's summary: null). The reply says so and the
    # round's max is no number, naming the silos, rather than a max over the others.
    rounds, _ = _run(tmp_path / "b", 1, exp=FIXED, rounds=2)
    assert all(p["rdp_epsilon"] is None and p["pld_epsilon"] is None for p in trained[FIXED][1]["privacy"])
    for m in rounds[-1].values():
        assert m["dpfl_uncertified"] == 1 and "dpfl_epsilon" not in m and "dpfl_plan_epsilon" not in m
    mixed = {**rounds[-1], "9": {"dpfl_epsilon": 0.5}}
    assert apps.round_epsilon(mixed) == {"dpfl_epsilon": None, "dpfl_plan_epsilon": None,
                                         "uncertified": sorted(int(s) for s in rounds[-1])}


def test_one_ledger_per_data_set_composes_plans_and_enforces_the_budget_across_them(tmp_path):
    # Plan A (MB-SGD) to its end, then plan B (SoteriaFL-SGD) on the same silos' data.
    a, da = _run(tmp_path, 0)
    b, db = _run(tmp_path, 1, rounds=1)
    for s in ("0", "1", "2"):
        ma, mb = a[-1][s], b[0][s]
        assert mb["dpfl_plan_epsilon"] < mb["dpfl_epsilon"] and ma["dpfl_epsilon"] < mb["dpfl_epsilon"]
        # The data set's ledger holds A's four rounds and B's first, B's under its own ids.
        ledger = json.loads((tmp_path / f"silo-{s}.ledger.json").read_text())
        ids = [r["release"] for r in ledger["releases"]]
        assert ids == [0, 1, 2, 3, 1 << 32]
        registry = json.loads((tmp_path / f"silo-{s}.ledger.json.plans.json").read_text())["plans"]
        assert registry == {da: 0, db: 1}
        # ... and the silo's ε is their composition, by the accountant itself.
        events = dpfl.events.from_dict({"kind": "composed", "events": [r["event"] for r in ledger["releases"]]})
        assert mb["dpfl_rdp_epsilon"] == pytest.approx(dpfl.account(events, 1e-5, "rdp", "replace-one").epsilon, rel=1e-12)
        # Each plan keeps its own rounds.
        for d, n in ((da, 4), (db, 1)):
            plan_ledger = json.loads((tmp_path / d[:16] / f"silo-{s}.ledger.json").read_text())
            assert [r["release"] for r in plan_ledger["releases"]] == list(range(n))
    # The silo's own budget (node config), across plans: A fits in ε = 2.2; B's first round
    # (DP-NormFedAvg, ε 0.5 per round) would take the composition past it: refused, nothing
    # recorded, no message.
    budget = {"dpfl-epsilon": 2.2, "dpfl-delta": 1e-5}
    d = tmp_path / "budgeted"
    _run(d, 0, **budget)
    before = (d / "silo-0.ledger.json").read_bytes()
    with pytest.raises(dpfl.BudgetExceeded, match="over the budget epsilon 2.2"):
        _run(d, 2, rounds=1, **budget)
    assert (d / "silo-0.ledger.json").read_bytes() == before
    _, dc = _run(tmp_path / "scratch", 2, rounds=0)
    assert not (d / dc[:16] / "silo-0.state").exists()
    # A plan that names no budget is held to the one recorded; another budget is refused, never
    # a reset.
    with pytest.raises(dpfl.BudgetExceeded):
        _run(d, 2, rounds=1)
    with pytest.raises(dpfl.LedgerError, match="refusing to reset"):
        _run(d, 2, rounds=1, **{"dpfl-epsilon": 3.0, "dpfl-delta": 1e-5})
    # The data set's ledger deleted while the plans' are there: refused, not a fresh budget.
    (d / "silo-0.ledger.json").unlink()
    with pytest.raises(dpfl.ConfigError, match="would restart the spend"):
        _run(d, 1, rounds=1)

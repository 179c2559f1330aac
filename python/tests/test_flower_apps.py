"""dpfl.flower.apps in one process (the real Flower runs are in test_flower_apps_real.py): a
silo refuses a broadcast of another plan, and a silo the server saw answer earlier in the run
refuses when its state has vanished (a ledger directory that is not shared storage)."""

import pathlib

import pytest

flwr = pytest.importorskip("flwr")
halves = pytest.importorskip("dpfl.halves")

from flwr.app import ConfigRecord, Context, Message, MessageType, RecordDict  # noqa: E402

import dpfl  # noqa: E402
from dpfl.flower import apps  # noqa: E402

EXP = pathlib.Path(__file__).parent / "flower.toml"


def _context(tmp_path, silo):
    return Context(run_id=1, node_id=7, node_config={"silo": silo, "dpfl-ledger-dir": str(tmp_path)},
                   state=RecordDict(), run_config={"dpfl-experiment": str(EXP), "dpfl-algorithm": 0,
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

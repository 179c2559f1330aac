"""Any dpfl algorithm on Flower, the current way (Message API; issue 29 item 3): the silo
half (:class:`dpfl.halves.SiloHalf`) runs inside each SuperNode, the server half
(:class:`dpfl.halves.ServerHalf`) inside the ServerApp, and a round is the loop of
:func:`dpfl.halves.simulate` with Flower carrying the bytes::

    # client_app.py                                  # server_app.py
    from dpfl.flower.apps import silo_app            from dpfl.flower.apps import server_app
    app = silo_app(lambda silo, context: (X, y))     app = server_app()

(or ``ClientApp(mods=[silo_mod(load)])`` around an app of your own: the mod answers dpfl's
messages and passes every other message to your app). ``load(silo, context)`` returns the
silo's data ``(X, y)`` for a plan of one of dpfl's models, or its per-example ``gradients``
callable for a plan of your own model (``Plan.build``; the contract is in :mod:`dpfl.halves`).

Where things come from (Flower's run config, ``[tool.flwr.app.config]``, and node config,
``flower-supernode --node-config``):

* the plan, on both sides: ``dpfl-plan`` (a ``Plan.to_json`` file), ``dpfl-experiment``
  (+ ``dpfl-algorithm``, default 0: ``Plan.from_experiment``, planned exactly as ``dpfl
  train``) or ``dpfl-federation`` (a ``dpfl federate`` file). Each side loads its own and
  the silo refuses a broadcast whose plan digest (SHA-256 of ``Plan.to_json()``) is not its
  own: the server cannot hand a silo a plan with more rounds or less noise.
* ``dpfl-seed``: ``"plan"`` (the plan's seed, simulation only: a run equals ``dpfl train``
  bit for bit), an integer, or absent (the operating system's generator: deployments).
* the silo: node config ``dpfl-silo``, else ``silo``, else ``partition-id`` (a simulation's).
* the silo's files: node config ``dpfl-ledger-dir``, else ``$DPFL_LEDGER_DIR``, else
  ``~/.dpfl/ledgers``. **One ledger per data set, across plans**: ``<dir>/<data>.ledger.json``
  (``<data>`` = node config ``dpfl-data``, a name for the silo's records, default
  ``silo-<i>``) holds the releases of every plan run on those records, composed together,
  and enforces the silo's budget over all of them: node config ``dpfl-epsilon`` and
  ``dpfl-delta`` (the silo operator's own, replace-one, as ``dpfl silo --budget``), else the
  plan's when it sets ``[privacy] enforce_budget``; a budget once recorded stays (a plan asking
  none is held to it, one asking another is refused). A second plan on the same data therefore
  starts where the first left the budget; nothing restarts it but a new ``dpfl-ledger-dir``
  or ``dpfl-data`` chosen by the operator (as ``dpfl silo --fresh`` needs an empty directory).
  A data ledger missing while the directory holds plans this silo answered is refused (it
  was deleted or moved, or an older dpfl kept one ledger per plan), never started at 0.
  Each plan keeps its own files in ``<dir>/<plan digest>/``: ``silo-<i>.ledger.json`` (its
  rounds and release cap R) and the half's state ``silo-<i>.state`` (generator position,
  SoteriaFL's shift, a one-pass position, the last round answered and its bytes), written
  (temporary file, flush, rename) before the reply leaves, and kept in ``context.state`` too.
  A SuperNode killed and restarted rebuilds the half from them: it continues its stream and
  ledgers, never resets or repeats noise (a round asked again gets the bytes it sent).
* server side: ``dpfl-out`` (a directory: ``model.npy`` and ``summary.json``),
  ``dpfl-server-state`` (a file: the server half's state after every round; a run finding it
  continues from it), ``dpfl-stop-after`` (stop after that many rounds: a run in parts),
  ``dpfl-timeout`` (seconds to wait for the SuperNodes and each round, default 600).

A refusal (budget, a round answered already, a plan that differs) or any failed or missing
reply raises :class:`~dpfl.flower.RoundFailed` in the ServerApp: the run ends ``failed``.
A ServerApp killed mid-run leaves the run unfinished (Flower marks it failed, no model is
written); the silos' ledgers keep every round they answered, so running the plan again
(without ``dpfl-server-state``) is refused at round 0 and with it continues after the last
round the server saved.
Metrics: each reply carries its silo's ε at its data ledger's δ for every plan on its data
(``dpfl_epsilon``: the tighter of ``dpfl_rdp_epsilon`` and ``dpfl_pld_epsilon``, as ``dpfl
train`` certifies) and for this plan alone (``dpfl_plan_epsilon``, ``dpfl_plan_rdp_epsilon``,
``dpfl_plan_pld_epsilon``: ``dpfl train``'s figures for the run). Where no accountant
certifies the releases (e.g. (ε, δ) events whose δ's add up past the silo's δ) the reply says
``dpfl_uncertified = 1`` and carries no ``dpfl_epsilon``; the server records both maxima per
round over the participants (``dpfl_epsilon``, ``dpfl_plan_epsilon`` in ``summary.json``),
never a weighted mean, and no max at all (``null``, the silos named under ``uncertified``)
when one of them is uncertified.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from .. import halves
from .._core import ConfigError
from .client import default_ledger_dir, locked
from .strategy import RoundFailed

# Record names in a message's RecordDict.
_CFG, _PAYLOAD = "dpfl", "dpfl-bytes"
_PLANS: Dict[Tuple[str, str, int], Tuple[Any, str]] = {}


def _bytes_record(b: bytes) -> ArrayRecord:
    # An ArrayRecord (not a ConfigRecord value): Flower chunks large arrays in transit.
    return ArrayRecord(array_dict={"bytes": Array(np.frombuffer(b, dtype=np.uint8))})


def _record_bytes(content: RecordDict) -> bytes:
    return content.array_records[_PAYLOAD]["bytes"].numpy().tobytes()


def plan_of(config: Mapping[str, Any]) -> Tuple["halves.Plan", str]:
    """The plan a run config names, and its digest; loaded once per process."""
    for key in ("dpfl-plan", "dpfl-experiment", "dpfl-federation"):
        if config.get(key):
            path, alg = str(config[key]), int(config.get("dpfl-algorithm", 0))
            ck = (key, path, alg)
            if ck not in _PLANS:
                if key == "dpfl-plan":
                    plan = halves.Plan.from_json(Path(path).read_text())
                elif key == "dpfl-experiment":
                    plan = halves.Plan.from_experiment(path, alg)
                else:
                    plan = halves.Plan.from_federation(path)
                _PLANS[ck] = (plan, hashlib.sha256(plan.to_json().encode()).hexdigest())
            return _PLANS[ck]
    raise ConfigError("the run config names no plan: set dpfl-plan, dpfl-experiment or dpfl-federation")


def _int(where: str, key: str, value: Any) -> int:
    try:
        v = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"config field `{key}` ({where}): {value!r} is not an integer") from None
    if v < 0:
        raise ConfigError(f"config field `{key}` ({where}): {v} is negative")
    return v


def _seed(config: Mapping[str, Any]) -> Any:
    s = config.get("dpfl-seed")
    if s is None or s == "os":
        return None
    return "plan" if s == "plan" else _int("run config", "dpfl-seed", s)


def _silo_of(context: Context) -> int:
    nc = context.node_config
    for key in ("dpfl-silo", "silo", "partition-id"):
        if key in nc:
            return _int("node config", key, nc[key])
    raise ConfigError("this SuperNode's node config names no silo: --node-config 'silo=<i>'")


def _budget(context: Context) -> Optional[Tuple[float, float]]:
    """The silo operator's own budget (node config ``dpfl-epsilon`` and ``dpfl-delta``)."""
    nc = context.node_config
    got = [nc.get(k) for k in ("dpfl-epsilon", "dpfl-delta")]
    if got == [None, None]:
        return None
    try:
        e, d = (float(v) for v in got)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError(f"config field `dpfl-epsilon`/`dpfl-delta` (node config): two numbers, got {got}") from None
    return e, d


def _silo_files(context: Context, silo: int, digest: str) -> Tuple[Path, Path, Path]:
    """(the plan's ledger, the half's state, the data set's ledger) of this silo."""
    nc = context.node_config
    d = nc.get("dpfl-ledger-dir")
    root = Path(str(d)) if d else default_ledger_dir()
    data = str(nc.get("dpfl-data", f"silo-{silo}"))
    if not data or "/" in data or "\\" in data or data.startswith("."):
        raise ConfigError(f"config field `dpfl-data` (node config): {data!r} must name a file (no '/', not hidden)")
    base = root / digest[:16]
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"config field `dpfl-ledger-dir`: {root}: {e}") from None
    data_ledger = root / f"{data}.ledger.json"
    if not data_ledger.exists():
        # Plans answered from this directory but no data set's ledger: it was deleted or moved
        # (or an older dpfl kept one ledger per plan). A new one would start the spend at 0.
        earlier = sorted(p for p in root.glob(f"*/silo-{silo}.ledger.json") if p.parent != base)
        if earlier:
            raise ConfigError(
                f"config field `dpfl-data`: {data_ledger} does not exist, but silo {silo} answered plans from "
                f"{root} ({earlier[0]}, ...): a new data ledger would restart the spend on these records; "
                f"restore it, or move those plans' directories away to start the budget afresh on purpose")
    return base / f"silo-{silo}.ledger.json", base / f"silo-{silo}.state", data_ledger


def _epsilon_metrics(half: "halves.SiloHalf") -> Dict[str, Any]:
    """The silo's ε over its data (every plan) and for this plan (module docs)."""
    metrics: Dict[str, Any] = {"dpfl_releases": len(half.releases)}
    for prefix, plan in (("dpfl", False), ("dpfl_plan", True)):
        rdp, pld, best = half.epsilons(plan)
        for key, eps in ((f"{prefix}_rdp_epsilon", rdp), (f"{prefix}_pld_epsilon", pld), (f"{prefix}_epsilon", best)):
            if eps is not None:
                metrics[key] = float(eps)
    if "dpfl_epsilon" not in metrics:
        metrics["dpfl_uncertified"] = 1
    return metrics


def round_epsilon(silo_metrics: Mapping[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """A round's ε over its participants' metrics: the max (never a mean), or ``None`` with the
    silos no accountant certifies (a max over the others would under-report)."""
    uncertified = sorted(int(s) for s, m in silo_metrics.items() if "dpfl_epsilon" not in m)
    out: Dict[str, Any] = {}
    for key in ("dpfl_epsilon", "dpfl_plan_epsilon"):  # over the silos' data sets; this plan's
        eps = [m[key] for m in silo_metrics.values() if key in m]
        out[key] = None if len(eps) < len(silo_metrics) or not eps else max(eps)
    if uncertified:
        out["uncertified"] = uncertified
    return out


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


Load = Callable[[int, Context], Any]


def silo_step(msg: Message, context: Context, load: Load) -> Message:
    """This SuperNode's answer to one dpfl message: who it is (a query) or its silo half's
    step on the broadcast (a train message). The silo half is rebuilt from its state on disk
    (or in ``context.state``) for every message and its new state written before the reply."""
    cfg = msg.content.config_records[_CFG]
    plan, digest = plan_of(context.run_config)
    silo = _silo_of(context)
    if cfg.get("plan") != digest:
        raise ConfigError(
            f"silo {silo}: the server's plan ({str(cfg.get('plan'))[:16]}) is not this silo's "
            f"({digest[:16]}): refused"
        )
    if msg.metadata.message_type == MessageType.QUERY:
        return Message(RecordDict({_CFG: ConfigRecord({"silo": silo, "plan": digest})}), reply_to=msg)
    if int(cfg["silo"]) != silo:
        raise ConfigError(f"a message for silo {cfg['silo']} reached silo {silo}")
    ledger, state_path, data_ledger = _silo_files(context, silo, digest)
    # The data set's ledger is shared by every plan on it: one step at a time across them.
    with locked(data_ledger):
        saved = context.state.config_records.get(_CFG)
        state = saved["state"] if saved is not None and "state" in saved else None
        if state is None and state_path.exists():
            state = state_path.read_bytes()
        if state is None and cfg.get("answered"):
            # The server saw this silo answer earlier in this run, yet its state is nowhere:
            # its files are not where they were (a Ray cluster without shared storage, a wiped
            # disk). A fresh half would start a fresh ledger (and a seeded one its stream).
            raise ConfigError(
                f"silo {silo} answered earlier in this run but its state is neither in context.state nor at "
                f"{state_path}: refusing to start afresh (on a Ray cluster DPFL_LEDGER_DIR must be shared storage)"
            )
        got = load(silo, context)
        source = {"gradients": got} if callable(got) else {"data": got}
        half = halves.SiloHalf(plan, silo, ledger_path=str(ledger), seed=_seed(context.run_config),
                               state=state, data_ledger=str(data_ledger), plan_id=digest,
                               budget=_budget(context), **source)
        out = half.step(_record_bytes(msg.content))
        new_state = half.state()
        _write_atomic(state_path, new_state)
        context.state[_CFG] = ConfigRecord({"state": new_state})
    metrics = _epsilon_metrics(half)
    return Message(RecordDict({_CFG: ConfigRecord({"silo": silo}), _PAYLOAD: _bytes_record(out),
                               "metrics": MetricRecord(metrics)}), reply_to=msg)


def silo_mod(load: Load) -> Callable[[Message, Context, Callable[[Message, Context], Message]], Message]:
    """A ClientApp mod: dpfl's messages (those carrying a ``dpfl`` record) run the silo half;
    every other message goes to the wrapped app."""

    def mod(msg: Message, context: Context, call_next: Callable[[Message, Context], Message]) -> Message:
        if msg.has_content() and _CFG in msg.content.config_records:
            return silo_step(msg, context, load)
        return call_next(msg, context)

    return mod


def silo_app(load: Load) -> ClientApp:
    """A ClientApp that is only dpfl's silo (train and query messages)."""
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        return silo_step(msg, context, load)

    @app.query()
    def query(msg: Message, context: Context) -> Message:
        return silo_step(msg, context, load)

    return app


def _send(grid: Grid, msgs: List[Message], timeout: float, what: str) -> List[Message]:
    replies = list(grid.send_and_receive(msgs, timeout=timeout))
    errors = [m for m in replies if m.has_error()]
    if errors:
        raise RoundFailed(f"{what}: {len(errors)} of {len(msgs)} replies failed; node "
                          f"{errors[0].metadata.src_node_id}: {errors[0].error.reason}")
    if len(replies) < len(msgs):
        raise RoundFailed(f"{what}: {len(replies)} of {len(msgs)} replies arrived within {timeout} s")
    return replies


def _discover(grid: Grid, n: int, digest: str, timeout: float) -> Dict[int, int]:
    """silo -> node id: every SuperNode is asked which silo it is (and checks the plan)."""
    deadline = time.monotonic() + timeout
    while len(list(grid.get_node_ids())) < n:
        if time.monotonic() > deadline:
            raise RoundFailed(f"{len(list(grid.get_node_ids()))} of the plan's {n} silos connected in {timeout} s")
        time.sleep(0.5)
    msgs = [Message(RecordDict({_CFG: ConfigRecord({"plan": digest})}), dst_node_id=node,
                    message_type=MessageType.QUERY) for node in grid.get_node_ids()]
    nodes: Dict[int, int] = {}
    replies = list(grid.send_and_receive(msgs, timeout=timeout))
    # A node that does not answer (one killed and not yet forgotten by the SuperLink; a
    # restarted SuperNode is a new node) holds no silo: only a silo left without a node fails.
    failed = [m for m in replies if m.has_error()]
    for rep in replies:
        if rep.has_error():
            continue
        silo = int(rep.content.config_records[_CFG]["silo"])
        if silo in nodes or not 0 <= silo < n:
            raise RoundFailed(f"node {rep.metadata.src_node_id} says it is silo {silo}: the plan has "
                              f"silos 0..{n - 1}, each on one node")
        nodes[silo] = rep.metadata.src_node_id
    if len(nodes) != n:
        why = f"; node {failed[0].metadata.src_node_id}: {failed[0].error.reason}" if failed else ""
        raise RoundFailed(f"silos {sorted(set(range(n)) - set(nodes))} have no SuperNode{why}")
    return nodes


def run_server(grid: Grid, context: Context) -> Optional[np.ndarray]:
    """The server half over Flower: discovery, then ``simulate``'s loop. Returns the model
    (``None`` when ``dpfl-stop-after`` stopped it before the plan's last round)."""
    rc = context.run_config
    plan, digest = plan_of(rc)
    timeout = float(rc.get("dpfl-timeout", 600))
    state_path = Path(str(rc["dpfl-server-state"])) if rc.get("dpfl-server-state") else None
    state = state_path.read_bytes() if state_path is not None and state_path.exists() else None
    server = halves.ServerHalf(plan, seed=_seed(rc), state=state)
    nodes = _discover(grid, plan.silos, digest, timeout)
    stop = min(plan.rounds, server.round + int(rc.get("dpfl-stop-after", plan.rounds)))
    rounds: List[Dict[str, Any]] = []
    answered: set = set()
    for r in range(server.round, stop):
        ids = list(server.participants(r))
        b = _bytes_record(bytes(server.broadcast(r)))
        msgs = [Message(RecordDict({_CFG: ConfigRecord({"plan": digest, "silo": i, "round": r, "answered": i in answered}),
                                    _PAYLOAD: b}),
                        dst_node_id=nodes[i], message_type=MessageType.TRAIN, group_id=str(r)) for i in ids]
        replies = {int(m.content.config_records[_CFG]["silo"]): m for m in _send(grid, msgs, timeout, f"round {r}")}
        if sorted(replies) != sorted(ids):
            raise RoundFailed(f"round {r}: replies from silos {sorted(replies)}, asked {sorted(ids)}")
        server.aggregate(r, [_record_bytes(replies[i].content) for i in ids])
        answered.update(ids)
        silo_metrics = {str(i): dict(replies[i].content.metric_records["metrics"]) for i in ids}
        eps = round_epsilon(silo_metrics)
        rounds.append({"round": r, "participants": ids, **eps, "silos": silo_metrics})
        shown = eps["dpfl_epsilon"] if "uncertified" not in eps else f"not certified (silos {eps['uncertified']})"
        print(f"dpfl round {r + 1}/{plan.rounds}: {len(ids)} silos, max epsilon {shown}", flush=True)
        if state_path is not None:
            _write_atomic(state_path, bytes(server.state()))
    model = server.output() if server.round >= plan.rounds else None
    out = rc.get("dpfl-out")
    if out:
        d = Path(str(out))
        d.mkdir(parents=True, exist_ok=True)
        if model is not None:
            np.save(d / "model.npy", model)
        prev = json.loads((d / "summary.json").read_text()) if (d / "summary.json").exists() else {"rounds": []}
        summary = {"plan": digest, "silos": plan.silos, "rounds": prev["rounds"] + rounds,
                   "nodes": {str(s): n for s, n in nodes.items()}, "finished": model is not None}
        _write_atomic(d / "summary.json", json.dumps(summary, indent=1).encode())
    return model


def server_app() -> ServerApp:
    """A ServerApp running :func:`run_server`."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        run_server(grid, context)

    return app


__all__ = ["plan_of", "round_epsilon", "run_server", "server_app", "silo_app", "silo_mod", "silo_step"]

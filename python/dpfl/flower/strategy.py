"""What a Flower server needs around dpfl clients (issue 29): metrics aggregated as a max,
rounds that fail the run instead of being counted and skipped, and a Message-API ClientApp for
a legacy ``NumPyClient`` (so ``DpflClient`` runs under ``flwr.serverapp.strategy.*``).

Flower weighted-averages every metric by default; a silo's ε is not a quantity to average
(the guarantee of the federation is the worst silo's), so :func:`max_metrics` (Message API:
``FedAvg(train_metrics_aggr_fn=max_metrics)``) and :func:`max_fit_metrics` (legacy:
``FedAvg(fit_metrics_aggregation_fn=max_fit_metrics)``) take the max of every ``dpfl_*`` key
and weighted-average the rest as Flower does. Flower logs a failed reply and carries on, and the
run exits 0; :func:`strict` makes any failed or missing reply raise :class:`RoundFailed` in
the ServerApp, so the run is marked failed (``flwr ls`` shows ``failed``; a simulation raises).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from flwr.app import ArrayRecord, ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from .._core import DpflError


class RoundFailed(DpflError):
    """A round in which a silo refused or failed: the run stops, visibly."""


def _is_max(key: str) -> bool:
    return key.startswith("dpfl_")


def max_metrics(records: List[RecordDict], weighting_key: str) -> MetricRecord:
    """Message-API ``train_metrics_aggr_fn``: ``dpfl_*`` metrics as the max over replies (ε,
    rounds, σ), the others weighted by ``weighting_key`` as Flower's default does."""
    out: Dict[str, Any] = {}
    weights: List[float] = []
    rows: List[Dict[str, Any]] = []
    for rd in records:
        m: Dict[str, Any] = {}
        for rec in rd.metric_records.values():
            m.update(rec)
        weights.append(float(m.get(weighting_key, 1.0)))
        rows.append(m)
    total = sum(weights) or 1.0
    for key in {k for m in rows for k in m if k != weighting_key}:
        vals = [(w, m[key]) for w, m in zip(weights, rows) if key in m]
        if _is_max(key):
            out[key] = max(v for _, v in vals)
        elif all(isinstance(v, (int, float)) for _, v in vals):
            out[key] = sum(w * v for w, v in vals) / total
    return MetricRecord(out)


def max_fit_metrics(fit_metrics: List[Tuple[int, Dict[str, Any]]]) -> Dict[str, Any]:
    """Legacy ``fit_metrics_aggregation_fn``: the same rule on (num_examples, metrics) pairs."""
    total = sum(n for n, _ in fit_metrics) or 1
    out: Dict[str, Any] = {}
    for key in {k for _, m in fit_metrics for k in m}:
        vals = [(n, m[key]) for n, m in fit_metrics if key in m]
        if _is_max(key):
            out[key] = max(v for _, v in vals)
        elif all(isinstance(v, (int, float)) for _, v in vals):
            out[key] = sum(n * v for n, v in vals) / total
    return out


def strict(strategy: Any) -> Any:
    """``strategy`` (a ``flwr.serverapp.strategy.Strategy`` or a legacy
    ``flwr.server.strategy.Strategy``), changed in place so that a round with a failed reply —
    a budget refusal, a round past the plan, a crash — or a missing one raises
    :class:`RoundFailed` in the ServerApp instead of being aggregated without it."""
    if hasattr(strategy, "aggregate_train"):
        for kind in ("train", "evaluate"):  # an evaluate refusal (allow_evaluate) fails it too
            _check_message_api(strategy, kind)
    elif hasattr(strategy, "aggregate_fit"):
        for name in ("aggregate_fit", "aggregate_evaluate"):
            _check_legacy(strategy, name)
    else:
        raise TypeError(f"not a Flower strategy: {type(strategy).__name__}")
    return strategy


def _check_message_api(strategy: Any, kind: str) -> None:
    configure, aggregate = getattr(strategy, f"configure_{kind}"), getattr(strategy, f"aggregate_{kind}")
    sent: Dict[int, int] = {}

    def configured(server_round: int, *a: Any, **k: Any) -> Iterable[Message]:
        msgs = list(configure(server_round, *a, **k))
        sent[server_round] = len(msgs)
        return msgs

    def aggregated(server_round: int, replies: Iterable[Message]) -> Any:
        replies = list(replies)
        _raise_on_errors(f"round {server_round} ({kind})", replies, sent.get(server_round))
        return aggregate(server_round, replies)

    setattr(strategy, f"configure_{kind}", configured)
    setattr(strategy, f"aggregate_{kind}", aggregated)


def _check_legacy(strategy: Any, name: str) -> None:
    aggregate = getattr(strategy, name)

    def checked(server_round: int, results: Any, failures: Any) -> Any:
        if failures:
            raise RoundFailed(f"round {server_round} ({name}): {len(failures)} client(s) failed: {failures[0]!r}")
        return aggregate(server_round, results, failures)

    setattr(strategy, name, checked)


def _raise_on_errors(what: str, replies: List[Message], expected: "int | None") -> None:
    errors = [m for m in replies if m.has_error()]
    if errors:
        e = errors[0]
        raise RoundFailed(
            f"{what}: {len(errors)} of {len(replies)} replies failed; node "
            f"{e.metadata.src_node_id}: {e.error.reason}"
        )
    if expected is not None and len(replies) < expected:
        raise RoundFailed(f"{what}: {len(replies)} of {expected} replies arrived")


def _arrays_and_config(msg: Message) -> Tuple[List[Any], Dict[str, Any]]:
    """A Message-API request's model arrays and config, as a NumPyClient takes them."""
    arrays = msg.content.array_records["arrays"].to_numpy_ndarrays()
    return arrays, dict(msg.content.config_records.get("config", ConfigRecord()))


def _numeric(metrics: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    """The numeric (non-bool) entries of a NumPyClient's metrics: what a MetricRecord holds."""
    return {k: v for k, v in (metrics or {}).items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def numpy_client_app(client_fn: Callable[[Context], Any]) -> ClientApp:
    """A Message-API ``ClientApp`` running ``client_fn(context)``'s ``NumPyClient`` (e.g. a
    ``DpflClient``) for ``flwr.serverapp.strategy.*``: ``"arrays"`` and ``"config"`` in,
    ``"arrays"`` and ``"metrics"`` (with ``num-examples``) out. The client is built per
    message, as Flower builds it; ``DpflClient`` keeps nothing in memory that matters."""
    app = ClientApp()

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        new, n, metrics = client_fn(context).fit(*_arrays_and_config(msg))
        out = _numeric(metrics)
        out["num-examples"] = int(n)
        return Message(RecordDict({"arrays": ArrayRecord(list(new)), "metrics": MetricRecord(out)}), reply_to=msg)

    @app.evaluate()
    def evaluate(msg: Message, context: Context) -> Message:
        loss, n, metrics = client_fn(context).evaluate(*_arrays_and_config(msg))
        out = _numeric(metrics)
        out.update({"loss": float(loss), "num-examples": int(n)})
        return Message(RecordDict({"metrics": MetricRecord(out)}), reply_to=msg)

    return app

"""dpfl.flower.DpflClient in a one-process Flower federation: the noise scale, the ledger,
the refusal past the budget, and the metrics the server receives."""

import json
import pickle

import numpy as np
import pytest

flwr = pytest.importorskip("flwr")

import dpfl  # noqa: E402
from dpfl.flower import AlreadyReleased, BudgetExceeded, DpflClient, PastThePlan  # noqa: E402


class Shift(flwr.client.NumPyClient):
    """Moves every parameter by +step (a stand-in for local training)."""

    def __init__(self, step):
        self.step = step

    def get_parameters(self, config):
        return [np.zeros((100, 50)), np.zeros(50)]

    def fit(self, parameters, config):
        return [p + self.step for p in parameters], 10, {"local": 1.0}

    def evaluate(self, parameters, config):
        return 0.5, 10, {}


def test_noise_scale_ledger_and_refusal():
    eps, delta, rounds = 2.0, 1e-5, 3
    client = DpflClient(Shift(0.0), epsilon=eps, delta=delta, rounds=rounds, update_clip=0.5, seed=11)
    cal = dpfl.calibrate(eps, delta, mechanism="gaussian", steps=rounds, accountant="rdp")
    assert client.noise_multiplier == cal.noise_multiplier
    assert client.sigma == pytest.approx(cal.noise_multiplier * 2 * 0.5)
    # The Flower-side object (as a ClientApp's client_fn returns it).
    fl = client.to_client()
    params = client.get_parameters({})
    spent = []
    for r in range(rounds):
        new, n, metrics = client.fit(params, {"server_round": r + 1})
        noise = np.concatenate([p.ravel() for p in new])
        # 5050 coordinates of pure noise (the wrapped update is 0): sample std within 4%.
        assert np.std(noise) == pytest.approx(client.sigma, rel=0.04)
        assert n == 10 and metrics["local"] == 1.0 and metrics["dpfl_rounds"] == r + 1
        spent.append(metrics["dpfl_epsilon"])
    # The ledger's epsilon after k rounds is the accountant's for k composed Gaussians.
    for k, e in enumerate(spent, 1):
        want = dpfl.account(
            dpfl.SelfComposedDpEvent(dpfl.GaussianDpEvent(client.noise_multiplier), k) if k > 1
            else dpfl.GaussianDpEvent(client.noise_multiplier),
            delta, "rdp").epsilon
        assert e == pytest.approx(want, rel=1e-9)
    assert spent[0] < spent[1] < spent[2] <= eps * (1 + 1e-9)
    with pytest.raises(PastThePlan, match="round 4 is past the 3 rounds"):
        client.fit(params, {"server_round": 4})
    with pytest.raises(BudgetExceeded, match="budget exceeded: release 4"):
        client.fit(params, {})
    assert len(client.ledger) == 3
    with pytest.raises(dpfl.DpflError, match="allow_evaluate"):
        client.evaluate(params, {})
    assert fl is not None


def test_a_recreated_seeded_client_never_draws_a_rounds_noise_again(tmp_path):
    # Issue 29: Flower re-creates the client for every message; a seeded client drew the same
    # noise vector every round, and the server could difference two rounds to cancel it.
    def fresh(**kw):
        return DpflClient(Shift(0.0), epsilon=10.0, delta=1e-5, rounds=5, update_clip=0.5,
                          noise_multiplier=1.0, seed=7, **kw)

    params = fresh().get_parameters({})
    flat = lambda out: np.concatenate([p.ravel() for p in out[0]])  # noqa: E731
    r1 = flat(fresh().fit(params, {"server_round": 1}))
    r2 = flat(fresh().fit(params, {"server_round": 2}))
    # Independent N(0, 1) vectors: the correlation of 5050 coordinates is within ±0.1.
    assert abs(np.corrcoef(r1, r2)[0, 1]) < 0.1
    # Reproducible: the same seed and round give the same noise (on another ledger: this
    # silo's default ledger refuses round 1 again).
    again = fresh(ledger_path=tmp_path / "other.json").fit(params, {"server_round": 1})
    assert np.array_equal(r1, flat(again))
    with pytest.raises(AlreadyReleased):
        fresh().fit(params, {"server_round": 1})
    # Unnumbered rounds are numbered by the durable ledger (by default on disk, per silo),
    # continued by a re-created client: never the same stream twice.
    u1 = flat(fresh(silo=3).fit(params, {}))
    u2 = flat(fresh(silo=3).fit(params, {}))
    assert abs(np.corrcoef(u1, u2)[0, 1]) < 0.1
    assert len(fresh(silo=3).ledger) == 2


def test_the_default_ledger_is_on_disk_per_silo_and_survives_recreation(tmp_path):
    # Issue 29: without ledger_path the ledger lived in memory and restarted at 0 with every
    # client Flower re-created; epsilon read 0.199 for 20 rounds against a true 1.0.
    make = lambda silo: DpflClient(Shift(0.0), epsilon=1.0, delta=1e-5, rounds=4,  # noqa: E731
                                   update_clip=0.5, silo=silo)
    params = make(0).get_parameters({})
    eps = [make(0).fit(params, {"server_round": r})[2]["dpfl_epsilon"] for r in (1, 2, 3, 4)]
    assert eps[0] < eps[1] < eps[2] < eps[3] <= 1.0 + 1e-9
    assert eps[3] > 0.9  # the calibrated spend of 4 rounds, not one round's
    assert (tmp_path / "ledgers" / "flower-silo-0.ledger.json").exists()
    # Another silo keeps its own account.
    assert make(1).fit(params, {"server_round": 1})[2]["dpfl_rounds"] == 1
    with pytest.raises(PastThePlan, match="round 5 is past the 4 rounds"):
        make(0).fit(params, {"server_round": 5})
    with pytest.raises(BudgetExceeded, match="budget exceeded: release 5"):
        make(0).fit(params, {})


def test_the_client_pickles_for_ray_and_the_copy_shares_the_ledger():
    # Issue 29: "cannot pickle 'dpfl._core.GaussianMechanism'" on every round under Ray.
    client = DpflClient(Shift(0.0), epsilon=2.0, delta=1e-5, rounds=3, update_clip=0.5, seed=5)
    params = client.get_parameters({})
    client.fit(params, {"server_round": 1})
    copy = pickle.loads(pickle.dumps(client))
    _, _, m = copy.fit(params, {"server-round": 2})  # the Message-API strategies' key
    assert m["dpfl_rounds"] == 2 and len(client.ledger) == 2


def test_per_step_mode_accounts_sampled_gaussian_steps():
    # Local DP-SGD inside the client: rounds x local_steps Poisson-sampled Gaussians.
    class Quadratic(Shift):
        def per_example_gradients(self, params, idx):
            return [np.ones((idx.size, 100, 50)), np.ones((idx.size, 50))]

    eps, delta, rounds, steps = 1.0, 1e-5, 4, 5
    kw = dict(epsilon=eps, delta=delta, rounds=rounds, example_clip=1.0, batch_size=10, records=1000,
              local_steps=steps, learning_rate=0.1, seed=3)
    client = DpflClient(Quadratic(0.0), **kw)
    event = lambda z, k: dpfl.SelfComposedDpEvent(dpfl.PoissonSampledDpEvent(0.01, dpfl.GaussianDpEvent(z)), k)  # noqa: E731
    z = client.noise_multiplier
    assert dpfl.account(event(z, rounds * steps), delta, "rdp", "add-remove").epsilon <= eps
    # The amplification: far less noise than the unsampled per-update mode at the same ε.
    per_update = DpflClient(Shift(0.0), epsilon=eps, delta=delta, rounds=rounds, update_clip=0.5, silo=9)
    assert z < 0.5 * per_update.noise_multiplier
    params = client.get_parameters({})
    for r in range(1, rounds + 1):
        new, n, m = client.fit(params, {"server_round": r})
        want = dpfl.account(event(z, r * steps), delta, "rdp", "add-remove").epsilon
        assert m["dpfl_epsilon"] == pytest.approx(want, rel=1e-9) and n == 10
    # Every example's gradient (norm sqrt(5050)) is clipped to 1: a step moves the parameters
    # by lr x (clipped sum + noise) / (q n); the mean coordinate shift is about -lr x steps x
    # (batch x 1/sqrt(5050)) / 10 per round, tiny next to the unclipped -0.1 x 5 = -0.5.
    flat = np.concatenate([p.ravel() for p in new])
    assert abs(flat.mean()) < 0.05
    with pytest.raises(BudgetExceeded):
        client.fit(params, {"server_round": rounds + 1})


def test_metrics_aggregate_epsilon_as_a_max():
    from flwr.app import MetricRecord, RecordDict

    from dpfl.flower import max_fit_metrics, max_metrics

    rows = [(10, {"dpfl_epsilon": 0.5, "dpfl_rounds": 2, "loss": 1.0}),
            (30, {"dpfl_epsilon": 0.9, "dpfl_rounds": 1, "loss": 3.0})]
    assert max_fit_metrics(rows) == {"dpfl_epsilon": 0.9, "dpfl_rounds": 2, "loss": 2.5}
    recs = [RecordDict({"metrics": MetricRecord({**m, "num-examples": n})}) for n, m in rows]
    out = dict(max_metrics(recs, "num-examples"))
    assert out == {"dpfl_epsilon": 0.9, "dpfl_rounds": 2, "loss": 2.5}


def test_update_is_clipped_before_the_noise():
    # A huge update (100 per coordinate) is clipped to norm 0.5: what arrives is noise around
    # a vector of norm 0.5, never around the raw update.
    client = DpflClient(Shift(100.0), epsilon=1e5, delta=1e-5, rounds=1, update_clip=0.5,
                        noise_multiplier=0.02, seed=1)
    new, _, m = client.fit(client.get_parameters({}), {"server_round": 1})
    flat = np.concatenate([p.ravel() for p in new])
    # E norm² = 0.5² + 5050 sigma² = 0.25 + 2.02 (sigma = 0.02 x 2 x 0.5); unclipped: 5.05e7
    assert np.linalg.norm(flat) ** 2 == pytest.approx(0.25 + 5050 * 0.02**2, rel=0.06)
    assert m["dpfl_sigma"] == pytest.approx(0.02)


def test_durable_ledger_survives_a_restart_and_never_re_releases(tmp_path):
    from dpfl.flower import AlreadyReleased

    eps, delta, rounds = 2.0, 1e-5, 3
    path = tmp_path / "silo-0.ledger.json"
    make = lambda: DpflClient(Shift(0.0), epsilon=eps, delta=delta, rounds=rounds, update_clip=0.5,
                              ledger_path=path)
    client = make()
    params = client.get_parameters({})
    _, _, m1 = client.fit(params, {"server_round": 1})
    _, _, m2 = client.fit(params, {"server_round": 2})
    # dpfl's one ledger format (the Rust ledger's), checksummed.
    data = json.loads(path.read_text())
    assert data["format"] == "dpfl-ledger/2" and len(data["sha256"]) == 64
    assert [r["release"] for r in data["releases"]] == [1, 2]
    assert data["budget"]["epsilon"] == eps and data["budget"]["delta"] == delta
    # Written by rename: no temporary file is left beside it.
    # (the .lock beside it serialises fits across processes).
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "ledgers") == [
        "silo-0.ledger.json", "silo-0.ledger.json.lock"]

    # The process restarts: the new client has spent what the old one did.
    restarted = make()
    assert len(restarted.ledger) == 2
    assert restarted.spent() == pytest.approx(m2["dpfl_epsilon"], rel=1e-12)
    # Round 2 again (a server retry after the crash) is refused, not answered with fresh noise.
    with pytest.raises(AlreadyReleased, match="round 2 was released already"):
        restarted.fit(params, {"server_round": 2})
    assert len(json.loads(path.read_text())["releases"]) == 2
    _, _, m3 = restarted.fit(params, {"server_round": 3})
    assert m3["dpfl_rounds"] == 3 and m3["dpfl_epsilon"] <= eps * (1 + 1e-9)
    # Past the budget, after another restart: refused, and the file is unchanged.
    before = path.read_text()
    with pytest.raises(PastThePlan, match="round 4 is past the 3 rounds"):
        make().fit(params, {"server_round": 4})
    with pytest.raises(BudgetExceeded, match="release 4"):
        make().fit(params, {})
    assert path.read_text() == before

    # A damaged ledger is an error naming the file, never a fresh budget.
    path.write_text(before[: len(before) // 2])
    with pytest.raises(dpfl.DpflError, match="silo-0.ledger.json.*not a ledger"):
        make()
    # A ledger kept at another delta is refused.
    path.write_text(before)
    with pytest.raises(dpfl.DpflError, match="delta"):
        DpflClient(Shift(0.0), epsilon=eps, delta=1e-6, rounds=rounds, update_clip=0.5, ledger_path=path)


def test_an_emptied_or_damaged_ledger_is_refused_never_a_fresh_budget(tmp_path):
    """Issue 27: the Flower client's ledger is the Rust ledger; only a missing file starts a
    fresh one. An emptied release list (round 1 would be released again), a 0-byte file,
    ``[]`` and ``null`` raise ``dpfl.LedgerError`` (a ``DpflError``) naming the file."""
    from dpfl.flower import AlreadyReleased

    path = tmp_path / "silo-0.ledger.json"
    make = lambda: DpflClient(Shift(0.0), epsilon=2.0, delta=1e-5, rounds=3, update_clip=0.5,
                              ledger_path=path)
    client = make()
    params = client.get_parameters({})
    client.fit(params, {"server_round": 1})
    good = path.read_text()
    data = json.loads(good)
    data["releases"] = []
    cases = {
        "release list emptied": (json.dumps(data, indent=1), "does not match its `sha256`"),
        "0 bytes": ("", "the ledger is empty"),
        "[]": ("[]", "a JSON array"),
        "null": ("null", "a JSON null"),
        "another format": (good.replace("dpfl-ledger/2", "dpfl-flower-ledger"), "format"),
    }
    for what, (text, message) in cases.items():
        path.write_text(text)
        with pytest.raises(dpfl.LedgerError, match=f"silo-0.ledger.json.*{message}") as e:
            make()
        assert isinstance(e.value, dpfl.DpflError), what
        assert path.read_text() == text, f"{what}: left as it was"
    # The intact ledger: round 1 stays released.
    path.write_text(good)
    with pytest.raises(AlreadyReleased, match="round 1 was released already"):
        make().fit(params, {"server_round": 1})


def test_strict_makes_a_failed_reply_fail_the_round():
    from flwr.server.strategy import FedAvg as LegacyFedAvg
    from flwr.serverapp.strategy import FedAvg

    from dpfl.flower import RoundFailed, strict

    legacy = strict(LegacyFedAvg())
    with pytest.raises(RoundFailed, match="round 3 .aggregate_fit.: 1 client"):
        legacy.aggregate_fit(3, [], [RuntimeError("budget exceeded")])
    with pytest.raises(RoundFailed, match="aggregate_evaluate"):
        legacy.aggregate_evaluate(3, [], [RuntimeError("allow_evaluate")])
    s = strict(FedAvg())
    assert s.aggregate_train(1, []) == (None, None)  # nothing sent, nothing missing
    with pytest.raises(TypeError):
        strict(object())

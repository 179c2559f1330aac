"""dpfl.account's default is the CLI's (the tighter of RDP and the PLD, both shown);
get_delta / supports as dp_accounting offers them; dp_accounting's own event objects
accepted (issue 29 item 6)."""

import math

import pytest

import dpfl
import dpfl.events as ev


def _phi(x):
    return 0.5 * math.erfc(-x / math.sqrt(2.0))


def test_default_account_is_the_clis_tighter_of_rdp_and_pld(cli):
    # The demo's release: K = 30 of n = 217 with replacement, 100 rounds (issue 27: there the
    # PLD is the tighter); the CLI prints the tighter with both shown.
    args = ["--noise-multiplier", "5.657", "--delta", "2.1236e-5", "--sampling",
            "with-replacement", "--rate", str(30 / 217), "--dataset-size", "217", "--steps", "100"]
    raw = cli.json("account", *args)
    event = ev.from_dict(raw["event"])
    got = dpfl.account(event, raw["delta"])
    rdp = dpfl.account(event, raw["delta"], accountant="rdp").epsilon
    pld = dpfl.account(event, raw["delta"], accountant="pld").epsilon
    assert got.rdp_epsilon == rdp and got.pld_epsilon == pld
    assert got.epsilon == min(rdp, pld) == raw["epsilon"]
    assert got.accountant == raw["epsilon_accountant"]
    # A named accountant gives exactly its own ε, not the tighter.
    assert dpfl.account(event, raw["delta"], accountant="rdp").accountant == "rdp"


def test_default_account_names_an_accountant_that_refuses_the_event():
    # Both accountants are asked; ε is the smaller of those that answer, and one that
    # refuses the event is named under notes (never left out silently).
    got = dpfl.account(ev.ComposedDpEvent([ev.EpsilonDeltaDpEvent(0.5, 1e-7)] * 2), 1e-5)
    given = [e for e in (got.rdp_epsilon, got.pld_epsilon) if e is not None]
    assert given and got.epsilon == min(given)
    for name, e in (("rdp_epsilon", got.rdp_epsilon), ("pld_epsilon", got.pld_epsilon)):
        if e is None:
            assert name in got.notes


def test_get_delta_of_one_gaussian_is_the_analytic_value():
    # δ(ε) of one Gaussian with σ/Δ = 1 (Balle & Wang 2018 Thm 8): Φ(1/2 − ε) − e^ε Φ(−1/2 − ε)
    # at ε = 1: Φ(−0.5) − e·Φ(−1.5) = 0.30853754 − 2.71828183 × 0.06680720 = 0.12693674.
    want = _phi(-0.5) - math.e * _phi(-1.5)
    assert want == pytest.approx(0.12693674, abs=1e-8)
    assert dpfl.get_delta(ev.GaussianDpEvent(1.0), 1.0) == pytest.approx(want, rel=1e-9)
    # RDP's δ is an upper bound on the exact one.
    assert dpfl.get_delta(ev.GaussianDpEvent(1.0), 1.0, accountant="rdp") >= want


def test_get_delta_inverts_get_epsilon():
    event = ev.PoissonSampledDpEvent(0.01, ev.GaussianDpEvent(1.0))
    acc = dpfl.PldAccountant().compose(event, 1000)
    eps = acc.get_epsilon(1e-5)
    d = acc.get_delta(eps)
    # The PLD's ε at δ is the smallest grid ε with δ(ε) ≤ δ, so δ at that ε is at most δ …
    assert 0.0 < d <= 1e-5 * (1 + 1e-9)
    # … and not far below it (a grid step of ε moves δ by less than 20% here).
    assert d > 0.8e-5
    assert dpfl.PldAccountant().get_delta(1.0) == 0.0


def test_supports_and_bad_events():
    assert dpfl.PldAccountant().supports(ev.GaussianDpEvent(1.0))
    assert not dpfl.RdpAccountant().supports(object())
    with pytest.raises(dpfl.ConfigError, match="not a dpfl or dp_accounting event"):
        dpfl.account(object(), 1e-5)
    with pytest.raises(dpfl.ConfigError, match="epsilon"):
        dpfl.get_delta(ev.GaussianDpEvent(1.0), float("nan"))
    with pytest.raises(dpfl.ConfigError, match="zcdp"):
        dpfl.get_delta(ev.GaussianDpEvent(1.0), 1.0, accountant="zcdp")


def test_dp_accounting_events_are_accepted():
    dpa = pytest.importorskip("dp_accounting")
    q, z, steps, delta = 0.01, 1.1, 500, 1e-5
    theirs = dpa.SelfComposedDpEvent(
        dpa.PoissonSampledDpEvent(q, dpa.GaussianDpEvent(z)), steps
    )
    ours = ev.SelfComposedDpEvent(ev.PoissonSampledDpEvent(q, ev.GaussianDpEvent(z)), steps)
    assert ev.from_dp_accounting(theirs) == ours
    assert dpfl.account(theirs, delta, "pld").epsilon == dpfl.account(ours, delta, "pld").epsilon
    # dp_accounting's own PLD accountant on the same event agrees to its grid (add/remove).
    pld = dpa.pld.PLDAccountant(value_discretization_interval=1e-4)
    pld.compose(theirs)
    assert dpfl.account(theirs, delta, "pld").epsilon == pytest.approx(pld.get_epsilon(delta), rel=1e-2)
    acc = dpfl.RdpAccountant()
    acc.compose(dpa.NoOpDpEvent())
    acc.compose(theirs)
    assert acc.get_epsilon(delta) == dpfl.account(ours, delta, "rdp").epsilon
    for kind in (
        dpa.SampledWithReplacementDpEvent(100, 10, dpa.LaplaceDpEvent(2.0)),
        dpa.SampledWithoutReplacementDpEvent(100, 10, dpa.GaussianDpEvent(2.0)),
        dpa.ComposedDpEvent([dpa.LaplaceDpEvent(1.0), dpa.GaussianDpEvent(3.0)]),
    ):
        assert isinstance(ev.from_dp_accounting(kind), ev.DpEvent)
    with pytest.raises(dpfl.ConfigError, match="NonPrivateDpEvent"):
        dpfl.account(dpa.NonPrivateDpEvent(), delta)

"""Mechanisms on numpy arrays: seeded reproducibility, shapes, moments, grids, and
hand-computed values of QTDL's distribution and quantizer."""

import math

import numpy as np
import pytest

import dpfl


def test_gaussian_is_seeded_and_keeps_the_shape():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    a = dpfl.GaussianMechanism(2.0, 1.0, seed=5)(x)
    b = dpfl.GaussianMechanism(2.0, 1.0, seed=5)(x)
    c = dpfl.GaussianMechanism(2.0, 1.0, seed=5, stream=1)(x)
    assert a.shape == (3, 4) and a.dtype == np.float64
    assert np.array_equal(a, b)  # same (seed, stream): the same noise
    assert not np.array_equal(a, c)  # another stream: independent noise
    m = dpfl.GaussianMechanism(2.0, 1.0, seed=5)
    assert not np.array_equal(m(x), m(x))  # the generator moves on
    unseeded = dpfl.GaussianMechanism(2.0, 1.0)
    assert not np.array_equal(unseeded(x), dpfl.GaussianMechanism(2.0, 1.0)(x))


def test_gaussian_noise_has_the_stated_moments_and_event():
    m = dpfl.GaussianMechanism(3.0, 1.5, seed=1)
    noise = m(np.zeros(200_000))
    # Standard errors: mean 3/sqrt(2e5) = 0.0067, std 3/sqrt(4e5) = 0.0047; 5 of each.
    assert abs(noise.mean()) < 0.034
    assert abs(noise.std() - 3.0) < 0.024
    assert m.noise_multiplier == 2.0  # sigma / sensitivity
    assert m.event == dpfl.GaussianDpEvent(2.0)


def test_discrete_gaussian_releases_grid_points_and_accounts_the_rounding():
    gamma, dim = 0.25, 16
    m = dpfl.DiscreteGaussianMechanism(1.0, 1.0, gamma, dim, seed=3)
    out = m(np.linspace(-1, 1, dim))
    k = out / gamma
    assert np.array_equal(k, np.round(k))  # every coordinate is on the grid
    # sigma' = sigma (Δ + γ√d)/Δ = 1 + 0.25·4 = 2; the event's multiplier stays σ/Δ = 1.
    assert m.sigma == pytest.approx(2.0, rel=1e-12)
    assert m.noise_multiplier == pytest.approx(1.0, rel=1e-12)
    assert isinstance(m.event, dpfl.DiscreteGaussianDpEvent)
    with pytest.raises(dpfl.ConfigError, match="dim = 16"):
        m(np.zeros(17))


def test_invalid_parameters_are_config_errors_naming_them():
    with pytest.raises(dpfl.ConfigError) as e:
        dpfl.GaussianMechanism(-1.0, 1.0)
    assert str(e.value) == "config field `sigma`: invalid parameter `sigma` = -1: must be finite and > 0"
    with pytest.raises(dpfl.ConfigError, match="alpha"):
        dpfl.TruncatedDiscreteLaplace(3, float("nan"))


def test_tdl_pmf_and_variance_by_hand():
    # TDL(m = 2, α = ln 2): weights 1/4, 1/2, 1, 1/2, 1/4, Z = 2.5;
    # P = 0.1, 0.2, 0.4, 0.2, 0.1; variance 2(1·0.2 + 4·0.1) = 1.2.
    t = dpfl.TruncatedDiscreteLaplace(2, math.log(2), seed=11)
    assert [t.pmf(y) for y in range(-3, 4)] == pytest.approx([0, 0.1, 0.2, 0.4, 0.2, 0.1, 0], rel=1e-12)
    assert t.variance() == pytest.approx(1.2, rel=1e-12)
    draws = t.sample(50_000)
    assert draws.dtype == np.int64 and draws.shape == (50_000,)
    assert draws.min() >= -2 and draws.max() <= 2
    freq = np.bincount(draws + 2, minlength=5) / draws.size
    # Standard error of each frequency <= sqrt(0.24/5e4) = 0.0022; 5 of them.
    assert np.allclose(freq, [0.1, 0.2, 0.4, 0.2, 0.1], atol=0.011)
    assert np.array_equal(dpfl.TruncatedDiscreteLaplace(2, math.log(2), seed=11).sample((5, 4)).ravel(), draws[:20])


def test_quantizer_by_hand_and_unbiased():
    q = dpfl.StochasticQuantizer(4, seed=2)
    # Grid points are kept; values beyond [-1, 1] are clamped.
    assert q(np.array([1.0, -1.0, 0.0, 0.5, -0.25, -3.0])).tolist() == [4, -4, 0, 2, -1, -4]
    levels = q(np.full((100, 1000), 0.3))
    assert levels.shape == (100, 1000)
    assert set(np.unique(levels)) == {1, 2}  # 0.3·4 = 1.2 rounds to 1 or 2
    # E[k/s] = 0.3; std of the mean of 1e5 draws: sqrt(0.16)/4/sqrt(1e5) = 3.2e-4; 5 of them.
    assert abs(levels.mean() / 4 - 0.3) < 0.0016
    with pytest.raises(dpfl.ConfigError, match="not finite"):
        q(np.array([0.0, np.nan]))


def test_theorem1_matches_the_rust_tests_hand_value():
    # crates/dpfl-privacy/src/qtdl/theorem1.rs: ε = 0.3, Δ₁ = Δ∞ = 2 gives m = 3.
    m, alpha, ln_delta = dpfl.qtdl_theorem1(0.3, 2.0, 2.0, 1)
    assert m == 3
    assert alpha <= 0.3 / 2.0
    assert ln_delta < 0
    with pytest.raises(dpfl.ConfigError, match="Theorem 1"):
        dpfl.qtdl_theorem1(0.37, 2.0, 2.0, 1)

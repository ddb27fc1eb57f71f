"""Presets reproduce the seeds' settings (values hard-coded from the seed text, lines cited)."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dpmcmc.models import PRESETS, Preset, preset, preset_settings


@functools.lru_cache(maxsize=None)
def _built(name, n):
    """``preset(name, n=n)``, built once per module: the tests below only read it."""
    return preset(name, n=n)

# 001 (seeds/001_80a6669f238e964e.txt) Table 5.1, lines 1042-1050:
# Name | d | n | n_0 | a | sigma_0^2
TABLE_5_1 = {
    "thesis-flat-banana-2d": (2, 100000, None, 20.0, 1000.0),
    "thesis-flat-banana-10d": (10, 200000, None, 20.0, 1000.0),
    "thesis-tempered-banana-2d": (2, 100000, 1000, 20.0, 1000.0),
    "thesis-tempered-banana-10d": (10, 200000, 1000, 20.0, 1000.0),
    "thesis-gauss-30d": (30, 200000, None, 0.0, 1000.0),
    "thesis-narrow-banana": (2, 150000, None, 350.0, 1000.0),
    "thesis-correlated-gauss": (2, 200000, None, 0.0, 100.0),
    "thesis-circle": (2, 100000, None, 1e-5, None),
}


def test_names():
    assert set(TABLE_5_1) | {"banana-2d", "gaussian-10d"} <= set(PRESETS)
    with pytest.raises(ValueError, match="unknown preset"):
        preset("banana")
    with pytest.raises(TypeError, match="key"):
        preset("banana-2d", n=10, key=3)
    with pytest.raises(ValueError, match="n must"):
        preset("banana-2d", n=0)


@pytest.mark.parametrize("name", sorted(TABLE_5_1))
def test_thesis_rows_match_table(name):
    d, n_table, n0, a, s0 = TABLE_5_1[name]
    p = _built(name, 2000)
    assert isinstance(p, Preset) and p.name == name
    s = p.settings
    assert (s["dim"], s["n_table"], s["n0"], s["a"], s["sigma0_sq"]) == (d, n_table, n0, a, s0)
    assert p.model.dim == d and s["n"] == 2000 and p.data.shape[0] == 2000
    assert p.model.temperature == pytest.approx(1.0 if n0 is None else n0 / 2000)
    # 001 line 1071 (§6.3): delta = 0.1 / n; line 1025 (§5.4): 20 chains.
    assert s["delta"] == pytest.approx(0.1 / 2000)
    assert s["chains"] == 20 and s["burn_in_fraction"] == 0.5
    md = p.model.metadata
    if name == "thesis-circle":
        assert md["a"] == 1e-5 and p.theta_true is None
        np.testing.assert_allclose(p.posterior_mean, [0.0, 0.0])
    else:
        # 001 line 1023: theta_2 = 3, other components 0.
        expected = np.zeros(d)
        expected[1] = 3.0
        np.testing.assert_array_equal(np.asarray(p.theta_true), expected)
    if md["family"] == "banana":
        # 001 line 1019: b = m = 0; sigma_1^2 = 20, sigma_2^2 = 2.5, sigma_i^2 = 1 for i > 2.
        assert md["a"] == a and md["b"] == 0.0 and md["m"] == 0.0 and md["sigma0_sq"] == s0
        assert md["sigma_sq"] == (20.0, 2.5) + (1.0,) * (d - 2)
    if name == "thesis-correlated-gauss":
        # 001 line 1019-1021: likelihood covariance [[1, 0.999], [0.999, 1]], sigma_0^2 = 100.
        np.testing.assert_array_equal(md["cov"], [[1.0, 0.999], [0.999, 1.0]])
        np.testing.assert_allclose(md["prior_cov"], 100.0 * np.eye(2))


# slow: the flat and narrow bananas (2-d and 10-d), the 2-d tempered banana and the correlated
# Gauss, each a compiled sampler of its own (~0.3 CPU-s); guard in default: the 10-d tempered
# banana, the 30-d Gauss and the circle, one preset per family through the same Preset wiring
# (presets._finish: the model's exact_posterior on the preset's data, its posterior_mean of
# them), whose samplers' laws test_models.py checks against closed forms.
_POSTERIOR_DEFAULT = ("thesis-tempered-banana-10d", "thesis-gauss-30d", "thesis-circle")


@pytest.mark.parametrize("name", [n if n in _POSTERIOR_DEFAULT else pytest.param(n, marks=pytest.mark.slow)
                                  for n in sorted(TABLE_5_1)])
def test_thesis_exact_draws_agree_with_the_posterior_mean(name):
    # 6 standard errors per coordinate: a false alarm has probability < 2e-9 per coordinate
    # (at most 30 coordinates) with the fixed key, the draws being exact.
    p = _built(name, 2000)
    d = TABLE_5_1[name][0]
    # Jitted: one compiled program, not one per operation.
    draws = jax.jit(lambda k: p.posterior_sampler(k, 4000))(jax.random.key(0))
    assert draws.shape == (4000, d)
    se = np.asarray(draws).std(0) / np.sqrt(4000)
    assert np.all(np.abs(np.asarray(draws).mean(0) - np.asarray(p.posterior_mean)) < 6 * se + 1e-12)


def test_default_n_and_tempering():
    p = preset("thesis-tempered-banana-2d")
    assert p.data.shape == (100000, 2)
    assert p.model.temperature == pytest.approx(1000 / 100000)
    assert p.settings["delta"] == pytest.approx(1e-6)


def test_banana_2d_paper_settings():
    # 000 (seeds/000_a2c51dd5ed510720.txt) line 319: sigma_1^2 = 2000, sigma_2^2 = 2500, a = 20,
    # n = 100000, theta = (0, 3); line 358: clip bounds 0.1 (DP-HMC) and 0.15 (DP-penalty);
    # line 329: 4 chains, 1000 reference draws, delta = 0.1 / n.
    p = preset("banana-2d")
    md = p.model.metadata
    assert p.data.shape == (100000, 2)
    assert md["sigma_sq"] == (2000.0, 2500.0) and md["a"] == 20.0 and md["sigma0_sq"] == 1000.0
    np.testing.assert_array_equal(np.asarray(p.theta_true), [0.0, 3.0])
    s = p.settings
    assert s["clip"] == {"dp-hmc": 0.1, "dp-penalty": 0.15}
    assert s["chains"] == 4 and s["reference_draws"] == 1000 and s["delta"] == pytest.approx(1e-6)
    assert p.model.temperature == 1.0
    assert s["algorithms"]["dp-hmc"]["leapfrog_steps"] == 25


def test_gaussian_10d_paper_settings():
    # 000 line 309: d = 10, n = 100000, mu_0 = 0, sigma_0 = 100; line 358: clips 6 and 10.
    p = _built("gaussian-10d", 2000)  # as test_curved_banana_presets_... builds it
    md = p.model.metadata
    assert p.model.dim == 10 and p.data.shape == (2000, 10)
    np.testing.assert_allclose(md["prior_cov"], 1e4 * np.eye(10))
    np.testing.assert_array_equal(md["prior_mean"], np.zeros(10))
    assert np.all(np.linalg.eigvalsh(md["cov"]) > 0)
    assert p.settings["clip"] == {"dp-hmc": 6.0, "dp-penalty": 10.0}
    # The covariance is fixed: it does not change with the data key.
    q = preset("gaussian-10d", n=2000, key=jax.random.key(1))  # p's n: no new shapes to compile
    np.testing.assert_array_equal(q.model.metadata["cov"], md["cov"])


# slow (suite budget, stop 41: 20000 exact draws and the posterior covariance, ~0.4 CPU-s): guard
# in default: test_thesis_exact_draws_agree_with_the_posterior_mean[thesis-gauss-30d] (the
# Gaussian family's exact posterior sampler, through the same Preset wiring, against its
# closed-form mean) and test_models.py's closed-form checks of the Gaussian posterior.
@pytest.mark.slow
def test_gaussian_10d_exact_draws_agree_with_the_posterior_mean():
    p = _built("gaussian-10d", 2000)
    # Exact posterior draws agree with the closed-form mean.
    draws = np.asarray(jax.jit(lambda k: p.posterior_sampler(k, 20000))(jax.random.key(2)))
    cov = np.asarray(p.model.metadata["posterior_cov"](p.data))
    assert np.all(np.abs(draws.mean(0) - np.asarray(p.posterior_mean)) < 5 * np.sqrt(np.diag(cov) / 20000))


def test_gmm_2d_settings():
    # 002 (seeds/002_7ad18a709a43fde2.txt) line 321: sigma_1^2 = 10, sigma_2^2 = 1,
    # sigma_x^2 = 2, theta = (0, 1), 10^6 samples, b = 1000, N0 = 100.
    p = preset("gmm-2d", n=10000)
    md = p.model.metadata
    assert md["prior_var"] == (10.0, 1.0) and md["sigma_x_sq"] == 2.0
    np.testing.assert_array_equal(np.asarray(p.theta_true), [0.0, 1.0])
    assert p.settings["batch_size"] == 1000 and p.settings["n0"] == 100
    assert p.model.temperature == pytest.approx(100 / 10000)
    assert p.posterior_sampler is None and p.posterior_mean is None


def test_curved_banana_presets_leave_the_batch_functions_to_autodiff():
    # Their row-major batch functions measured 2–6× slower per DP-HMC / DP-penalty iteration
    # than the column-major autodiff path grad_method="auto" takes without them.
    # The 10-d Gaussian's row-major gradient measured 1.35–1.45× slower than autodiff, and with its
    # ratio function alone the row-major layout made DP-HMC 4× the hand-written limit.
    # The 2-parameter circle and correlated Gauss: DP-HMC 11× and 2.6× faster per iteration
    # through per-record gradients than through the factories' batch functions.
    # n = 2000: the thesis presets test_thesis_rows_match_table built.
    for name in ("banana-2d", "gaussian-10d", "thesis-circle", "thesis-correlated-gauss",
                 *(k for k, row in TABLE_5_1.items() if "banana" in k)):
        model = _built(name, 2000).model
        assert model.log_likelihood_batch is None and model.grad_log_likelihood_batch is None, name
    # a = 0 (30-d Gauss): the supplied ratio pass is the faster one, so it is kept.
    gauss = _built("thesis-gauss-30d", 2000).model
    assert gauss.log_likelihood_batch is not None and gauss.grad_log_likelihood_batch is not None


def test_reproducible_data():
    # n = 2000, the size test_thesis_rows_match_table built: no new shapes to compile.
    a = _built("thesis-narrow-banana", 2000)
    b = preset("thesis-narrow-banana", n=2000)
    c = preset("thesis-narrow-banana", n=2000, key=jax.random.key(99))
    np.testing.assert_array_equal(np.asarray(a.data), np.asarray(b.data))
    assert not np.allclose(np.asarray(a.data), np.asarray(c.data))
    assert a.data.dtype == jnp.float64


def test_preset_settings_are_the_presets_settings_without_their_data():
    thesis = [name for name in PRESETS if name.startswith("thesis-")]
    assert len(thesis) == 8
    for name in thesis:
        # n = 2000: above every tempered preset's n0 = 1000, small enough to build quickly.
        assert preset_settings(name, 2000) == _built(name, 2000).settings, name
    assert preset_settings("thesis-circle")["n"] == 100000  # the table's n by default
    assert preset_settings("banana-2d", 500) == preset("banana-2d", n=500).settings
    with pytest.raises(ValueError, match="n0"):
        preset_settings("thesis-tempered-banana-2d", 999)
    with pytest.raises(ValueError, match="unknown preset"):
        preset_settings("no-such-preset")

"""``summary()``: the global GLM's header figures against statsmodels' GLM, the
text, and the families' log-likelihoods (``Family.loglike``)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from numpy.testing import assert_allclose
from scipy import integrate
from scipy.special import gammaln, logsumexp
from sklearn.exceptions import NotFittedError

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph.glm._summary import GLMSummary
from autoglm_graph.glm._tweedie_series import _log_wright_series
from autoglm_graph.glm.families import (
    BinomialFamily,
    GammaFamily,
    GaussianFamily,
    NegativeBinomialFamily,
    PoissonFamily,
    TweedieFamily,
)

GLM_ONLY = dict(alpha=0.0, local_penalty=np.inf, device="cpu")
LINKS = sm.families.links
SM_FAMILIES = {
    "gaussian": lambda: sm.families.Gaussian(),
    "poisson": lambda: sm.families.Poisson(),
    "gamma": lambda: sm.families.Gamma(LINKS.Log()),
    "binomial": lambda: sm.families.Binomial(),
}
#: The header's figures and statsmodels' GLMResults attribute for each.
FIGURES = {
    "deviance": "deviance",
    "null_deviance": "null_deviance",
    "log_likelihood": "llf",
    "aic": "aic",
    "bic": "bic_llf",
    "scale": "scale",
    "df_resid": "df_resid",
    "pearson_chi2": "pearson_chi2",
}


def _data(family: str, n: int = 300, seed: int = 0):
    """X with unequal means and scales, an offset, y from a known GLM."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * [1.0, 2.0, 0.5] + [0.0, 1.0, 3.0]
    offset = rng.normal(0.0, 0.3, size=n)
    eta = 0.2 + X @ [0.3, -0.2, 0.1] + offset
    mu = np.exp(eta)
    y = {
        "gaussian": lambda: eta + rng.normal(size=n),
        "poisson": lambda: rng.poisson(mu),
        "gamma": lambda: rng.gamma(2.0, mu / 2.0),
        "binomial": lambda: (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(int),
    }[family]()
    return X, y, offset, rng.uniform(0.5, 2.0, size=n)


def _fit(family: str, X, y, **fit_params):
    if family == "binomial":
        model = GraphGLMClassifier(**GLM_ONLY)
    else:
        model = GraphGLMRegressor(family=family, balance=False, **GLM_ONLY)
    return model.fit(X, y, **fit_params)


def _statsmodels(family, X, y, offset=None, weights=None, kind="variance"):
    key = "var_weights" if kind == "variance" else "freq_weights"
    weight_kw = {} if weights is None else {key: weights}
    return sm.GLM(
        y,
        sm.add_constant(X),
        family=SM_FAMILIES[family](),
        offset=offset,
        **weight_kw,
    ).fit(tol=1e-12)


def _assert_figures(header: dict, result) -> None:
    for key, attribute in FIGURES.items():
        assert_allclose(header[key], getattr(result, attribute), rtol=1e-5, err_msg=key)


@pytest.mark.parametrize(
    ("family", "with_offset"),
    [("gaussian", False), ("poisson", True), ("gamma", True), ("binomial", False)],
)
def test_header_matches_statsmodels(family, with_offset):
    X, y, offset, _ = _data(family)
    offset = offset if with_offset else None
    model = _fit(family, X, y, offset=offset)
    summary = model.summary(X, y, offset=offset)
    result = _statsmodels(family, X, y, offset)
    _assert_figures(summary.header, result)
    assert summary.header["n_obs"] == 300
    assert summary.header["n_params"] == 4
    assert summary.header["df_model"] == result.df_model
    assert_allclose(
        summary.header["d2"], 1 - result.deviance / result.null_deviance, rtol=1e-6
    )
    # The coefficients are coef_table's (its standard errors, not recomputed).
    table = model.coef_table(X, y, offset=offset)
    pd.testing.assert_frame_equal(summary.coefficients, table)
    assert_allclose(summary.coefficients["coef"], result.params, rtol=1e-5)


def test_null_deviance_is_fitted_with_a_non_canonical_link_and_offset():
    # Gamma with its log link and an offset: the null model's mean is not the
    # weighted mean of y; statsmodels fits it.
    X, y, offset, w = _data("gamma")
    model = _fit("gamma", X, y, offset=offset, sample_weight=w)
    header = model.summary(X, y, sample_weight=w, offset=offset).header
    result = _statsmodels("gamma", X, y, offset, w)
    naive = sm.families.Gamma(LINKS.Log()).deviance(
        y, np.full_like(y, np.average(y, weights=w)), var_weights=w
    )
    assert abs(naive - result.null_deviance) > 1e-3 * result.null_deviance
    _assert_figures(header, result)
    assert header["sum_weights"] == pytest.approx(w.sum())


@pytest.mark.parametrize("family", ["gaussian", "poisson"])
def test_frequency_weights_match_statsmodels(family):
    X, y, _offset, _ = _data(family)
    w = np.random.default_rng(1).integers(1, 4, size=y.shape[0]).astype(float)
    model = _fit(family, X, y, sample_weight=w)
    summary = model.summary(X, y, sample_weight=w, weights="frequency")
    result = _statsmodels(family, X, y, weights=w, kind="frequency")
    _assert_figures(summary.header, result)
    assert summary.header["n_obs"] == pytest.approx(w.sum())


def test_text_has_the_statsmodels_figures():
    X, y, offset, _ = _data("poisson")
    model = _fit("poisson", X, y, offset=offset)
    summary = model.summary(X, pd.Series(y, name="claims"), offset=offset)
    text = str(summary)
    for word in ("poisson", "log", "Deviance", "Null Deviance", "AIC", "BIC"):
        assert word in text
    for word in ("Log-Likelihood", "Scale", "No. Observations", "Df Residuals"):
        assert word in text
    assert "claims" in text  # the target's name
    assert "x0" in text and "P>|z|" in text
    assert "local_penalty=inf" in text  # why the network was dropped
    assert summary.header["network"] == "dropped"
    assert repr(summary) == text
    assert "<table>" in summary._repr_html_()


def test_a_kept_network_is_named_in_a_footnote():
    X, y, _, _ = _data("poisson", n=400)
    model = GraphGLMRegressor(
        family="poisson", max_epochs=2, early_stopping=False, random_state=0
    ).fit(X, y)
    if model.network_ is None:
        pytest.skip("the network was dropped on this data")
    summary = model.summary(X, y)
    assert summary.header["network"] == "kept"
    assert summary.header["global_only_reason"] is None
    assert "The network was kept" in str(summary)
    assert "local_coef" in str(summary)


def test_multinomial_runs_with_reference_class_blocks():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    noisy = X + rng.normal(size=X.shape)
    y = np.array(["a", "b", "c"])[(noisy[:, 0] > 0).astype(int) + (noisy[:, 1] > 0.5)]
    model = GraphGLMClassifier(**GLM_ONLY).fit(X, y)
    summary = model.summary(X, y)
    classes = summary.coefficients.index.get_level_values(0).unique()
    assert len(classes) == 2  # K - 1 blocks: one class is the reference
    assert summary.header["family"] == "multinomial"
    assert summary.header["n_params"] == 2 * 3
    assert summary.header["df_resid"] == 300 - 6
    result = sm.MNLogit(pd.Categorical(y).codes, sm.add_constant(X)).fit(disp=0)
    assert_allclose(summary.header["log_likelihood"], result.llf, rtol=1e-5)
    assert_allclose(summary.header["aic"], result.aic, rtol=1e-5)
    assert_allclose(summary.header["deviance"], -2 * result.llf, rtol=1e-5)
    assert_allclose(summary.header["null_deviance"], -2 * result.llnull, rtol=1e-5)
    assert sum(line.startswith("class=") for line in str(summary).splitlines()) == 2


def test_tweedie_power_above_two_has_no_log_likelihood():
    X, y, _, _ = _data("gamma")
    model = GraphGLMRegressor(family="tweedie", power=3.0, **GLM_ONLY).fit(X, y)
    summary = model.summary(X, y)
    assert np.isnan(summary.header["log_likelihood"])
    assert np.isnan(summary.header["aic"])
    assert summary.header["power"] == 3.0
    assert "log-likelihood is not available" in str(summary)


def test_unfitted_estimator_raises():
    X, y, _, _ = _data("poisson", n=20)
    with pytest.raises(NotFittedError, match="not fitted yet"):
        GraphGLMRegressor().summary(X, y)


def test_summary_object_is_returned():
    X, y, _, _ = _data("gaussian", n=50)
    summary = _fit("gaussian", X, y).summary(X, y, alpha=0.1)
    assert isinstance(summary, GLMSummary)
    assert "[0.05" in str(summary) and "0.95]" in str(summary)


# ----------------------------------------------------------- Family.loglike
@pytest.mark.parametrize(
    ("ours", "theirs"),
    [
        (GaussianFamily(), sm.families.Gaussian()),
        (PoissonFamily(), sm.families.Poisson()),
        (GammaFamily(), sm.families.Gamma(LINKS.Log())),
        (BinomialFamily(), sm.families.Binomial()),
        (NegativeBinomialFamily(0.5), sm.families.NegativeBinomial(alpha=0.5)),
        (TweedieFamily(1.0), sm.families.Tweedie(var_power=1.0, link=LINKS.Log())),
        (TweedieFamily(1.5), sm.families.Tweedie(var_power=1.5, link=LINKS.Log())),
        (TweedieFamily(2.0), sm.families.Tweedie(var_power=2.0, link=LINKS.Log())),
    ],
    ids=[
        "gaussian",
        "poisson",
        "gamma",
        "binomial",
        "negative_binomial",
        "tweedie-1",
        "tweedie-1.5",
        "tweedie-2",
    ],
)
def test_loglike_matches_statsmodels(ours, theirs):
    rng = np.random.default_rng(0)
    mu = rng.gamma(2.0, 1.0, size=60) + 0.1
    y = {
        "gaussian": lambda: rng.normal(mu),
        "gamma": lambda: rng.gamma(2.0, mu / 2.0),
        "binomial": lambda: (rng.random(60) < 0.4).astype(float),
        "tweedie": lambda: rng.poisson(mu) * rng.gamma(2.0, 0.5, size=60),
    }.get(ours.name, lambda: rng.poisson(mu).astype(float))()
    if getattr(ours, "power", 0) == 2:  # y > 0
        y = rng.gamma(2.0, mu / 2.0)
    if ours.name == "binomial":
        mu = mu / (1 + mu)
    v = rng.uniform(0.5, 2.0, size=60)
    f = rng.integers(1, 4, size=60).astype(float)
    for scale in (1.0, 1.7):
        assert_allclose(
            ours.loglike(y, mu, var_weights=v, scale=scale),
            theirs.loglike(y, mu, var_weights=v, scale=scale),
            rtol=1e-12,
        )
        assert_allclose(
            ours.loglike(y, mu, freq_weights=f, scale=scale),
            theirs.loglike(y, mu, freq_weights=f, scale=scale),
            rtol=1e-12,
        )


@pytest.mark.parametrize("power", [1.05, 1.5, 1.9])
@pytest.mark.parametrize(("mu", "phi"), [(0.05, 0.05), (1.0, 1.0), (30.0, 0.05)])
def test_tweedie_density_integrates_to_one(power, mu, phi):
    family = TweedieFamily(power)

    def density(y: float) -> float:
        return float(
            np.exp(family.loglike_obs(np.array([y]), np.array([mu]), None, phi))[0]
        )

    sd = np.sqrt(phi * mu**power)
    # On the log scale (the density has an integrable peak at y = 0+).
    log_points = sorted(
        {np.log(mu), np.log(mu + 2 * sd), np.log(max(mu - 2 * sd, 1e-8))}
    )
    upper = np.log(mu + 80 * sd + 50)
    mass, _ = integrate.quad(
        lambda s: density(np.exp(s)) * np.exp(s),
        -200.0,
        upper,
        points=log_points,
        limit=2000,
        epsabs=1e-13,
        epsrel=1e-12,
    )
    assert density(0.0) + mass == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("a", [0.05, 1.0, 4.0, 99.0])
def test_tweedie_series_equals_the_whole_sum(a):
    # The windowed series against every term up to k = 20000, summed in log
    # space. With a = 99 (power 1.01) scipy's log_wright_bessel is -inf at the
    # smallest x, and x itself overflows at the largest; the window is exact.
    # x whose largest term is at k = 0.001 (below the first), 1, ..., 2000.
    k_top = np.array([1e-3, 1.0, 10.0, 100.0, 2000.0])
    log_x = (1 + a) * np.log(k_top) + a * np.log(a)
    k = np.arange(1, 20001, dtype=float)[:, None]
    terms = k * log_x - gammaln(k + 1) - gammaln(a * k)
    whole = logsumexp(terms, axis=0)
    assert np.all(np.isfinite(whole))
    assert_allclose(_log_wright_series(a, log_x), whole, rtol=1e-12, atol=1e-12)

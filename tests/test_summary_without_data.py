"""``summary()``, ``coef_table()`` and ``wald_test_terms()`` without data: the
global GLM's figures on the training rows, kept at the end of ``fit`` (and in
the model file), are those the calls with the training rows give."""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save

from autoglm_graph import FitPolicy, GraphGLMClassifier, GraphGLMRegressor, load
from autoglm_graph.datasets import make_varying_coefficients

GLM_ONLY = dict(local_penalty=np.inf, device="cpu")
OPTIONS = [
    dict(cov_type=cov_type, weights=weights)
    for cov_type in ("fisher", "sandwich")
    for weights in ("variance", "frequency")
]
RTOL = 1e-10


def _frame(n: int = 300, seed: int = 0):
    """A numeric and a categorical column, an offset and row weights."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(
        {
            "x0": rng.normal(size=n),
            "x1": rng.normal(1.0, 2.0, size=n),
            "g": rng.choice(list("abc"), n),
        }
    )
    eta = 0.2 + 0.3 * X.x0 - 0.1 * X.x1 + 0.2 * (X.g == "b").to_numpy()
    offset = rng.normal(0.0, 0.2, size=n)
    weight = rng.uniform(0.5, 2.0, size=n)
    return X, eta.to_numpy(), offset, weight, rng


def _case(name: str):
    """(estimator, X, y, sample_weight, offset) for one family."""
    X, eta, offset, weight, rng = _frame()
    mu = np.exp(eta + offset)
    if name == "binomial_proportions":  # successes / trials, weight = trials
        trials = rng.integers(1, 6, size=len(X)).astype(float)
        p = 1 / (1 + np.exp(-(eta + offset)))
        y = rng.binomial(trials.astype(int), p) / trials
        return GraphGLMRegressor(family="binomial", **GLM_ONLY), X, y, trials, offset
    if name == "binomial":
        p = 1 / (1 + np.exp(-(eta + offset)))
        y = np.where(rng.random(len(X)) < p, "yes", "no")
        return GraphGLMClassifier(**GLM_ONLY), X, y, weight, offset
    if name == "multinomial":
        noisy = eta + rng.normal(size=len(X))
        y = np.array(["a", "b", "c"])[np.digitize(noisy, [0.0, 0.5])]
        return GraphGLMClassifier(**GLM_ONLY), X, y, weight, None
    y = {
        "gaussian": lambda: eta + offset + rng.normal(size=len(X)),
        "poisson": lambda: rng.poisson(mu),
        "gamma": lambda: rng.gamma(2.0, mu / 2.0),
        "tweedie": lambda: rng.poisson(mu) * rng.gamma(2.0, 0.5, size=len(X)),
        "negative_binomial": lambda: rng.negative_binomial(2.0, 2.0 / (2.0 + mu)),
    }[name]()
    family = {"negative_binomial": dict(theta=None)}.get(name, {})
    model = GraphGLMRegressor(family=name, **family, **GLM_ONLY)
    return model, X, pd.Series(y, name="target"), weight, offset


FAMILIES = [
    "gaussian",
    "poisson",
    "gamma",
    "tweedie",
    "negative_binomial",
    "binomial_proportions",
    "binomial",
    "multinomial",
]


def _assert_close(a, b, what: str) -> None:
    if isinstance(a, str) or a is None or isinstance(a, (bool, np.bool_)):
        assert a == b, what
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), what
    else:  # a matrix's entries to RTOL of its largest
        atol = RTOL * np.max(np.abs(b)) if np.ndim(b) == 2 else 0
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=atol, err_msg=what)


def _assert_same_frame(stored: pd.DataFrame, given: pd.DataFrame) -> None:
    """Equal to ``RTOL``; p-values on the log scale: a p-value of 1e-28 moves
    by ``chi2 / 2`` times the relative rounding of its statistic."""
    pd.testing.assert_frame_equal(
        stored.drop(columns="p_value"),
        given.drop(columns="p_value"),
        check_exact=False,
        rtol=RTOL,
        atol=0,
    )
    np.testing.assert_allclose(
        np.log(stored["p_value"]), np.log(given["p_value"]), rtol=RTOL, atol=1e-12
    )


def _assert_same_table(stored: pd.DataFrame, given: pd.DataFrame) -> None:
    _assert_same_frame(stored, given)
    assert set(stored.attrs) == set(given.attrs)
    for key, value in given.attrs.items():
        _assert_close(stored.attrs[key], value, key)


def _assert_same_summary(stored, given) -> None:
    assert stored.title == given.title
    assert stored.notes == given.notes
    assert set(stored.header) == set(given.header)
    for key, value in given.header.items():
        _assert_close(stored.header[key], value, key)
    _assert_same_table(stored.coefficients, given.coefficients)
    assert str(stored).splitlines()[:3] == str(given).splitlines()[:3]


def _assert_same_everywhere(model, data: dict, other=None) -> None:
    """``model``'s (or ``other``'s, a loaded copy) calls without data are
    ``model``'s with ``data``, the training rows, for every option."""
    other = model if other is None else other
    for options in OPTIONS:
        _assert_same_table(
            other.coef_table(**options, alpha=0.1),
            model.coef_table(**data, **options, alpha=0.1),
        )
        _assert_same_frame(
            other.wald_test_terms(**options), model.wald_test_terms(**data, **options)
        )
        _assert_same_summary(other.summary(**options), model.summary(**data, **options))


@pytest.fixture(scope="module", params=FAMILIES)
def fitted(request):
    model, X, y, weight, offset = _case(request.param)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. a gamma target's rounding
        model.fit(X, y, sample_weight=weight, offset=offset)
    data = dict(X=X, y=y, sample_weight=weight, offset=offset)
    return model, data


def test_without_data_equals_the_training_rows(fitted):
    model, data = fitted
    _assert_same_everywhere(model, data)


def test_after_save_and_load(fitted, tmp_path):
    model, data = fitted
    loaded = load(model.save(tmp_path / "model.zip"))
    _assert_same_everywhere(model, data, loaded)
    pd.testing.assert_frame_equal(loaded.coef_table(), model.coef_table())


def test_without_weights_and_offset():
    model, X, y, _, _ = _case("gamma")
    model.fit(X, y)
    _assert_same_everywhere(model, dict(X=X, y=y))
    assert model.summary().header["sum_weights"] is None


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("poisson", dict(fit_intercept=False)),
        ("multinomial", dict(fit_intercept=False)),
        ("poisson", dict(categorical_coding="all_levels")),  # unidentified levels
        ("gamma", dict(balance=True)),  # a balance shift off the solved intercept
    ],
    ids=["no-intercept", "multinomial-no-intercept", "all-levels", "balanced"],
)
def test_other_parametrisations(name, params, tmp_path):
    model, X, y, weight, offset = _case(name)
    model.set_params(**params).fit(X, y, sample_weight=weight, offset=offset)
    data = dict(X=X, y=y, sample_weight=weight, offset=offset)
    _assert_same_everywhere(model, data)
    _assert_same_everywhere(model, data, load(model.save(tmp_path / "m.zip")))


def test_the_target_name_is_kept():
    model, X, y, _, _ = _case("poisson")
    model.fit(X, y.rename("claims"))
    assert model.summary().header["dep_variable"] == "claims"
    model.fit(X, y.to_numpy())
    assert model.summary().header["dep_variable"] == "y"


def test_a_formula_fit():
    X, eta, offset, weight, rng = _frame()
    frame = X.assign(y=rng.poisson(np.exp(eta + offset)))
    model = GraphGLMRegressor(family="poisson", formula="y ~ x0 + C(g)", **GLM_ONLY)
    model.fit(frame, sample_weight=weight, offset=offset)
    data = dict(X=frame, y=frame.y, sample_weight=weight, offset=offset)
    _assert_same_everywhere(model, data)
    # X alone carries the formula's target, as in fit(X).
    _assert_same_table(
        model.coef_table(frame, sample_weight=weight, offset=offset),
        model.coef_table(),
    )
    assert model.summary().header["dep_variable"] == "y"


def test_a_gam():
    X, _, offset, weight, rng = _frame(n=400)
    y = rng.poisson(np.exp(np.sin(X.x1) + offset))
    model = GraphGLMRegressor(family="poisson", splines=True, **GLM_ONLY)
    model.fit(X, y, sample_weight=weight, offset=offset)
    assert "x1_s1" in model.feature_names_out_.tolist()
    _assert_same_everywhere(model, dict(X=X, y=y, sample_weight=weight, offset=offset))


def test_the_gam_fallback_stores_the_gams_table():
    rng = np.random.default_rng(0)
    n = 1500
    X = pd.DataFrame(
        {
            "age": rng.uniform(18, 80, n),
            "d": rng.normal(size=n),
            "r": rng.choice(list("abc"), n),
        }
    )
    y = rng.poisson(np.exp(0.6 * np.sin(X.age / 8) + 0.2 * X.d))
    model = GraphGLMRegressor(
        family="poisson",
        local_penalty=1e6,  # the network is trained and dropped
        hidden_channels=8,
        heads=2,
        max_epochs=3,
        random_state=0,
        device="cpu",
        fit_policy=FitPolicy(fallback="gam"),
    ).fit(X, y)
    assert "the GAM" in model.global_only_reason_
    assert "age_s1" in model.coef_table().index
    _assert_same_everywhere(model, dict(X=X, y=y))


def test_a_kept_network_and_its_balance():
    X, y, _ = make_varying_coefficients(
        600, 3, n_groups=3, family="poisson", random_state=0
    )
    offset = np.random.default_rng(0).normal(0.0, 0.1, size=len(y))
    model = GraphGLMRegressor(
        family="poisson",
        hidden_channels=16,
        heads=2,
        max_epochs=10,
        random_state=0,
        device="cpu",
    ).fit(X, y, offset=offset)
    assert model.network_ is not None, model.global_only_reason_
    assert model.balance_correction_ != 0.0
    _assert_same_everywhere(model, dict(X=X, y=y, offset=offset))


def test_the_statistics_are_not_per_row(fitted):
    """p x p matrices (p the table's coefficients) and scalars, nothing
    that grows with the rows."""
    model, _ = fitted
    n_coef = len(model.coef_table())
    stats = model.glm_statistics_
    arrays = [v for v in vars(stats).values() if isinstance(v, np.ndarray)]
    arrays += [
        a
        for v in vars(stats).values()
        if isinstance(v, dict)
        for a in v.values()
        if isinstance(a, np.ndarray)
    ]
    assert arrays
    assert all(a.shape == (n_coef, n_coef) for a in arrays)
    others = [v for v in vars(stats).values() if not isinstance(v, (np.ndarray, dict))]
    assert all(np.ndim(v) == 0 for v in others)


# ------------------------------------------------------------- the arguments
@pytest.fixture(scope="module")
def poisson():
    model, X, y, weight, offset = _case("poisson")
    return model.fit(X, y, sample_weight=weight, offset=offset), X, y, weight, offset


@pytest.mark.parametrize("method", ["summary", "coef_table", "wald_test_terms"])
def test_some_but_not_all_of_the_data_is_refused(poisson, method):
    model, X, y, weight, _ = poisson
    call = getattr(model, method)
    with pytest.raises(ValueError, match="X without y"):
        call(X)
    with pytest.raises(ValueError, match="y without X"):
        call(y=y)
    with pytest.raises(ValueError, match="sample_weight or offset without X and y"):
        call(sample_weight=weight)


def test_other_rows_are_reported_on(poisson):
    model, X, y, weight, _ = poisson
    with pytest.warns(UserWarning, match="not stationary"):
        table = model.coef_table(X[:150], y[:150], weight[:150], np.zeros(150))
    assert table["std_err"].iloc[1] > 1.2 * model.coef_table()["std_err"].iloc[1]
    with pytest.warns(UserWarning, match="not stationary"):
        header = model.summary(X[:150], y[:150]).header
    assert header["n_obs"] == 150
    assert model.summary().header["n_obs"] == len(X)


# ------------------------------------------------------- a file from before
def _reseal(path):
    import hashlib

    members = ("model.json", "tensors.safetensors", "preprocessor.skops")
    lines = [
        f"{hashlib.sha256((path / m).read_bytes()).hexdigest()}  {m}\n" for m in members
    ]
    (path / "checksums.sha256").write_text("".join(lines))


def _forget_statistics(path) -> None:
    """Make ``path`` a file of the format before the statistics were kept."""
    config = json.loads((path / "model.json").read_text())
    config["fitted"].pop("glm_statistics")
    (path / "model.json").write_text(json.dumps(config))
    tensors = dict(st_load((path / "tensors.safetensors").read_bytes()))
    for key in [k for k in tensors if k.startswith("glm_statistics.")]:
        tensors.pop(key)
    (path / "tensors.safetensors").write_bytes(st_save(tensors))
    _reseal(path)


def test_a_file_from_before_loads_and_asks_for_the_data(poisson, tmp_path):
    model, X, y, weight, offset = poisson
    path = model.save(tmp_path / "old")
    _forget_statistics(path)
    loaded = load(path)
    assert loaded.glm_statistics_ is None
    np.testing.assert_array_equal(
        loaded.predict(X, offset=offset), model.predict(X, offset=offset)
    )
    for method in ("summary", "coef_table", "wald_test_terms"):
        with pytest.raises(ValueError, match="pass the training data"):
            getattr(loaded, method)()
    pd.testing.assert_frame_equal(
        loaded.coef_table(X, y, weight, offset), model.coef_table(X, y, weight, offset)
    )


def test_tampered_statistics_are_refused(poisson, tmp_path):
    from autoglm_graph.persistence import ModelFileError

    model, *_ = poisson
    path = model.save(tmp_path / "m")
    tensors = dict(st_load((path / "tensors.safetensors").read_bytes()))
    tensors["glm_statistics.fisher"] = tensors["glm_statistics.fisher"][:-1]
    (path / "tensors.safetensors").write_bytes(st_save(tensors))
    _reseal(path)
    with pytest.raises(ModelFileError, match=r"glm_statistics\.fisher"):
        load(path)

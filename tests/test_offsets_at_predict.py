"""Offsets at predict are checked as at fit (issue #44): an exposure for a
log-exposure refused, an offset the fit did not have warned about, pandas
Series matched to X's rows by index."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from autoglm_graph import GraphGLMRegressor, load
from autoglm_graph.utils._validation import OffsetWarning

GLM_ONLY = {"local_penalty": np.inf, "random_state": 0}


@pytest.fixture(scope="module")
def exposure_data():
    rng = np.random.default_rng(0)
    n = 400
    X = pd.DataFrame(
        {"x": rng.normal(size=n), "area": rng.choice(["a", "b", "c"], size=n)},
        index=pd.RangeIndex(1000, 1000 + n),
    )
    exposure = rng.uniform(100, 5000, size=n)  # populations
    y = rng.poisson(exposure * np.exp(-6 + 0.2 * X["x"].to_numpy()))
    model = GraphGLMRegressor(family="poisson", **GLM_ONLY)
    model.fit(X, y, offset=np.log(exposure))
    return X, y, exposure, model


def test_exposure_for_log_exposure_is_refused(exposure_data, tmp_path):
    X, _, exposure, model = exposure_data
    assert model.offset_range_ == pytest.approx(
        (np.log(exposure).min(), np.log(exposure).max())
    )
    with pytest.raises(ValueError, match="looks like an exposure itself"):
        model.predict(X.head(1), offset=exposure[:1])
    loaded = load(model.save(tmp_path / "m"))
    assert loaded.offset_range_ == pytest.approx(model.offset_range_)
    with pytest.raises(ValueError, match="offsets of fit spanned"):
        loaded.predict(X.head(3), offset=exposure[:3])
    # A log-exposure beyond the range of fit, but plausible, is a prediction.
    assert np.isfinite(model.predict(X.head(1), offset=np.log(1e6))).all()


def test_offset_for_a_model_fitted_without_one_warns(exposure_data):
    X, y, _, _ = exposure_data
    model = GraphGLMRegressor(family="poisson", **GLM_ONLY).fit(X, y)
    assert model.offset_range_ is None
    with pytest.warns(OffsetWarning, match="fitted without an offset"):
        model.predict(X.head(5), offset=np.full(5, 2.0))
    with pytest.warns(OffsetWarning):
        model.predict_linear(X.head(5), offset=1.0)


def test_series_offset_aligned_by_index(exposure_data):
    X, _, exposure, model = exposure_data
    offset = pd.Series(np.log(exposure), index=X.index)
    expected = model.predict(X, offset=offset.to_numpy())
    shuffled = offset.sample(frac=1.0, random_state=0)
    np.testing.assert_allclose(model.predict(X, offset=shuffled), expected)
    with pytest.raises(ValueError, match="index differs from X's: 400 of X's row"):
        model.predict(X, offset=offset.reset_index(drop=True))
    np.testing.assert_allclose(
        model.predict(X, offset=offset.reset_index(drop=True).to_numpy()), expected
    )


def test_series_at_fit_aligned_by_index(exposure_data):
    X, y, exposure, _ = exposure_data
    offset = pd.Series(np.log(exposure), index=X.index)
    weight = pd.Series(np.linspace(0.5, 2.0, len(X)), index=X.index)
    order = np.random.default_rng(1).permutation(len(X))
    reference = GraphGLMRegressor(family="poisson", **GLM_ONLY).fit(
        X, y, sample_weight=weight.to_numpy(), offset=offset.to_numpy()
    )
    aligned = GraphGLMRegressor(family="poisson", **GLM_ONLY).fit(
        X, y, sample_weight=weight.iloc[order], offset=offset.iloc[order]
    )
    np.testing.assert_allclose(aligned.coef_, reference.coef_)
    with pytest.raises(ValueError, match="sample_weight is a pandas Series whose"):
        GraphGLMRegressor(family="poisson", **GLM_ONLY).fit(
            X, y, sample_weight=weight.reset_index(drop=True)
        )


def test_series_in_the_tables_aligned_by_index(exposure_data):
    X, y, exposure, model = exposure_data
    offset = pd.Series(np.log(exposure), index=X.index)
    shuffled = offset.sample(frac=1.0, random_state=0)
    expected = model.coef_table(X, y, offset=offset.to_numpy())
    pd.testing.assert_frame_equal(model.coef_table(X, y, offset=shuffled), expected)
    table = model.factor_table(X, y, offset=shuffled)
    pd.testing.assert_frame_equal(table, model.factor_table(X, y, offset=offset))
    header = model.summary(X, y, offset=shuffled).header
    assert header == model.summary(X, y, offset=offset.to_numpy()).header
    with pytest.raises(ValueError, match="offset is a pandas Series whose index"):
        model.coef_table(X, y, offset=offset.reset_index(drop=True))

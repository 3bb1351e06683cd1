"""``FitPolicy.refit_all_rows``: a kept network trained again on all the
fit's rows for the kept epoch count (estimators area)."""

from __future__ import annotations

import numpy as np
import pytest

from autoglm_graph import FitPolicy, GraphGLMRegressor, load
from autoglm_graph.datasets import make_varying_coefficients

PARAMS = dict(family="poisson", random_state=0, max_epochs=12)


@pytest.fixture(scope="module")
def fits():
    X, y, _ = make_varying_coefficients(1500, 3, family="poisson", random_state=0)
    fitted = {}
    for refit in (False, True):
        policy = FitPolicy(keep_check_folds=0, refit_all_rows=refit)
        model = GraphGLMRegressor(**PARAMS, fit_policy=policy)
        with pytest.warns(Warning):  # still improving at 12 epochs
            fitted[refit] = model.fit(X, y)
    return X, y, fitted


def test_the_refitted_network_is_trained_on_every_row(fits):
    X, _, fitted = fits
    base, refit = fitted[False], fitted[True]
    assert not base.is_global_only_ and not refit.is_global_only_
    assert base.best_epoch_ == refit.best_epoch_
    assert len(base._fitted.positions) < len(X)
    np.testing.assert_array_equal(refit._fitted.positions, np.arange(len(X)))
    assert not np.allclose(base.predict(X), refit.predict(X))


def test_the_refit_is_a_fit_without_validation_rows_for_the_kept_epochs(fits):
    X, y, fitted = fits
    refit = fitted[True]
    params = dict(PARAMS, max_epochs=refit.best_epoch_)
    every_row = GraphGLMRegressor(**params, early_stopping=False).fit(X, y)
    np.testing.assert_allclose(refit.predict(X), every_row.predict(X), rtol=1e-6)


def test_a_refitted_model_is_saved_and_loaded_whole(fits, tmp_path):
    X, _, fitted = fits
    path = tmp_path / "refit.agg"
    fitted[True].save(path)
    loaded = load(path)
    assert loaded.fit_policy.refit_all_rows
    np.testing.assert_allclose(loaded.predict(X), fitted[True].predict(X), rtol=1e-6)

"""No torch "NumPy array is not writable" warning from read-only input (#16).

A pandas Series' values are read-only under copy-on-write, and so is any
array a user marks read-only; torch warns when it wraps one. Torch raises that
warning once per process, so each case runs in a fresh interpreter, where the
first offending call turns it into an error.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    import warnings

    import numpy as np
    import pandas as pd
    from sklearn.exceptions import ConvergenceWarning

    from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    y = pd.Series(X["a"] + rng.normal(size=200))  # float Series: read-only values
    w = pd.Series(np.ones(200))
    labels = pd.Series(np.where(y > 0, "yes", "no"))
    X_ro = X.to_numpy(copy=True)
    y_ro = y.to_numpy(copy=True)
    X_ro.flags.writeable = False
    y_ro.flags.writeable = False
    kwargs = dict(max_epochs=2, random_state=0, device="cpu")
    case = sys.argv[1]
    if case != "fit":  # fitted on writable copies: only the later calls are tested
        model = GraphGLMRegressor(**kwargs).fit(X, y_ro.copy())

    warnings.simplefilter("error")
    # Not about writability: torch's own deprecations, and short fits.
    warnings.simplefilter("ignore", DeprecationWarning)
    warnings.simplefilter("ignore", ConvergenceWarning)
    if case == "fit":
        for X_, y_ in [(X, y), (X_ro, y_ro)]:
            GraphGLMRegressor(**kwargs).fit(X_, y_, sample_weight=w)
            GraphGLMClassifier(**kwargs).fit(X_, labels)
    else:
        model.score(X, y, sample_weight=w)
        model.score(X, y_ro)
    print("no warning")
    """
)


@pytest.mark.parametrize("case", ["fit", "score"])
def test_read_only_input_gives_no_warning(case):
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, case],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "no warning" in result.stdout

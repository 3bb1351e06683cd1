"""The global GLM: an exact solve of the penalized, convex GLM problem.

The objective is scikit-learn's (``PoissonRegressor`` and friends)::

    (1 / sum(w)) * sum_i w_i * 0.5 * unit_deviance(y_i, mu_i) + (alpha / 2) * ||beta||^2

with an unpenalized intercept. It is minimised with SciPy's L-BFGS-B on a
float64 objective whose gradient comes from torch autograd, so the mathematics
of each family exists once (in :mod:`autoglm_graph.families`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import minimize

from .families import Family


@dataclass
class GlobalGLM:
    """Coefficients of a fitted global GLM.

    Attributes
    ----------
    coef : ndarray of shape (n_outputs, n_features)
        Slopes, one row per output (one output except for multinomial).
    intercept : ndarray of shape (n_outputs,)
    n_iter : int
        L-BFGS iterations used.
    converged : bool
    """

    coef: np.ndarray
    intercept: np.ndarray
    n_iter: int
    converged: bool

    def linear_predictor(
        self, X: torch.Tensor, offset: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Return eta = offset + intercept + X @ coef.T, shape [n, n_outputs]."""
        coef = torch.as_tensor(self.coef, dtype=X.dtype, device=X.device)
        intercept = torch.as_tensor(self.intercept, dtype=X.dtype, device=X.device)
        eta = X @ coef.T + intercept
        if offset is not None:
            eta = eta + offset.reshape(-1, 1)
        return eta


def fit_global_glm(
    X: np.ndarray,
    y: np.ndarray,
    family: Family,
    *,
    n_outputs: int = 1,
    sample_weight: np.ndarray | None = None,
    offset: np.ndarray | None = None,
    alpha: float = 0.0,
    max_iter: int = 1000,
    tol: float = 1e-10,
) -> GlobalGLM:
    """Fit the penalized GLM exactly (to ``tol``) with L-BFGS in float64.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Design matrix.
    y : ndarray of shape (n_samples,) or (n_samples, n_classes)
        Target; one-hot (or class probabilities) for the multinomial family.
    family : Family
    n_outputs : int, default=1
        Number of linear predictors (``n_classes`` for multinomial).
    sample_weight, offset : ndarray of shape (n_samples,), default=None
    alpha : float, default=0.0
        L2 penalty on the slopes, in scikit-learn's scaling.
    max_iter : int, default=1000
    tol : float, default=1e-10
        Gradient tolerance of L-BFGS-B (``pgtol``).

    Returns
    -------
    GlobalGLM
    """
    n_samples, n_features = X.shape
    Xt = torch.as_tensor(X, dtype=torch.float64)  # read only: no copy needed
    yt = torch.tensor(y, dtype=torch.float64)
    w = np.ones(n_samples) if sample_weight is None else sample_weight
    wt = torch.as_tensor(w / w.sum(), dtype=torch.float64)
    off = None if offset is None else torch.as_tensor(offset, dtype=torch.float64)
    init_eta = family.initial_eta(np.asarray(y), sample_weight)
    if offset is not None and family.link_name == "log":
        # With an offset (log exposure), the intercept starts at the log rate.
        init_eta = init_eta - np.average(offset, weights=w)
    if family.link_name == "softmax":
        init_eta = init_eta - init_eta.mean()

    def unpack(params: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        coef = params[: n_outputs * n_features].reshape(n_outputs, n_features)
        return coef, params[n_outputs * n_features :]

    def objective(flat: np.ndarray) -> tuple[float, np.ndarray]:
        params = torch.tensor(flat, dtype=torch.float64, requires_grad=True)
        coef, intercept = unpack(params)
        eta = Xt @ coef.T + intercept
        if off is not None:
            eta = eta + off.reshape(-1, 1)
        if n_outputs == 1:
            eta = eta[:, 0]
        dev = family.unit_deviance(yt, eta)
        loss = 0.5 * torch.dot(wt, dev) + 0.5 * alpha * (coef * coef).sum()
        loss.backward()
        return loss.item(), params.grad.numpy().copy()

    x0 = np.concatenate([np.zeros(n_outputs * n_features), np.ravel(init_eta)])
    result = minimize(
        objective,
        x0,
        jac=True,
        method="L-BFGS-B",
        options={
            "maxiter": max_iter,
            "maxfun": 2 * max_iter,
            "gtol": tol,
            "ftol": 64 * np.finfo(float).eps,
            "maxcor": 30,
        },
    )
    coef, intercept = (
        t.detach().numpy().copy() for t in unpack(torch.tensor(result.x))
    )
    if family.link_name == "softmax":
        # Only differences between class intercepts are identified.
        intercept = intercept - intercept.mean()
    return GlobalGLM(
        coef=coef,
        intercept=intercept,
        n_iter=int(result.nit),
        converged=bool(result.success),
    )

"""The global GLM: an exact solve of the penalized, convex GLM problem.

The objective is scikit-learn's (``PoissonRegressor`` and friends)::

    (1 / sum(w)) * sum_i w_i * 0.5 * unit_deviance(y_i, mu_i)
        + (alpha / 2) * sum_j penalty_weights_j * beta_j ** 2

with an unpenalized intercept (``penalty_weights`` are 1 unless the caller
solves on a rescaled design and maps the user's penalty onto it; a matrix
``P`` of them gives ``(alpha / 2) * beta' P beta``, as a categorical column's
penalty on its levels' spread, :meth:`~autoglm_graph.glm._terms.GLMTerms.
slope_penalty`). It is
minimised in float64 by Newton's method with a backtracking line search (the
Hessian is exact: the families' first and second derivatives on the link
scale come from torch autograd, so the mathematics of each family exists
once, in :mod:`autoglm_graph.glm.families`), stopping when the largest absolute
gradient is below ``tol``. Designs too wide for a dense Hessian use L-BFGS-B
stopped on the same gradient tolerance.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np
from scipy import linalg
from scipy.optimize import minimize
from sklearn.exceptions import ConvergenceWarning

from ..utils import caller_stacklevel, torch
from .families import Family, NegativeBinomialFamily, PoissonFamily

#: A fitted probability this close to 0 or 1 at alpha=0 signals separation.
SEPARATION_EPS = 1e-10


@dataclass
class GlobalGLM:
    """Coefficients of a fitted global GLM.

    Attributes
    ----------
    coef : ndarray of shape (n_outputs, n_features)
        Slopes, one row per output (one output except for multinomial), on the
        design the GLM was solved on.
    intercept : ndarray of shape (n_outputs,)
    n_iter : int
        Solver iterations used.
    converged : bool
        Whether the largest absolute gradient reached the tolerance.
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


def balance_glm(
    glm: GlobalGLM,
    family: Family,
    y: np.ndarray,
    eta: np.ndarray,
    sample_weight: np.ndarray,
) -> tuple[GlobalGLM, float]:
    """The GLM with its intercept shifted so the fitted model is balanced.

    ``eta`` is the final model's linear predictor (offset, network and all)
    on the rows of the fit. Shifting the intercept by the family's
    :meth:`~autoglm_graph.glm.families.Family.balance_shift` ``c`` shifts every
    row's ``eta`` by ``c`` (the network's deviations do not depend on the
    intercept), after which ``sum(w * mu) = sum(w * y)`` on those rows to
    rounding error. A Poisson GLM with an intercept is balanced already
    (``c`` is of the order of the solver's tolerance); the gamma, Tweedie
    and negative binomial GLMs, and any model with a network, generally are
    not.

    Parameters
    ----------
    glm : GlobalGLM
        A single-output GLM (the regressor's).
    family : Family
        Its family; ``family.has_balance_correction`` must be true.
    y, eta, sample_weight : ndarray of shape (n_samples,)

    Returns
    -------
    glm : GlobalGLM
        A copy with ``intercept + c``.
    c : float
    """
    mu = family.inverse_link(torch.as_tensor(eta, dtype=torch.float64)).numpy()
    shift = family.balance_shift(y, mu, sample_weight)
    if not np.isfinite(shift):
        raise ValueError(
            f"The balance correction is not finite (c={shift}): sum(w * mu) or "
            "sum(w * y) is 0 or overflows; pass balance=False."
        )
    balanced = replace(glm, intercept=np.asarray(glm.intercept, float) + shift)
    return balanced, shift


class _Objective:
    """Loss, gradient and Hessian of the penalized GLM in float64.

    Parameters are a ``[K, p + 1]`` array: the slopes, then the intercept
    (``[K, p]``, the slopes only, without an intercept).
    """

    def __init__(
        self, X, y, family, n_outputs, w, offset, alpha, penalty_weights, intercept
    ):
        n, p = X.shape
        self.X1 = np.column_stack([X, np.ones(n)]) if intercept else X
        self.y = torch.tensor(np.asarray(y), dtype=torch.float64)  # a copy
        self.family, self.K, self.p = family, n_outputs, p
        self.wn = w / w.sum()
        self.offset = offset
        m = self.X1.shape[1]
        penalty_weights = np.asarray(penalty_weights, dtype=np.float64)
        # A diagonal penalty is kept as one weight per parameter (the fast
        # path of wide designs), a matrix one as its [m, m] matrix.
        self.pen = np.zeros((n_outputs, m))
        self.pen_matrix = None
        if penalty_weights.ndim == 2:
            self.pen_matrix = np.zeros((m, m))
            self.pen_matrix[:p, :p] = alpha * penalty_weights
        else:
            self.pen[:, :p] = alpha * penalty_weights

    def penalty(self, B: np.ndarray) -> float:
        """The penalty's value at ``B``, ``(1/2) sum_k B_k' P B_k``."""
        if self.pen_matrix is not None:
            return 0.5 * float(np.sum((B @ self.pen_matrix) * B))
        return 0.5 * float(np.sum(self.pen * B * B))

    def penalty_gradient(self, B: np.ndarray) -> np.ndarray:
        if self.pen_matrix is not None:
            return B @ self.pen_matrix
        return self.pen * B

    def penalty_hessian(self) -> np.ndarray:
        """The penalty's Hessian ``[K m, K m]`` (classes in blocks)."""
        if self.pen_matrix is not None:
            return np.kron(np.eye(self.K), self.pen_matrix)
        return np.diag(self.pen.ravel())

    def eta(self, B: np.ndarray) -> np.ndarray:
        eta = self.X1 @ B.T
        if self.offset is not None:
            eta = eta + self.offset[:, None]
        return eta

    def _dev(self, eta_t: torch.Tensor) -> torch.Tensor:
        return self.family.unit_deviance(self.y, eta_t if self.K > 1 else eta_t[:, 0])

    def loss(self, B: np.ndarray) -> float:
        with torch.no_grad():
            dev = self._dev(torch.as_tensor(self.eta(B))).numpy()
        value = 0.5 * float(self.wn @ dev) + self.penalty(B)
        return value if np.isfinite(value) else np.inf

    def parts(self, B: np.ndarray, hessian: bool = True):
        """(loss, gradient [K, p+1], Hessian [K(p+1), K(p+1)] or None)."""
        eta_t = torch.as_tensor(self.eta(B)).requires_grad_(True)
        dev = self._dev(eta_t)
        (d1,) = torch.autograd.grad(dev.sum(), eta_t, create_graph=hessian)
        value = 0.5 * float(self.wn @ dev.detach().numpy())
        value += self.penalty(B)
        r = 0.5 * self.wn[:, None] * d1.detach().numpy()  # [n, K]
        grad = r.T @ self.X1 + self.penalty_gradient(B)
        if not hessian:
            return value, grad, None
        m = self.X1.shape[1]
        H = np.zeros((self.K, m, self.K, m))
        for k in range(self.K):
            (d2,) = torch.autograd.grad(
                d1[:, k].sum(), eta_t, retain_graph=k < self.K - 1
            )
            d2 = np.nan_to_num(d2.numpy(), nan=0.0, posinf=0.0, neginf=0.0)
            for j in range(self.K):
                c = 0.5 * self.wn * d2[:, j]
                if self.K == 1:
                    c = np.maximum(c, 0.0)  # Fisher-like away from convexity
                    # A.T @ A of one array: numpy's symmetric product (BLAS
                    # syrk), half the flops of the general one.
                    scaled = self.X1 * np.sqrt(c)[:, None]
                    H[k, :, j, :] = scaled.T @ scaled
                else:
                    H[k, :, j, :] = self.X1.T @ (self.X1 * c[:, None])
        H = H.reshape(self.K * m, self.K * m)
        if self.pen_matrix is not None:
            H += self.penalty_hessian()
        else:
            H[np.diag_indices_from(H)] += self.pen.ravel()
        return value, grad, H


def _newton_direction(H: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Solve ``H d = -g``; a singular H (unidentified directions) gets a
    minimum-norm least-squares step."""
    try:
        return -linalg.cho_solve(linalg.cho_factor(H), g)
    except linalg.LinAlgError:
        return -linalg.lstsq(H, g, cond=1e-13)[0]


def _newton(obj: _Objective, B: np.ndarray, max_iter: int, tol: float):
    value, grad, H = obj.parts(B)
    for it in range(1, max_iter + 1):
        if np.max(np.abs(grad)) <= tol:
            return B, it - 1, True
        step = _newton_direction(H, grad.ravel()).reshape(B.shape)
        if np.max(np.abs(step)) <= 1e-14 * (1 + np.max(np.abs(B))):
            return B, it - 1, True  # at the floating-point floor
        slope = float(np.sum(grad * step))
        if slope >= 0:  # not a descent direction: fall back to the gradient
            step, slope = -grad, -float(np.sum(grad * grad))
        t = 1.0
        # Armijo, with an allowance for rounding in the loss near the optimum.
        rounding = 16 * np.finfo(float).eps * abs(value)
        for _ in range(60):
            trial = obj.loss(B + t * step)
            if trial <= value + 1e-4 * t * slope + rounding:
                break
            t *= 0.5
        else:
            # No decrease is representable: converged only if close already.
            return B, it, bool(np.max(np.abs(grad)) <= np.sqrt(tol))
        B = B + t * step
        value, grad, H = obj.parts(B)
    return B, max_iter, bool(np.max(np.abs(grad)) <= tol)


def _lbfgs(obj: _Objective, B: np.ndarray, max_iter: int, tol: float):
    shape = B.shape

    def fun(flat):
        value, grad, _ = obj.parts(flat.reshape(shape), hessian=False)
        if not np.isfinite(value):
            return np.inf, np.zeros_like(flat)
        return value, grad.ravel()

    result = minimize(
        fun,
        B.ravel(),
        jac=True,
        method="L-BFGS-B",
        options={
            "maxiter": max_iter,
            "maxfun": 2 * max_iter,
            "gtol": tol,
            "ftol": 0.0,
            "maxcor": 30,
        },
    )
    B = result.x.reshape(shape)
    _, grad, _ = obj.parts(B, hessian=False)
    # L-BFGS-B's line search stalls near 1e-9 on wide designs (the rounding
    # of a sum over many rows): accept 100 * tol there.
    return B, int(result.nit), bool(np.max(np.abs(grad)) <= 100 * tol)


def fit_global_glm(
    X: np.ndarray,
    y: np.ndarray,
    family: Family,
    *,
    n_outputs: int = 1,
    sample_weight: np.ndarray | None = None,
    offset: np.ndarray | None = None,
    alpha: float = 0.0,
    penalty_weights: np.ndarray | None = None,
    max_iter: int = 100,
    tol: float = 1e-10,
    newton_max_params: int = 400,
    fit_intercept: bool = True,
    start: GlobalGLM | None = None,
) -> GlobalGLM:
    """Fit the penalized GLM exactly (to ``tol``) in float64.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Design matrix (converted to float64).
    y : ndarray of shape (n_samples,) or (n_samples, n_classes)
        Target; one-hot (or class probabilities) for the multinomial family.
    family : Family
    n_outputs : int, default=1
        Number of linear predictors (``n_classes`` for multinomial).
    sample_weight, offset : ndarray of shape (n_samples,), default=None
    alpha : float, default=0.0
        L2 penalty on the slopes, in scikit-learn's scaling.
    penalty_weights : ndarray, default=None
        Per-slope multipliers of ``alpha`` (1 when None; on columns divided
        by ``s_j``, ``1 / s_j**2`` penalise the user's units), or a positive
        semi-definite ``[p, p]`` matrix ``P``: ``(alpha / 2) beta' P beta``.
    max_iter : int, default=100
        Newton iterations (L-BFGS-B: ten times as many).
    tol : float, default=1e-10
        Stop when the largest absolute gradient of the objective is below it
        (``100 * tol`` on designs too wide for Newton's method).
    newton_max_params : int, default=400
        Above this many parameters (``n_outputs * (p + 1)``) the dense Newton
        Hessian (``n * m**2`` flops) gives way to L-BFGS-B.
    fit_intercept : bool, default=True
        Whether the model has an intercept; without one, ``intercept`` is 0.
    start : GlobalGLM, default=None
        Coefficients on the same columns to start from (None: zero slopes and
        the mean's intercept): a nearby solution takes fewer steps.

    Returns
    -------
    GlobalGLM

    Warns
    -----
    ConvergenceWarning
        When the solver stops before the gradient tolerance, and for a
        binomial or multinomial fit without penalty whose fitted probabilities
        reach 0 or 1 (quasi-complete separation: the coefficients diverge).
    """
    X = np.asarray(X, dtype=np.float64)
    n_samples, n_features = X.shape
    w = (
        np.ones(n_samples)
        if sample_weight is None
        else np.asarray(sample_weight, float)
    )
    off = None if offset is None else np.asarray(offset, dtype=np.float64)
    pw = _penalty_weights(penalty_weights, n_features)
    obj = _Objective(X, y, family, n_outputs, w, off, alpha, pw, fit_intercept)
    B = _start_point(start, family, y, sample_weight, off, obj, fit_intercept)
    if B.size <= newton_max_params:
        B, n_iter, converged = _newton(obj, B, max_iter, tol)
    else:
        B, n_iter, converged = _lbfgs(obj, B, 10 * max_iter, tol)
    if not converged:
        _warn_not_converged(obj, B, n_iter, tol, alpha)
    if alpha == 0 and family.is_classification:
        _warn_if_separated(obj, B, w)
    return _global_glm(B, n_features, n_iter, converged, fit_intercept)


def _penalty_weights(penalty_weights, n_features: int) -> np.ndarray:
    """``penalty_weights`` as an array (ones when None), its shape checked."""
    if penalty_weights is None:
        return np.ones(n_features)
    pw = np.asarray(penalty_weights)
    if pw.shape not in ((n_features,), (n_features, n_features)):
        raise ValueError(
            f"penalty_weights must have shape ({n_features},) or ({n_features}, "
            f"{n_features}); got {pw.shape}."
        )
    return pw


def _start_point(start, family, y, sample_weight, offset, obj, intercept):
    """The parameters Newton's method starts from: ``start``'s, else zero
    slopes and the intercept of the mean."""
    B = np.zeros((obj.K, obj.p + int(intercept)))
    if start is not None:
        B[:, : obj.p] = start.coef
        if intercept:
            B[:, -1] = start.intercept
    elif intercept:
        B[:, -1] = family.start_eta(np.asarray(y), sample_weight, offset)
    return B


def _global_glm(
    B: np.ndarray, n_features: int, n_iter: int, converged: bool, fit_intercept: bool
) -> GlobalGLM:
    """The solution ``B`` (slopes, then the intercept) as a :class:`GlobalGLM`."""
    n_outputs = B.shape[0]
    coef = B[:, :n_features].copy()
    intercept = B[:, -1].copy() if fit_intercept else np.zeros(n_outputs)
    if n_outputs > 1 and fit_intercept:
        # Only differences between class intercepts are identified.
        intercept = intercept - intercept.mean()
    return GlobalGLM(
        coef=coef, intercept=intercept, n_iter=int(n_iter), converged=converged
    )


def _warn_not_converged(
    obj: _Objective, B: np.ndarray, n_iter: int, tol: float, alpha: float
) -> None:
    _, grad, _ = obj.parts(B, hessian=False)
    warnings.warn(
        f"The global GLM did not converge in {n_iter} iterations: the largest "
        f"absolute gradient is {np.max(np.abs(grad)):.3g} > tol={tol:g}. "
        + _nonconvergence_advice(obj, B, alpha),
        ConvergenceWarning,
        stacklevel=caller_stacklevel(),
    )


def fit_negative_binomial(
    X: np.ndarray,
    y: np.ndarray,
    *,
    sample_weight: np.ndarray | None = None,
    offset: np.ndarray | None = None,
    alpha: float = 0.0,
    penalty_weights: np.ndarray | None = None,
    tol: float = 1e-10,
    max_outer: int = 50,
    fit_intercept: bool = True,
) -> tuple[GlobalGLM, NegativeBinomialFamily]:
    """The negative binomial GLM with ``theta`` by maximum likelihood.

    As R's ``MASS::glm.nb``, alternates the GLM for a fixed ``theta`` and the
    maximum likelihood ``theta`` for its fitted means, until ``log(theta)``
    moves by less than ``tol``; the fixed point is found by the secant method
    (a plain alternation converges linearly, slowly where theta is well
    determined).

    Returns
    -------
    glm : GlobalGLM
    family : NegativeBinomialFamily
        With the estimated ``theta``.
    """
    kwargs = dict(
        sample_weight=sample_weight,
        offset=offset,
        alpha=alpha,
        penalty_weights=penalty_weights,
        fit_intercept=fit_intercept,
    )
    X = np.asarray(X, dtype=np.float64)

    def ml_log_theta(glm: GlobalGLM) -> float:
        eta = glm.linear_predictor(torch.as_tensor(X)).numpy()[:, 0]
        if offset is not None:
            eta = eta + offset
        mu = np.exp(eta)
        return np.log(NegativeBinomialFamily.estimate_theta(y, mu, sample_weight))

    def step(log_theta: float) -> tuple[float, GlobalGLM]:
        """f(t) = T(t) - t of the alternation's map T, and the GLM at t."""
        family = NegativeBinomialFamily(float(np.exp(log_theta)))
        glm = fit_global_glm(X, y, family, **kwargs)
        return ml_log_theta(glm) - log_theta, glm

    # The fixed point of the alternation, by the secant method on f.
    t_a = ml_log_theta(fit_global_glm(X, y, PoissonFamily(), **kwargs))
    f_a, glm = step(t_a)
    t_b = t_a + f_a
    for _ in range(max_outer):
        f_b, glm = step(t_b)
        if abs(f_b) <= tol:
            break
        slope = (f_b - f_a) / (t_b - t_a) if t_b != t_a else 0.0
        # A secant step, or a plain alternation step where it is not a contraction.
        t_new = t_b - f_b / slope if slope < -1e-12 else t_b + f_b
        t_a, f_a, t_b = t_b, f_b, t_new
    else:
        warnings.warn(
            f"The negative binomial theta did not converge in {max_outer} "
            f"steps (theta={np.exp(t_b):.6g}); pass a fixed theta.",
            ConvergenceWarning,
            stacklevel=caller_stacklevel(),
        )
    theta = float(np.exp(t_b))
    return glm, NegativeBinomialFamily(theta)


def _warn_if_separated(obj: _Objective, B: np.ndarray, w: np.ndarray) -> None:
    eta = torch.as_tensor(obj.eta(B))
    mu = obj.family.inverse_link(eta if obj.K > 1 else eta[:, 0]).numpy()
    mu = mu.reshape(len(w), -1)[w > 0]
    extreme = (mu < SEPARATION_EPS) | (mu > 1 - SEPARATION_EPS)
    if extreme.any():
        rows = int(extreme.any(axis=1).sum())
        warnings.warn(
            f"Quasi-complete separation: {rows} row(s) have fitted probabilities "
            f"within {SEPARATION_EPS:g} of 0 or 1 at alpha=0, so the maximum "
            "likelihood coefficients do not exist (they diverge) and the reported "
            "ones are arbitrary. Set alpha > 0 or remove the separating features.",
            ConvergenceWarning,
            stacklevel=caller_stacklevel(),
        )


def _nonconvergence_advice(
    obj: _Objective, B: np.ndarray, alpha: float, large_scale: float = 1e4
) -> str:
    """The causes of a stalled solve that this design has, each with its remedy.

    ``large_scale``: a design column whose largest absolute value exceeds it is
    named as badly scaled.
    """
    X = obj.X1[:, : obj.p]
    advice = []
    if X.shape[1]:
        big = np.max(np.abs(X), axis=0) > large_scale
        if big.any():
            advice.append(
                f"{int(big.sum())} column(s) of the design reach |x| > "
                f"{large_scale:g}: standardise them (or let the estimator's "
                "preprocessing scale them)"
            )
    missing_rank = obj.X1.shape[1] - np.linalg.matrix_rank(obj.X1)
    if missing_rank and alpha == 0:
        advice.append(
            f"{missing_rank} direction(s) of the design are not identified (the "
            "one-hot levels of a categorical column sum to the intercept, as every "
            "level is coded, or columns repeat one another): set alpha > 0, e.g. "
            "alpha=1e-6, to identify them"
        )
    if obj.family.link_name == "log" and obj.K == 1:
        mu = np.exp(np.clip(obj.eta(B)[:, 0], -700, 700))
        y = obj.y.numpy().reshape(-1)
        vanishing = (y == 0) & (mu < 1e-8 * max(float(np.mean(y)), 1e-300))
        if vanishing.any():
            advice.append(
                f"{int(vanishing.sum())} row(s) with y = 0 have fitted means near "
                "0 (a level, or a combination of levels, whose rows are all 0: its "
                "coefficient diverges): raise alpha or merge that level with another"
            )
    if not advice:
        return (
            "No badly scaled column, unidentified direction or vanishing mean "
            f"was found: raise alpha (now {alpha:g}), or drop features that "
            "nearly separate the outcome or nearly repeat other features."
        )
    return "Causes in this design, with their remedies: " + "; ".join(advice) + "."

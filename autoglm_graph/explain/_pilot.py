"""Local GLMs of rows' nearest neighbours: the pilot of the intervals' bias.

:func:`local_glms` fits, for each of ``m`` rows, a GLM of the family to the
``k`` training rows nearest to it (a k-nearest-neighbour local likelihood,
the uniform-kernel form of geographically weighted regression), all ``m`` at
once by Newton's method, and gives each fit's coefficients and their sandwich
(HC1) covariances. With few rows per coefficient this is a rough but nearly
unbiased estimate of a row's coefficients, which
:func:`autoglm_graph.explain.intervals.estimate_interval_bias` compares with the
network's smoother ones.
"""

from __future__ import annotations

import numpy as np
import torch

from ..glm import Family

__all__ = ["local_glms"]

#: Newton iterations of the local fits (each halves its step while the
#: penalised deviance rises); canonical-link fits converge in well under 20.
_MAX_ITER = 50


def local_glms(
    family: Family,
    design: np.ndarray,
    y: np.ndarray,
    weight: np.ndarray,
    offset: np.ndarray | None,
    neighbors: np.ndarray,
    start: np.ndarray,
    *,
    ridge: float = 1e-4,
    chunk_rows: int = 256,
) -> tuple[np.ndarray, np.ndarray]:
    """Per-row GLMs of the rows listed in ``neighbors``.

    Parameters
    ----------
    family : Family
        A family with one linear predictor per row.
    design : ndarray of shape (n_samples, q)
        The GLM's design of the training rows, its intercept column included.
    y, weight : ndarray of shape (n_samples,)
    offset : ndarray of shape (n_samples,) or None
    neighbors : ndarray of shape (m, k)
        For each fit, the training rows it is fitted to.
    start : ndarray of shape (q,)
        Starting coefficients (the global GLM's), also the centre of the
        ridge penalty.
    ridge : float, default=1e-4
        Penalty ``ridge * sum(weights) / 2 * ||theta - start||^2`` of each fit:
        a guard against separated neighbourhoods that leaves others as they
        are.
    chunk_rows : int, default=256
        Fits computed together (bounds memory at ``chunk_rows * k * q``).

    Returns
    -------
    theta : ndarray of shape (m, q)
        The fits' coefficients; a row of NaN where a fit did not converge.
    covariance : ndarray of shape (m, q, q)
        Their sandwich (HC1) covariances.
    """
    thetas, covariances = [], []
    for s in range(0, neighbors.shape[0], chunk_rows):
        theta, covariance = _fit_chunk(
            family,
            design,
            y,
            weight,
            offset,
            neighbors[s : s + chunk_rows],
            start,
            ridge,
        )
        thetas.append(theta)
        covariances.append(covariance)
    return np.concatenate(thetas), np.concatenate(covariances)


def _fit_chunk(family, design, y, weight, offset, neighbors, start, ridge):
    X = torch.as_tensor(design[neighbors], dtype=torch.float64)  # [m, k, q]
    Y = torch.as_tensor(y[neighbors], dtype=torch.float64)
    W = torch.as_tensor(weight[neighbors], dtype=torch.float64)
    off = (
        torch.zeros_like(Y)
        if offset is None
        else torch.as_tensor(offset[neighbors], dtype=torch.float64)
    )
    m, k, q = X.shape
    centre = torch.as_tensor(start, dtype=torch.float64).expand(m, q)
    lam = ridge * W.sum(1)  # [m]

    def objective(theta):
        eta = off + torch.einsum("mkq,mq->mk", X, theta)
        dev = family.unit_deviance(Y.reshape(-1), eta.reshape(-1)).reshape(m, k)
        penalty = 0.5 * lam * (theta - centre).pow(2).sum(1)
        return 0.5 * (W * dev).sum(1) + penalty

    def derivatives(theta):
        eta = (off + torch.einsum("mkq,mq->mk", X, theta)).requires_grad_(True)
        with torch.enable_grad():
            dev = family.unit_deviance(Y.reshape(-1), eta.reshape(-1)).sum()
            (g,) = torch.autograd.grad(dev, eta, create_graph=True)
            (h,) = torch.autograd.grad(g.sum(), eta)
        return 0.5 * W * g.detach(), 0.5 * W * h.detach()  # per row, d/d eta

    eye = torch.eye(q, dtype=torch.float64)
    theta = centre.clone()
    value = objective(theta)
    converged = torch.zeros(m, dtype=torch.bool)
    for _ in range(_MAX_ITER):
        g, h = derivatives(theta)
        grad = torch.einsum("mkq,mk->mq", X, g) + lam[:, None] * (theta - centre)
        hess = torch.einsum("mkq,mk,mkr->mqr", X, h, X) + lam[:, None, None] * eye
        step = torch.linalg.solve(hess, grad.unsqueeze(-1)).squeeze(-1)
        size = torch.ones(m, dtype=torch.float64)
        for _ in range(20):  # halve the step where the objective rises
            trial = theta - size[:, None] * step
            new = objective(trial)
            worse = ~(new <= value + 1e-12 * value.abs())
            if not worse.any():
                break
            size = torch.where(worse, size / 2, size)
        theta, value = trial, torch.where(worse, value, new)
        converged = (step.abs().max(1).values * size) < 1e-8
        if converged.all():
            break
    g, h = derivatives(theta)
    hess = torch.einsum("mkq,mk,mkr->mqr", X, h, X) + lam[:, None, None] * eye
    scores = X * g.unsqueeze(-1)  # [m, k, q]
    meat = torch.einsum("mkq,mkr->mqr", scores, scores) * (k / max(k - q, 1))
    bread = torch.linalg.inv(hess)
    covariance = (bread @ meat @ bread).numpy().copy()
    theta = theta.numpy().copy()
    bad = ~converged.numpy() | ~np.isfinite(theta).all(1)
    bad |= ~np.isfinite(covariance).all((1, 2))
    theta[bad] = np.nan
    covariance[bad] = np.nan
    return theta, covariance

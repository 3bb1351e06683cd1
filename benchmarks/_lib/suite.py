"""The suite's datasets and scores, shared by the entry points that fit its
datasets (``run.py``, ``ablation.py``, ``search.py``, ``neighbors.py refresh``)."""

from __future__ import annotations

import numpy as np
import torch

from autoglm_graph.datasets import get_card, list_datasets

PROBA_CLIP = 1e-15


# ------------------------------------------------------------------ datasets


def resolve_datasets(tokens: list[str]) -> tuple[list[str], list[str]]:
    """Expand suite names into dataset names and drop unavailable datasets.

    Parameters
    ----------
    tokens : list of str
        Dataset names or suite names (``quickstart``, ``core``, ``scale``,
        ``synthetic``), in order; duplicates are dropped.

    Returns
    -------
    names : list of str
        Datasets to run.
    notes : list of str
        One line per dataset skipped because its package is missing.
    """
    table = list_datasets()
    suites = set(table["suite"])
    names: list[str] = []
    for token in tokens:
        if token in suites:
            names += list(table.loc[table["suite"] == token, "name"])
        elif token in set(table["name"]):
            names.append(token)
        else:
            raise SystemExit(
                f"Unknown dataset or suite {token!r}; expected one of "
                f"{sorted(suites)} or {sorted(table['name'])}."
            )
    names = list(dict.fromkeys(names))
    available = dict(zip(table["name"], table["available"], strict=True))
    requires = dict(zip(table["name"], table["requires"], strict=True))
    notes = [
        f"dataset {n} skipped: needs the package {requires[n]!r}"
        for n in names
        if not available[n]
    ]
    return [n for n in names if available[n]], notes


def family_parameters(name: str) -> dict[str, float]:
    """Tweedie power and negative binomial theta of a dataset, from its card.

    ``make_varying_coefficients`` draws negative binomial data with variance
    ``mu + noise**2 * mu**2``, so a synthetic card's ``noise`` gives theta.
    """
    params = get_card(name).family_params
    theta = params.get("theta", params.get("noise", 1.0) ** 2)
    return {"power": float(params.get("power", 1.5)), "theta": float(theta)}


# ------------------------------------------------------------------- metrics


def _clip_proba(proba: np.ndarray) -> np.ndarray:
    return np.clip(np.asarray(proba, dtype=np.float64), PROBA_CLIP, 1 - PROBA_CLIP)


def mean_deviance(
    family, y: np.ndarray, mean: np.ndarray, sample_weight: np.ndarray | None = None
) -> float:
    """Mean unit deviance of ``y`` under the predicted mean, with our family.

    Parameters
    ----------
    family : autoglm_graph.Family
    y : ndarray of shape (n,)
        Target; int class codes for binomial and multinomial.
    mean : ndarray of shape (n,) or (n, n_classes)
        Predicted mean, or class probabilities for classifiers.
    sample_weight : ndarray of shape (n,) or None
        Weights of the rows' deviances (None: the plain mean).

    Returns
    -------
    float
    """
    target, mu = _target_and_mean(family, y, mean)
    weight = None if sample_weight is None else torch.as_tensor(sample_weight)
    return float(family.deviance(target, family.link(mu), weight))


def unit_deviances(family, y: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """Each row's unit deviance of ``y`` under the predicted mean (the terms
    :func:`mean_deviance` averages)."""
    target, mu = _target_and_mean(family, y, mean)
    return family.unit_deviance(target, family.link(mu)).numpy()


def _target_and_mean(family, y: np.ndarray, mean: np.ndarray) -> tuple:
    """``y`` and the mean as the family's float64 tensors (class codes one-hot,
    probabilities clipped)."""
    if family.name == "binomial":
        return torch.as_tensor(y, dtype=torch.float64), torch.as_tensor(
            _clip_proba(mean)[:, 1]
        )
    if family.name == "multinomial":
        return torch.as_tensor(np.eye(mean.shape[1])[y]), torch.as_tensor(
            _clip_proba(mean)
        )
    return (
        torch.as_tensor(y, dtype=torch.float64),
        torch.as_tensor(np.asarray(mean, dtype=np.float64)),
    )


def ensemble_mean(family_name: str, means: list[np.ndarray]) -> np.ndarray:
    """The prediction of the model whose linear predictor is the average of
    the fits' linear predictors (their per-row coefficients averaged).

    Parameters
    ----------
    family_name : str
        Family of the fits; its link is identity (gaussian), log (the other
        regression families) or logit/softmax (binomial, multinomial).
    means : list of ndarray
        Each fit's predicted mean, shape (n,), or class probabilities, shape
        (n, n_classes), for binomial and multinomial.

    Returns
    -------
    ndarray
        Predicted mean, or class probabilities, of the averaged model.
    """
    stacked = np.stack([np.asarray(m, dtype=np.float64) for m in means])
    if family_name in ("binomial", "multinomial"):
        # Softmax of the mean logits: the normalised geometric mean.
        logits = np.log(_clip_proba(stacked)).mean(axis=0)
        proba = np.exp(logits - logits.max(axis=1, keepdims=True))
        return proba / proba.sum(axis=1, keepdims=True)
    if family_name == "gaussian":
        return stacked.mean(axis=0)
    return np.exp(np.log(stacked).mean(axis=0))


def null_mean(ds, n_classes: int | None) -> np.ndarray:
    """Prediction of the intercept-only model fitted on the training part."""
    n_test = len(ds.y_test)
    if n_classes is not None:
        p = np.bincount(ds.y_train, minlength=n_classes) / len(ds.y_train)
        return np.tile(p, (n_test, 1))
    if ds.offset_train is None:
        return np.full(n_test, ds.y_train.mean())
    rate = ds.y_train.sum() / np.exp(ds.offset_train).sum()
    return rate * np.exp(ds.offset_test)


def score(family, ds, mean: np.ndarray, n_classes: int | None) -> dict:
    """Test deviance, D², and log-loss and accuracy for classifiers."""
    deviance = mean_deviance(family, ds.y_test, mean)
    null = mean_deviance(family, ds.y_test, null_mean(ds, n_classes))
    out = {"deviance": deviance, "d2": 1.0 - deviance / null}
    if n_classes is not None:
        out["log_loss"] = deviance / 2.0
        out["accuracy"] = float(np.mean(np.argmax(mean, axis=1) == ds.y_test))
    return out

"""Parameter and input checks shared by the estimators.

Each error names the parameter, what was expected and what was received.
"""

from __future__ import annotations

import numbers
import sys

import numpy as np
import pandas as pd

from ._lazy import torch


def check_number(
    name: str,
    value,
    *,
    integer: bool = False,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    allow_none: bool = False,
    allow_inf: bool = False,
) -> None:
    """Raise a ValueError unless ``value`` is a number in the given interval."""
    if value is None and allow_none:
        return
    kind = numbers.Integral if integer else numbers.Real
    what = "an integer" if integer else "a number"
    if isinstance(value, bool) or not isinstance(value, kind):
        raise ValueError(f"The '{name}' parameter must be {what}; got {value!r}.")
    if isinstance(value, np.generic):  # say -1.0, not np.float64(-1.0)
        value = value.item()
    if np.isnan(value) or (np.isinf(value) and not allow_inf):
        raise ValueError(f"The '{name}' parameter must be finite; got {value!r}.")
    if low is not None and (value < low or (low_open and value == low)):
        bound = ">" if low_open else ">="
        raise ValueError(
            f"The '{name}' parameter must be {bound} {low}; got {value!r}."
        )
    if high is not None and (value > high or (high_open and value == high)):
        bound = "<" if high_open else "<="
        raise ValueError(
            f"The '{name}' parameter must be {bound} {high}; got {value!r}."
        )


def check_callbacks(callbacks) -> None:
    """Raise a ValueError unless ``callbacks`` is None or a list of objects with
    an ``on_epoch_end(trainer, logs)`` method (``callbacks=[1]`` failed with an
    AttributeError in the first epoch)."""
    if callbacks is None:
        return
    if not isinstance(callbacks, list | tuple):
        raise ValueError(
            f"The 'callbacks' parameter must be a list or None; got {callbacks!r}."
        )
    for callback in callbacks:
        if not callable(getattr(callback, "on_epoch_end", None)):
            raise ValueError(
                "The 'callbacks' parameter must hold objects with an "
                f"on_epoch_end(trainer, logs) method; got {callback!r}."
            )


def check_option(name: str, value, options: tuple) -> None:
    """Raise a ValueError unless ``value`` is one of ``options``."""
    if value not in options:
        expected = ", ".join(repr(o) for o in options)
        raise ValueError(
            f"The '{name}' parameter must be one of {expected}; got {value!r}."
        )


#: The device types a fit runs on (a "meta" device has no data to train on).
DEVICE_TYPES = ("cpu", "cuda", "mps")


def resolve_device(device: str | torch.device) -> torch.device:
    """'auto' -> CUDA when available, else CPU; anything else as torch reads it."""
    if isinstance(device, str) and device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(
            f"The 'device' parameter must be 'auto' or a torch device; got {device!r}."
        ) from exc
    if resolved.type not in DEVICE_TYPES:
        raise ValueError(
            f"The 'device' parameter must be 'auto' or a {', '.join(DEVICE_TYPES)} "
            f"device; got {device!r}."
        )
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} was requested but CUDA is not available.")
    return resolved


PRECISIONS = ("auto", "fp32", "bf16", "fp16")
#: The values of ``message_passing`` (the layers are in
#: :mod:`autoglm_graph.network.modules`; here, so that a model is checked
#: without importing them).
MESSAGE_PASSING = ("auto", "fused", "pyg")


def resolve_precision(precision: str, device: torch.device) -> str:
    """'auto' -> fp32 on every device: reduced precision is used only where a user asks.

    Autocast is measured no faster at the network's width (64 channels) on a GPU
    (H200: a 1M-row training step 0.081 s in bf16 against 0.081 s in fp32) nor on
    a CPU, and it moves test deviances: ``docs/decisions/precision.md``.
    """
    check_option("precision", precision, PRECISIONS)
    return "fp32" if precision == "auto" else precision


class OffsetWarning(UserWarning):
    """An offset at predict that the fitted model did not have in ``fit``."""


def align_to_rows(values, X, name: str):
    """``values`` (an offset, sample weights) in the order of ``X``'s rows.

    A :class:`pandas.Series` beside a DataFrame ``X`` is matched by index
    label, as pandas aligns columns: reordered to ``X``'s index when it holds
    the same labels, refused when it does not (matching it by position would
    give rows each other's exposure). Anything else passes through.
    """
    if not isinstance(values, pd.Series) or not isinstance(X, pd.DataFrame):
        return values
    if values.index.equals(X.index):
        return values.to_numpy()
    unique = values.index.is_unique and X.index.is_unique
    if unique and len(values) == len(X) and values.index.isin(X.index).all():
        return values.reindex(X.index).to_numpy()
    absent = X.index[~X.index.isin(values.index)]
    extra = values.index[~values.index.isin(X.index)]
    detail = (
        f"{len(absent)} of X's row labels are not in it (e.g. {absent[0]!r})"
        if len(absent)
        else f"it has labels X does not (e.g. {extra[0]!r})"
        if len(extra)
        else "its labels are repeated"
    )
    raise ValueError(
        f"{name} is a pandas Series whose index differs from X's: {detail}. "
        f"Pass {name} with X's index, or {name}.to_numpy() to match rows by "
        "position."
    )


def check_offset(offset, n_samples: int) -> np.ndarray | None:
    """Validate an offset: None, a number (the same for every row, as
    ``log(exposure)`` of a portfolio observed for one period), or a finite
    1-d array of length n_samples."""
    if offset is None:
        return None
    offset = np.asarray(offset, dtype=np.float64)
    if offset.ndim == 0:
        offset = np.full(n_samples, float(offset))
    if offset.ndim != 1 or offset.shape[0] != n_samples:
        raise ValueError(
            f"offset must be a 1-d array with one value per row ({n_samples}); "
            f"got shape {offset.shape}."
        )
    if not np.all(np.isfinite(offset)):
        raise ValueError("offset contains NaN or infinity.")
    return offset


def caller_stacklevel() -> int:
    """The stacklevel of the first frame outside this package and scikit-learn,
    so that a warning points at the user's call, whatever wraps ``fit``."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith(
        ("autoglm_graph.", "sklearn.")
    ):
        frame, level = frame.f_back, level + 1
    return level

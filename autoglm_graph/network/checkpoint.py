"""Checkpoints of a fit in progress, and resuming from them.

A 1M-row fit runs for more than half an hour; a killed one used to start from
zero. :class:`Checkpoint` is a callback: every ``every`` epochs it writes the
training state (:meth:`~autoglm_graph.network.training.TrainingState.state_dict`:
weights, optimiser, weight average, graphs of the last refresh, the fit's
random stream, the best epoch so far, early stopping's counters) to ``path``,
atomically (a file beside it, then a rename). A later fit with the same
callback, rows and settings starts from that file instead of epoch 1, and on
the CPU ends with the model the uninterrupted fit would have given, bit for
bit (``tests/test_checkpoint.py`` kills a fit and compares).

The file holds tensors and plain values only and is read with
``torch.load(weights_only=True)``: loading it runs no code.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path

import torch

from ..utils import check_number

__all__ = ["Checkpoint"]

#: Version of the checkpoint's layout; another version starts afresh.
FORMAT = 1


class Checkpoint:
    """Save the training state every ``every`` epochs; resume from it.

    Parameters
    ----------
    path : str or path-like
        The checkpoint file. If it exists when a fit starts and was written by
        a fit of the same rows and settings, the fit resumes from it; if it
        belongs to another fit, a warning says so and the fit starts from
        epoch 1 (and overwrites it at its first checkpoint).
    every : int, default=10
        Epochs between checkpoints.

    Examples
    --------
    >>> from autoglm_graph import GraphGLMRegressor
    >>> from autoglm_graph.network.checkpoint import Checkpoint
    >>> model = GraphGLMRegressor(callbacks=[Checkpoint("fit.ckpt", every=5)])
    """

    def __init__(self, path, every: int = 10) -> None:
        self.path = path
        self.every = every

    def on_train_begin(self, trainer, train, val) -> None:
        check_number("every", self.every, low=1, integer=True)
        self._fingerprint = _fingerprint(trainer, train, val)
        path = Path(self.path)
        if not path.exists():
            return
        state = torch.load(path, weights_only=True)
        if (
            not isinstance(state, dict)
            or state.get("format") != FORMAT
            or state.get("fingerprint") != self._fingerprint
        ):
            warnings.warn(
                f"The checkpoint {str(path)!r} was written by another fit (other "
                "rows, settings or version); this fit starts from epoch 1 and "
                "will overwrite it.",
                UserWarning,
                stacklevel=2,
            )
            return
        trainer.load_state_dict(state["training"])

    def on_epoch_end(self, trainer, logs: dict) -> bool:
        if logs["epoch"] % self.every == 0:
            self._write(trainer)
        return False

    def _write(self, trainer) -> None:
        path = Path(self.path)
        partial = path.with_name(f".{path.name}.partial")
        state = {
            "format": FORMAT,
            "fingerprint": self._fingerprint,
            "training": trainer.state_dict(),
        }
        with open(partial, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)  # the old checkpoint or the new, never half


def _fingerprint(trainer, train, val) -> str:
    """What makes two fits the same fit: rows, settings, network, version."""
    from ..utils import package_version

    __version__ = package_version()

    digest = hashlib.sha256()
    for rows in (train, val):
        if rows is None:
            continue
        tensors = (rows.context, rows.y, rows.weight, rows.eta_global, rows.targets)
        for tensor in tensors:
            if tensor is not None:
                digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    config = trainer.config
    settings = {k: v for k, v in config.settings().items() if k != "verbose"}
    digest.update(repr(settings).encode())
    digest.update(
        repr((config.net, config.graph, config.precision, config.family)).encode()
    )
    stateful = [type(cb).__name__ for cb in trainer.stateful_callbacks()]
    digest.update(repr(stateful).encode())
    digest.update(__version__.encode())
    return digest.hexdigest()

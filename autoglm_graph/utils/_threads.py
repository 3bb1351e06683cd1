"""Thread limits of a fit or a prediction: scikit-learn's ``n_jobs``.

torch's intra-op pool defaults to every core, and so do BLAS and OpenMP. On a
machine shared with another process, or under ``GridSearchCV(n_jobs=2)`` and
several Optuna workers, that oversubscribes the cores: slowdowns of 5-50x
were measured on the 2-core CI machine. An estimator therefore runs with
``n_jobs`` threads (scikit-learn's meaning: ``None`` is 1 unless a joblib
``parallel_config`` says otherwise, ``-1`` all cores) for the duration of a
call and then restores the caller's settings. faiss follows torch's setting
(:mod:`autoglm_graph.neighbors._faiss`). A process that has not imported torch (the
prediction of a model that is the global GLM) has no torch pool to limit and
does not import torch for it.
"""

from __future__ import annotations

import contextlib
import functools
import numbers
import os
import sys
from collections.abc import Callable, Iterator

from joblib import effective_n_jobs
from threadpoolctl import ThreadpoolController

__all__ = ["limit_threads", "n_threads", "with_thread_limit"]


@functools.cache
def _controller() -> ThreadpoolController:
    # Inspecting the loaded libraries costs milliseconds: done once, so that
    # a prediction of one row does not pay for it on every call.
    return ThreadpoolController()


def n_threads(n_jobs: int | None) -> int:
    """Threads that ``n_jobs`` stands for (at least 1).

    An invalid value counts as 1 here: the estimator's parameter validation,
    which runs inside the limit, reports it by name.
    """
    valid = n_jobs is None or (
        isinstance(n_jobs, numbers.Integral)
        and not isinstance(n_jobs, bool)
        and n_jobs != 0
    )
    if not valid:
        return 1
    # More threads than cores only oversubscribe (and n_jobs=10**9 would make
    # the OpenMP runtime try to allocate hundreds of GB).
    return max(1, min(int(effective_n_jobs(n_jobs)), os.cpu_count() or 1))


@contextlib.contextmanager
def limit_threads(n_jobs: int | None) -> Iterator[int]:
    """Run the block with ``n_jobs`` torch, BLAS and OpenMP threads.

    Yields the number of threads; the caller's torch thread count and
    thread-pool limits are restored on exit. torch's count is set when torch
    is imported (:func:`with_thread_limit` imports it for the methods it
    wraps, which use it).
    """
    threads = n_threads(n_jobs)
    torch = sys.modules.get("torch")
    previous = None if torch is None else torch.get_num_threads()
    if torch is not None:
        torch.set_num_threads(threads)
    try:
        with _controller().limit(limits=threads):
            yield threads
    finally:
        if torch is not None:
            torch.set_num_threads(previous)


def with_thread_limit(method: Callable) -> Callable:
    """Decorate an estimator method to run under ``limit_threads(self.n_jobs)``."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        import torch  # noqa: F401  (fit and explain run torch: limit its pool too)

        with limit_threads(getattr(self, "n_jobs", None)):
            return method(self, *args, **kwargs)

    return wrapper

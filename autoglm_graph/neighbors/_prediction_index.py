"""The prediction index: an HNSW index over the training rows, calibrated once.

Prediction searches each new row's neighbours among the training rows. From
``FitPolicy.predict_index_min_rows`` training rows (``graph_backend="auto"`` on a
CPU, faiss installed) the fit builds an HNSW index over their graph-space
vectors and calibrates its efSearch on held-out rows (the validation rows'
vectors; without them, the training rows each searched without itself) to
``FitPolicy.predict_index_recall``: the smallest efSearch on the ladder of
``FitPolicy.index`` (:class:`~autoglm_graph.policy.IndexSettings`, which also
gives the index's M and efConstruction) whose recall@k against the exact
search reaches it. Where none does, prediction keeps the exact search.

What the fit chose (:class:`PredictionIndex`: M, efConstruction, efSearch and
the recall measured) is saved with the model, not the index: the index is
rebuilt from the training rows at the first search after loading or
unpickling. It is built with one thread, so that every build gives the same
graph (faiss's parallel insertion follows the threads' schedule). faiss
searches an HNSW index query by query, so a row's neighbours, hence its
prediction, do not depend on the other rows of the call
(``docs/decisions/prediction_index.md``).
"""

from __future__ import annotations

import numbers
from dataclasses import asdict, dataclass

import torch
from torch import Tensor

from ..policy import FitPolicy
from ..utils import limit_threads
from ._search import CosineNeighbors, _normalize_rows

__all__ = ["PredictionIndex", "fit_prediction_index"]

#: Bounds a model file may ask for (a loaded file is not trusted).
_LIMITS = {"m": 256, "ef_construction": 4096, "ef_search": 4096}


@dataclass(frozen=True)
class PredictionIndex:
    """The settings of a prediction index, as calibrated by the fit.

    Attributes
    ----------
    m : int
        HNSW graph degree.
    ef_construction : int
        Candidates kept while inserting rows.
    ef_search : int
        Candidates kept while searching (the calibrated one).
    recall : float
        Recall@k of that efSearch on the held-out calibration rows.
    """

    m: int
    ef_construction: int
    ef_search: int
    recall: float

    def build(
        self, base: Tensor, n_neighbors: int, policy: FitPolicy | None = None
    ) -> CosineNeighbors:
        """The index over ``base`` (one thread: the same graph every time);
        ``policy`` (None: the defaults) gives what these settings leave out."""
        params = {
            "m": self.m,
            "ef_construction": self.ef_construction,
            "ef_search": self.ef_search,
        }
        with limit_threads(1):
            return CosineNeighbors(
                n_neighbors,
                device=base.device,
                dtype=base.dtype,
                backend="faiss",
                index_params=params,
                policy=policy,
            ).fit(base)

    def to_config(self) -> dict:
        """Plain values (JSON-ready)."""
        return asdict(self)

    @classmethod
    def from_config(cls, config: object) -> PredictionIndex:
        """The inverse of :meth:`to_config`; ``ValueError`` for a malformed one."""
        names = ("m", "ef_construction", "ef_search", "recall")
        if not isinstance(config, dict) or set(config) != set(names):
            raise ValueError(f"Bad prediction index configuration: {config!r}.")
        for name, high in _LIMITS.items():
            _check_count(name, config[name], high)
        recall = config["recall"]
        if not isinstance(recall, numbers.Real) or not 0.0 <= recall <= 1.0:
            raise ValueError(f"Bad prediction index recall: {recall!r}.")
        return cls(**{name: config[name] for name in names})


def _check_count(name: str, value: object, high: int) -> None:
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not ok or not 1 <= value <= high:
        raise ValueError(f"Bad prediction index {name}: {value!r}.")


def fit_prediction_index(
    base: Tensor,
    held_out: Tensor | None,
    n_neighbors: int,
    policy: FitPolicy | None = None,
) -> tuple[PredictionIndex, CosineNeighbors] | None:
    """Build and calibrate the prediction index over ``base`` (float32 vectors).

    ``held_out``: vectors of rows not in ``base`` to calibrate on (None: the
    rows of ``base``, each without itself). ``policy`` (None: the defaults)
    gives the target recall (``predict_index_recall``) and the index's
    settings (``index``). Returns the settings and the fitted index, or None
    where no efSearch reaches the target.
    """
    policy = policy or FitPolicy()
    target_recall = policy.predict_index_recall
    settings = policy.index
    m, ef_construction = settings.prediction_m, settings.prediction_ef_construction
    spec = PredictionIndex(m, ef_construction, 1, 0.0)
    fitted = spec.build(base, n_neighbors, policy)
    hnsw = fitted.index_
    exclude_self = held_out is None or held_out.shape[0] == 0
    queries = fitted.base_ if exclude_self else _normalized(fitted, held_out)
    k_searched = min(n_neighbors, base.shape[0] - int(exclude_self)) + exclude_self
    data = queries.detach().to("cpu", torch.float32).contiguous().numpy()
    hnsw.ef_search, hnsw.target_recall = None, target_recall
    ef_search = hnsw.calibrated_ef_search(data, k_searched, exclude_self)
    recall = hnsw.calibration[(k_searched, exclude_self)][1]
    if recall < target_recall:
        return None
    hnsw.ef_search = ef_search
    spec = PredictionIndex(m, ef_construction, int(ef_search), round(recall, 4))
    return spec, fitted


def _normalized(fitted: CosineNeighbors, rows: Tensor) -> Tensor:
    return _normalize_rows(rows.detach().to(fitted.base_.device, fitted.base_.dtype))

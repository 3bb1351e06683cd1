"""The corpus runner's models, fits and cache (``benchmarks/corpus.py``).

A :class:`ModelSpec` is one column of the report: a model of the registry of
:mod:`benchmarks._lib.models` (the peers, and ``graphglm_global``: the global
GLM), or a GraphGLM at given estimator parameters, of this tree or of a git
revision (extracted by :func:`benchmarks._lib.revisions.import_revision`).

:func:`fit_unit` fits every model of a run on one split of one dataset, in the
worker process that runs it (one thread: :func:`init_worker`). The fits that
do not depend on this tree's code (the peers, and a revision's GraphGLM) are
cached: one JSON file per fit under ``<cache>/<dataset>/split<seed>/``, keyed
by the model (its parameters, a revision's commit), a hash of the split's data
(:meth:`Split.fingerprint`), the versions of the packages the model runs on
and a hash of the adapters' and the scores' source (``models.py``,
``peers.py``, ``task.py``, ``suite.py``). glum's and the other design-matrix
peers' input comes from this tree's ``TabularPreprocessor``: a change of the
preprocessor alone does not refit them (clear the cache, or pass another
``--cache``, after one).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import os
import tempfile
import time
import traceback
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from autoglm_graph import get_family
from benchmarks._lib import corpus_data, models
from benchmarks._lib.suite import score
from benchmarks._lib.task import NotApplicable, Task

LIB = Path(__file__).resolve().parent
#: The sources a cached fit's adapter and score come from.
ADAPTER_SOURCES = ("models.py", "peers.py", "task.py", "suite.py")
BASE_PACKAGES = ("numpy", "pandas", "scipy", "scikit-learn")
#: The packages a cached model runs on, beside :data:`BASE_PACKAGES`.
MODEL_PACKAGES = {
    "glum": ("glum",),
    "lightgbm": ("lightgbm",),
    "lightgbm_tuned": ("lightgbm", "optuna"),
    "ebm": ("interpret-core",),
    "contextualized": ("contextualized-ml", "torch"),
    "mlp": (),
    "knn": (),
    "sklearn_glm": (),
    "graphglm": ("torch", "torch-geometric", "faiss-cpu", "formulaic"),
}
#: The registry's names for this tree's GraphGLM at fixed settings: never cached.
THIS_TREE = ("graphglm_global", "graphglm_bf16")
#: Names of ``--models`` besides the registry's: ``glm`` is the global GLM.
ALIASES = {"glm": "graphglm_global"}


@dataclass(frozen=True)
class ModelSpec:
    """One model of a run.

    Attributes
    ----------
    label : str
        Its name in the report.
    registry : str or None
        A name of the models registry; None: a GraphGLM at ``params``.
    params : tuple of (str, object)
        The GraphGLM's estimator parameters (a ``fit_policy`` among them).
    revision, commit : str or None
        The git revision of a GraphGLM (as given, and its full hash); None:
        this tree.
    module : str or None
        The revision's package name in the extraction folder.
    """

    label: str
    registry: str | None = None
    params: tuple = ()
    revision: str | None = None
    commit: str | None = None
    module: str | None = None

    @property
    def is_graphglm(self) -> bool:
        """A GraphGLM variant (judged by the decision rule)."""
        return self.registry is None

    @property
    def cached(self) -> bool:
        """Its fits do not depend on this tree's GraphGLM."""
        if self.registry is not None:
            return self.registry not in THIS_TREE
        return self.commit is not None

    def cache_name(self) -> str:
        """The file-name stem of its cached fits."""
        if self.registry is not None:
            return self.registry
        return f"graphglm@{self.commit[:12]}"

    def describe(self) -> dict:
        """Its fields, with the parameters as text (for the JSON record)."""
        out = asdict(self)
        out["params"] = {k: repr(v) for k, v in self.params}
        return out


def registry_spec(name: str) -> ModelSpec:
    """``--models NAME``: ``graphglm`` is this tree's default GraphGLM, ``glm``
    the global GLM, any other name the registry's model."""
    if name == "graphglm":
        return ModelSpec(label="graphglm")
    return ModelSpec(label=name, registry=ALIASES.get(name, name))


# --------------------------------------------------------------------- fits


_LIMITS: list = []  # the thread limits of this process, kept alive


def init_worker() -> None:
    """One thread for torch and the BLAS/OpenMP pools of this process (the
    environment's ``OMP_NUM_THREADS`` and friends are set by the runner before
    it starts the workers), then an untimed tiny fit of GraphGLM and LightGBM
    so that a process's one-time costs land in no fit's seconds."""
    torch.set_num_threads(1)
    if not _LIMITS:
        _LIMITS.append(threadpool_limits(limits=1))
    from autoglm_graph.datasets import make_varying_coefficients

    X, y, _ = make_varying_coefficients(400, 3, family="poisson", random_state=0)
    warm = Task("poisson", threads=1, quick=True)
    for make in (
        lambda: models.GraphGLMModel(warm, max_epochs=2),
        lambda: models.lightgbm_gbm(warm),
    ):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # two epochs do not converge
                make().fit(X, y).predict(X)
        except Exception:  # a missing peer package: its own fits will say so
            pass


def score_family(split: corpus_data.Split):
    """The family a split is scored with: Poisson for negative binomial (the
    deviance of the mean alike for every model), tweedie at the split's power."""
    if split.family == "negative_binomial":
        return get_family("poisson")
    return get_family(split.family, power=split.power, theta=split.theta)


def adapter(spec: ModelSpec, task: Task):
    """The model adapter of ``spec`` for ``task``."""
    if spec.registry is not None:
        factories = {**models.MODELS, **models.EXTRA_MODELS}
        return factories[spec.registry](task)
    package = None if spec.module is None else importlib.import_module(spec.module)
    return models.GraphGLMModel(task, package=package, **dict(spec.params))


def fit_model(spec: ModelSpec, split: corpus_data.Split) -> dict:
    """Fit and score one model on one split; never raises.

    Returns
    -------
    dict
        ``status`` ("ok", "n/a" or "error"), ``note``, ``score`` (mean test
        deviance; log-loss for classifiers), ``deviance`` (the family's: twice
        the log-loss for classifiers), ``d2`` (against the training mean),
        ``fit_s``, ``predict_s``, and for
        a GraphGLM ``kept`` (the network kept), ``global_only_reason``,
        ``n_iter`` and ``fit_times`` (seconds by phase, where the version has
        them).
    """
    task = Task(
        split.family, power=split.power, theta=split.theta, seed=split.seed, threads=1
    )
    n_classes = None if split.classes is None else len(split.classes)
    try:
        model = adapter(spec, task)
        start = time.perf_counter()
        model.fit(split.X_train, split.y_train, split.offset_train, split.groups_train)
        fit_s = time.perf_counter() - start
        start = time.perf_counter()
        mean = np.asarray(model.predict(split.X_test, split.offset_test))
        predict_s = time.perf_counter() - start
        scores = score(score_family(split), split, mean, n_classes)
        record = {
            "status": "ok",
            "note": model.note() if hasattr(model, "note") else "",
            "score": scores["log_loss" if n_classes else "deviance"],
            "deviance": scores["deviance"],
            "d2": scores["d2"],
            "fit_s": fit_s,
            "predict_s": predict_s,
        }
        if isinstance(model, models.GraphGLMModel):
            record |= graphglm_facts(model.estimator)
    except NotApplicable as exc:
        return {"status": "n/a", "note": str(exc)}
    except Exception as exc:  # a failing model must not end a long run
        traceback.print_exc()
        return {"status": "error", "note": f"{type(exc).__name__}: {exc}"}
    return record


def graphglm_facts(est) -> dict:
    """Whether a fitted GraphGLM kept its network, why not, its epochs and its
    seconds by phase (None where a revision's version lacks the attribute)."""
    global_only = getattr(est, "is_global_only_", None)
    times = getattr(est, "fit_times_", None)
    return {
        "kept": None if global_only is None else not global_only,
        "global_only_reason": getattr(est, "global_only_reason_", None) or "",
        "n_iter": getattr(est, "n_iter_", None),
        "fit_times": None
        if times is None
        else {str(k): float(v) for k, v in times.items()},
    }


# -------------------------------------------------------------------- cache


def package_versions(names) -> dict[str, str | None]:
    """Installed version of each distribution (None: not installed)."""
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def adapters_hash() -> str:
    """A hash of the adapters' and the scores' source files."""
    digest = hashlib.sha256()
    for name in ADAPTER_SOURCES:
        digest.update((LIB / name).read_bytes())
    return digest.hexdigest()[:16]


def cache_key(spec: ModelSpec, fingerprint: str) -> dict:
    """What a cached fit of ``spec`` on a split must match."""
    model = spec.registry or "graphglm"
    return {
        "model": model,
        "params": [[k, repr(v)] for k, v in spec.params],
        "commit": spec.commit,
        "data": fingerprint,
        "versions": package_versions((*BASE_PACKAGES, *MODEL_PACKAGES.get(model, ()))),
        "adapters": adapters_hash(),
    }


def cache_path(folder: Path, split: corpus_data.Split, spec, key: dict) -> Path:
    """The file of a cached fit."""
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()
    return (
        Path(folder)
        / split.name
        / f"split{split.seed}"
        / f"{spec.cache_name()}-{digest[:16]}.json"
    )


def read_cache(path: Path, key: dict) -> dict | None:
    """The cached record at ``path`` if its key is ``key``, else None."""
    try:
        stored = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return stored["record"] if stored.get("key") == key else None


def write_cache(path: Path, key: dict, record: dict) -> None:
    """Store ``record`` at ``path`` (written whole, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"key": key, "record": record}, indent=1)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as f:
        f.write(text)
    os.replace(f.name, path)


# --------------------------------------------------------------------- unit


def fit_unit(
    entry: corpus_data.Entry, seed: int, specs: list[ModelSpec], cache: Path | None
) -> list[dict]:
    """Every model of ``specs`` on split ``seed`` of ``entry``, from the cache
    where it holds the fit (``cache``: its folder; None: no cache)."""
    head = {"dataset": entry.name, "family": entry.family, "split": seed}
    try:
        split = corpus_data.load_split(entry, seed)
    except Exception as exc:
        traceback.print_exc()
        note = f"preparation failed: {type(exc).__name__}: {exc}"
        return [
            {**head, "model": s.label, "status": "error", "note": note} for s in specs
        ]
    head |= {"n_train": len(split.y_train), "n_test": len(split.y_test)}
    fingerprint = split.fingerprint() if cache is not None else None
    records = []
    for spec in specs:
        path = key = record = None
        if cache is not None and spec.cached:
            key = cache_key(spec, fingerprint)
            path = cache_path(cache, split, spec, key)
            record = read_cache(path, key)
        from_cache = record is not None
        if record is None:
            record = fit_model(spec, split)
            if path is not None and record["status"] != "error":
                write_cache(path, key, record)
        records.append({**head, "model": spec.label, "cached": from_cache, **record})
    return records

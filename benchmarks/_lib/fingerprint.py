"""``ablation.py fingerprint``: hashes of default fits, to check that a change
which should not move results moves none.

Fits each dataset's default model (``random_state=0``, one torch thread) and
prints, per dataset, whether the network was kept, its best epoch, and short
hashes of the test predictions and of the first 50 test rows' per-row
coefficients (rounded to 1e-10). Run it on two checkouts and compare the lines.
"""

from __future__ import annotations

import argparse
import hashlib
import warnings

import numpy as np
import torch

from autoglm_graph import GraphGLMClassifier, GraphGLMRegressor
from autoglm_graph.datasets import load_dataset

#: Datasets and the rows each is cut to: a GLM-only fit, kept networks of
#: several families, categorical columns.
DATASETS = {
    "synthetic_poisson": 1500,
    "synthetic_multinomial": 1200,
    "star": 2000,
    "doctor_contacts": 2000,
    "diabetes": None,
}


def digest(values) -> str:
    """12 hex digits of the sha256 of ``values`` rounded to 1e-10."""
    array = np.round(np.asarray(values, dtype=float), 10)
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:12]


def fingerprint(name: str, max_rows: int | None, max_epochs: int) -> str:
    """One dataset's line: name, network kept, best epoch, two hashes."""
    data = load_dataset(name, random_state=0, max_rows=max_rows)
    classifier = data.family in ("binomial", "multinomial")
    params = {"random_state": 0, "max_epochs": max_epochs}
    if classifier:
        model = GraphGLMClassifier(**params)
    else:
        model = GraphGLMRegressor(family=data.family, **params)
    fit = {} if data.offset_train is None else {"offset": data.offset_train}
    model.fit(data.X_train, data.y_train, **fit)
    test = {} if data.offset_test is None else {"offset": data.offset_test}
    predict = model.predict_proba if classifier else model.predict
    head = data.X_test[:50]
    return " ".join(
        [
            name,
            str(not model.is_global_only_),
            str(getattr(model, "best_epoch_", None)),
            digest(predict(data.X_test, **test)),
            digest(model.local_coef(head).to_numpy()),
        ]
    )


def main(argv: list[str]) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--max-epochs", type=int, default=30)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    lines = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in args.datasets:
            lines.append(fingerprint(name, DATASETS.get(name), args.max_epochs))
            print(lines[-1], flush=True)
    return lines

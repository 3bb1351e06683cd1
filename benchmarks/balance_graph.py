"""Not kept (docs/decisions/balance_graph.md): balance ratio on predict(X_train) when the balance reuses the last training graph.

Variants: exact (as now), reuse (the kept epoch's training graph, self excluded,
validation rows' graph of the same refresh), self+k-1 (the row itself first, then
the first k-1 of the training graph). tests/test_balance.py's data and settings.
"""
import sys, warnings
import numpy as np, torch
from pathlib import Path
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from autoglm_graph import GraphGLMRegressor
from autoglm_graph.estimators import _glm_fit
from autoglm_graph.neighbors import NeighborGraph
from autoglm_graph.network import training as tr
from autoglm_graph.network import FittedNetwork
from test_balance import NETWORK, _data, _ratio
torch.set_num_threads(1)
warnings.simplefilter("ignore")
cap = {}
orig_snapshot = tr.TrainingState._snapshot
def snapshot(self, graph, epoch):
    out = orig_snapshot(self, graph, epoch); out.val_graph = self._val_graph; return out
tr.TrainingState._snapshot = snapshot
orig_fit = tr.Trainer.fit
def fit(self, *a, **k):
    r = orig_fit(self, *a, **k); cap["best"] = r.best; return r
tr.Trainer.fit = fit
orig_balance = _glm_fit.balance

def reuse_graph(est, n, with_self):
    best, net = cap["best"], est._fitted
    tg, vg = best.train_graph, best.val_graph
    k = tg.indices.shape[1]
    tp = torch.as_tensor(net.positions)
    idx = torch.zeros(n, k, dtype=torch.long); sim = torch.zeros(n, k); mask = torch.zeros(n, k, dtype=torch.bool)
    ti, ts, tm = tg.indices, tg.similarities.float(), tg.mask
    if with_self:
        own = torch.arange(len(tp))[:, None]
        ti = torch.cat([own, ti[:, : k - 1]], 1); ts = torch.cat([torch.ones(len(tp), 1), ts[:, : k - 1]], 1)
        tm = torch.cat([torch.ones(len(tp), 1, dtype=torch.bool), tm[:, : k - 1]], 1)
    idx[tp], sim[tp], mask[tp] = ti, ts, tm
    vp = est._validation_positions
    if vp is not None and len(vp):
        vp = torch.as_tensor(vp); idx[vp], sim[vp], mask[vp] = vg.indices, vg.similarities.float(), vg.mask
    return NeighborGraph(idx, sim, mask)

def patched(variant):
    def balance(est, rows):
        if variant == "exact" or est._fitted is None:
            return orig_balance(est, rows)
        g = reuse_graph(est, rows.design.shape[0], variant == "self+k-1")
        net = est._fitted
        saved = FittedNetwork.search
        FittedNetwork.search = lambda self, q: g
        old = est.fit_policy
        try:
            from autoglm_graph.policy import FitPolicy
            import dataclasses
            est.fit_policy = dataclasses.replace(old or FitPolicy(), predict_chunk=10**9)
            return orig_balance(est, rows)
        finally:
            FittedNetwork.search = saved; est.fit_policy = old
    return balance

for space in ("embedding", "input"):
    for groups in (False, True):
        for family, extra in [("poisson", {}), ("gamma", {}), ("tweedie", {"power": 1.5})]:
            X, y, w, off = _data(family)
            g = np.repeat(np.arange(100), 4) if groups else None
            out = []
            for variant in ("exact", "reuse", "self+k-1"):
                _glm_fit.balance = patched(variant)
                m = GraphGLMRegressor(balance=True, family=family, graph_space=space, **extra, **NETWORK)
                m.fit(X, y, sample_weight=w, offset=off, groups=g)
                out.append(f"{variant} {_ratio(m, X, y, w, off) - 1:+.2e}")
            print(f"{space:9s} groups={groups!s:5s} {family:8s}", "  ".join(out), flush=True)
_glm_fit.balance = orig_balance

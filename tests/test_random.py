"""Each fit owns its random stream: concurrent fits are reproducible."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

from autoglm_graph import GraphGLMRegressor
from autoglm_graph.network.modules import NetConfig

# device="cpu": equal to the bit is the CPU's guarantee (CUDA's atomic sums
# may add in another order).
SMALL = dict(hidden_channels=16, heads=2, max_epochs=6, family="poisson", device="cpu")


def _fit_in_threads(rows, params_per_thread):
    X, y = rows
    results: dict = {}
    start = threading.Barrier(len(params_per_thread))

    def work(i, params):
        model = GraphGLMRegressor(**SMALL, **params)
        start.wait()  # all fits draw at the same time
        results[i] = model.fit(X, y).predict(X)

    threads = [
        threading.Thread(target=work, args=(i, p))
        for i, p in enumerate(params_per_thread)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [results[i] for i in range(len(params_per_thread))]


def test_concurrent_seeded_fits_equal_a_fit_alone(poisson_600):
    X, y = poisson_600
    alone = GraphGLMRegressor(**SMALL, random_state=0).fit(X, y).predict(X)
    # Two fits of the same seed and one of another, all at once.
    same, again, other = _fit_in_threads(
        poisson_600, [{"random_state": 0}, {"random_state": 0}, {"random_state": 1}]
    )
    np.testing.assert_array_equal(same, alone)
    np.testing.assert_array_equal(again, alone)
    assert np.abs(other - alone).max() > 0  # the seed matters


def test_a_fit_leaves_the_global_generator_alone(poisson_600):
    X, y = poisson_600
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    GraphGLMRegressor(**SMALL, random_state=0).fit(X, y)
    torch.testing.assert_close(torch.rand(3), expected)


def test_seeded_build_is_the_global_seed_and_owns_the_stream():
    config = NetConfig(4, 5, hidden_channels=8, heads=2, dropout=0.5)
    torch.manual_seed(7)
    reference = config.build()
    follow = torch.rand(4)
    net = config.build(seed=7)
    for got, expected in zip(net.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(got, expected)
    # Its dropout continues the seed's stream where the build left it.
    torch.testing.assert_close(torch.rand(4, generator=net.generator), follow)


@pytest.mark.parametrize("keep", [0.9, 0.5, 0.1])
def test_keep_mask_keeps_its_stated_share_independently(keep):
    from autoglm_graph.network._random import keep_mask

    like = torch.empty(400, 500)
    mask, probability = keep_mask(like, keep, torch.Generator().manual_seed(0))
    assert mask.shape == like.shape and mask.dtype == torch.bool
    assert probability == round(keep * 2**16) / 2**16
    n = mask.numel()
    share = mask.double().mean().item()
    assert abs(share - probability) < 5 * np.sqrt(probability * (1 - probability) / n)
    # Four entries share one 64-bit draw: neighbours must still be independent.
    flat = mask.reshape(-1, 4).double().numpy()
    correlation = np.corrcoef(flat[:, 0], flat[:, 1])[0, 1]
    assert abs(correlation) < 5 / np.sqrt(n / 4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_keep_mask_in_a_float_dtype_is_the_boolean_mask_as_ones_and_zeros(dtype):
    from autoglm_graph.network._random import keep_mask

    like = torch.empty(300, 70)
    boolean, p_bool = keep_mask(like, 0.8, torch.Generator().manual_seed(5))
    floating, p_float = keep_mask(
        like, 0.8, torch.Generator().manual_seed(5), dtype=dtype
    )
    assert floating.dtype == dtype and p_float == p_bool
    assert torch.equal(floating, boolean.to(dtype))


def test_dropout_is_unbiased_reproducible_and_exact_at_the_ends():
    from autoglm_graph.network._random import dropout

    x = torch.ones(200_000)
    first = dropout(x, 0.3, True, torch.Generator().manual_seed(3))
    again = dropout(x, 0.3, True, torch.Generator().manual_seed(3))
    assert torch.equal(first, again)
    values = first.unique().tolist()
    assert values[0] == 0.0 and values[1:] == [pytest.approx(1 / 0.7, rel=1e-4)]
    assert first.mean().item() == pytest.approx(1.0, abs=5 * np.sqrt(0.3 / 0.7 / 2e5))
    generator = torch.Generator().manual_seed(0)
    assert torch.equal(dropout(x, 1.0, True, generator), torch.zeros_like(x))
    assert torch.equal(dropout(x, 0.3, False, generator), x)

"""How many query rows a similarity tile holds, per device, from the
policy's :class:`~autoglm_graph.policy.TileSettings`."""

from __future__ import annotations

import numpy as np
import torch

from autoglm_graph import FitPolicy, cosine_topk
from autoglm_graph.neighbors import _topk
from autoglm_graph.neighbors._topk import _auto_chunk_size
from autoglm_graph.policy import TileSettings

TILES = TileSettings()


def test_a_cuda_tile_takes_a_share_of_the_free_memory(monkeypatch):
    # A device with 16 GiB free: a quarter of it, 4 GiB, per tile.
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (16 * 2**30, 0))
    rows = _auto_chunk_size(1_000_000, 4, torch.device("cuda"), TILES)
    assert rows == 4 * 2**30 // 4_000_000
    half = TileSettings(cuda_free_share=2)
    rows = _auto_chunk_size(1_000_000, 4, torch.device("cuda"), half)
    assert rows == 8 * 2**30 // 4_000_000


def test_a_cuda_tile_is_capped(monkeypatch):
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device: (140 * 2**30, 0))
    assert (
        _auto_chunk_size(1_000_000, 4, torch.device("cuda"), TILES)
        == 8 * 2**30 // 4_000_000
    )


def test_a_cpu_tile_stays_in_the_cache_sized_target():
    cpu = torch.device("cpu")
    assert _auto_chunk_size(100_000, 4, cpu, TILES) == 32 * 2**20 // 400_000
    assert _auto_chunk_size(10**9, 4, cpu, TILES) == 1
    small = TileSettings(cpu_tile_bytes=2**20)
    assert _auto_chunk_size(100_000, 4, cpu, small) == 2**20 // 400_000


def test_the_policy_s_tiles_reach_the_search_and_leave_its_result(monkeypatch):
    """A search reads its policy's tiles (not a module's), and they change
    only its time and memory: small tiles and two slabs give the same lists."""
    seen = []
    fill = _topk.fill_topk

    def spy(*args):
        seen.append(args[-1])
        return fill(*args)

    monkeypatch.setattr("autoglm_graph.neighbors._search.fill_topk", spy)
    X = np.random.default_rng(0).normal(size=(3000, 8))
    tiles = TileSettings(n_slabs=2, cpu_tile_bytes=4096)
    # float64: the tiled search (faiss's exact one is float32's).
    small = cosine_topk(
        X, n_neighbors=5, dtype=torch.float64, policy=FitPolicy(tiles=tiles)
    )
    plain = cosine_topk(X, n_neighbors=5, dtype=torch.float64)
    assert seen == [tiles, TILES]
    np.testing.assert_array_equal(small.indices.numpy(), plain.indices.numpy())
    np.testing.assert_allclose(small.similarities.numpy(), plain.similarities.numpy())

"""Which precision ``precision="auto"`` trains in (docs/decisions/precision.md)."""

from __future__ import annotations

import pytest
import torch

from autoglm_graph.utils._validation import resolve_precision


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_auto_is_fp32_on_every_device(device):
    # bf16 was measured no faster on either device at the network's width.
    assert resolve_precision("auto", torch.device(device)) == "fp32"


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_an_explicit_precision_is_kept(precision):
    assert resolve_precision(precision, torch.device("cuda")) == precision


def test_an_unknown_precision_is_named():
    with pytest.raises(ValueError, match="precision"):
        resolve_precision("fp8", torch.device("cpu"))

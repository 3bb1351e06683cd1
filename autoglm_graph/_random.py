"""Per-fit random streams: fits in concurrent threads stay reproducible.

torch draws dropout masks and initial weights from one process-global
generator. Two threads fitting seeded models at once (``GraphGLMSearchCV``
with ``n_jobs=2``, or a user's thread pool) interleave their draws on it and
got different models run to run (max prediction difference 0.13). Here each
fit owns a :class:`torch.Generator`:

- initial weights are still drawn by the layers' own ``reset_parameters``
  (torch and torch_geometric offer no generator there), so building a network
  from a seed holds :data:`BUILD_LOCK` while it seeds and uses the global
  generator, and restores it afterwards;
- the fit's generator starts where that build left the global one, so a CPU
  fit draws exactly the masks it drew from the global generator before this
  module existed (same models, bit for bit);
- :func:`dropout` draws its mask from the fit's generator, as ``F.dropout``
  does from the global one (same kernel: ``bernoulli_``, then the scaling);
- activation checkpointing replays the global generator by itself; for the
  fit's generator :func:`replay_context` records its state when the forward
  runs and replays it for the recomputation.

torch_geometric's own layers (``message_passing="pyg"``) draw their dropout
from the global generator: that path is reproducible one fit at a time only.
"""

from __future__ import annotations

import contextlib
import threading

import torch
from torch import Tensor

__all__ = ["BUILD_LOCK", "dropout", "on_device", "replay_context"]

#: Held while a network is built from a seed on the global generator.
BUILD_LOCK = threading.Lock()


def on_device(generator: torch.Generator, device: torch.device | str):
    """``generator`` itself on the CPU; elsewhere one seeded from its stream
    (a mask on a CUDA tensor needs a CUDA generator)."""
    device = torch.device(device)
    if device.type == "cpu":
        return generator
    moved = torch.Generator(device=device)
    moved.manual_seed(int(torch.randint(2**62, (1,), generator=generator)))
    return moved


def dropout(
    x: Tensor, p: float, training: bool, generator: torch.Generator | None
) -> Tensor:
    """``F.dropout(x, p, training)``, with the mask from ``generator``.

    ``generator=None`` is ``F.dropout`` itself (the global generator).
    """
    if generator is None or not training or p == 0:
        return torch.nn.functional.dropout(x, p=p, training=training)
    if p == 1:
        return torch.zeros_like(x)
    noise = torch.empty_like(x).bernoulli_(1 - p, generator=generator)
    return x * noise.div_(1 - p)


def replay_context(generator: torch.Generator | None):
    """``context_fn`` of :func:`torch.utils.checkpoint.checkpoint` that makes
    the recomputation draw the same masks from ``generator`` as the forward.

    The generator's state after the recomputation is put back, so the draws
    that follow are those of a fit without checkpointing.
    """
    state: dict = {}

    @contextlib.contextmanager
    def forward():
        if generator is not None:
            state["before"] = generator.get_state()
        yield

    @contextlib.contextmanager
    def recompute():
        if generator is None:
            yield
            return
        after = generator.get_state()
        generator.set_state(state["before"])
        try:
            yield
        finally:
            generator.set_state(after)

    return forward(), recompute()

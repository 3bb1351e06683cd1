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
- the fit's generator starts where that build left the global one;
- :func:`dropout` draws its mask from the fit's generator, 16 random bits per
  entry (:func:`keep_mask`), a quarter of the draws of ``F.dropout``'s
  ``bernoulli_``;
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

__all__ = ["BUILD_LOCK", "dropout", "keep_mask", "on_device", "replay_context"]

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
    """Dropout of ``x`` with rate ``p``, the mask drawn from ``generator``.

    ``generator=None`` is ``F.dropout`` itself (the global generator). With a
    generator the mask is :func:`keep_mask`'s and the kept entries are scaled
    by the inverse of its exact keep probability, so that the expectation is
    ``x``, as in ``F.dropout``.
    """
    if generator is None or not training or p == 0:
        return torch.nn.functional.dropout(x, p=p, training=training)
    keep, keep_probability = keep_mask(x, 1 - p, generator, dtype=x.dtype)
    if keep_probability == 1:
        return x
    if keep_probability == 0:
        return torch.zeros_like(x)
    # A float mask: autograd keeps it as F.dropout's, and a bool one costs a
    # type-promoting product, slower at 40k rows.
    return x * keep.mul_(1 / keep_probability)


#: Random bits per mask entry: the keep probability is a multiple of 2**-16.
MASK_BITS = 16


def keep_mask(
    like: Tensor,
    keep_probability: float,
    generator: torch.Generator,
    dtype: torch.dtype = torch.bool,
) -> tuple[Tensor, float]:
    """A mask shaped like ``like``, each entry kept independently.

    Returns the mask (``dtype``: bool, or 1/0 in a floating dtype) and its
    exact keep probability: ``keep_probability`` rounded to a multiple of
    ``2**-16`` (0.9 becomes 0.899994). Each entry
    compares 16 random bits with a threshold: the bits come as 64-bit draws,
    four entries per draw. torch's CPU generator costs about the same per
    draw whatever its width, so this is 7.1 -> 1.5 ms for 960k entries on one
    thread, where ``bernoulli_`` draws one number per entry. Five masks per
    training step were 15 % of the step; the step takes 0.89x at 4k rows,
    0.90x at 15k and 0.92x at 40k (one thread, in-process A/B).
    """
    levels = 2**MASK_BITS
    threshold = round(keep_probability * levels)
    n = like.numel()
    words = -(-n * MASK_BITS // 64)
    bits = torch.empty(words, dtype=torch.int64, device=like.device)
    bits.random_(-(2**63), 2**63 - 1, generator=generator)
    draws = bits.view(torch.int16)[:n].view(like.shape)
    # int16 draws are uniform on [-2**15, 2**15): below threshold - 2**15
    # with probability threshold / 2**16. A float mask is written by the
    # comparison itself: on a CPU, comparing into bool and converting to
    # float took 110 + 122 us for 217k entries, comparing into float 29 us.
    mask = torch.empty(like.shape, dtype=dtype, device=like.device)
    return torch.lt(draws, threshold - levels // 2, out=mask), threshold / levels


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

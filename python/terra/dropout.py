"""Fused dropout (`aten.native_dropout`) split into a host draw and a graph op.

torch runs dropout on CUDA as the fused `native_dropout(x, p, train)`,
which draws a mask from the device's generator and returns
`(x * mask * scale, mask)`. Its mask depends on the generator, the shape
and the layout of `x`, never on its values. A graph has no generator of
torch's, so run as one op it could only be a host callback on the graph's
thread: it drew from the generator at another time than eager (between or
after the host's own draws) and gave other numbers.

The recorder therefore splits every training-mode `native_dropout` into
  * `terra::dropout_mask(x, p, train)`: `native_dropout` itself on a
    scratch tensor with `x`'s shape, strides, storage offset, dtype and
    device, keeping the mask. It is a random-number op like `rand_like`
    (tracing.HOST_RNG_OPS): drawn on the host in every phase, exactly
    where eager draws, and fed to the graph;
  * `aten.native_dropout_backward(x, mask, scale)`, `x * mask * scale`
    (the graph lowers it), which equals native_dropout's output bit for
    bit on the CPU.
The program gets both results as native_dropout returns them; autograd,
which runs above the recorder, saves the mask for the backward as usual.
"""
from __future__ import annotations

from typing import Any, Optional

import torch

_LIB = torch.library.Library("terra", "DEF")
_LIB.define("dropout_mask(Tensor self, float p, bool? train) -> Tensor")


def scratch_like(x: torch.Tensor) -> torch.Tensor:
    """An uninitialized tensor with `x`'s shape, strides, storage offset,
    dtype and device: kernels that pick a code path by layout or alignment
    (CUDA's vectorized dropout) pick the one they pick for `x`."""
    offset = x.storage_offset()
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(x.shape, x.stride())) if x.numel() else 0
    base = torch.empty(offset + span, dtype=x.dtype, device=x.device)
    return base.as_strided(tuple(x.shape), tuple(x.stride()), offset)


def _draw(x: torch.Tensor, p: float, train: Optional[bool]) -> torch.Tensor:
    return torch.native_dropout(scratch_like(x), p, train)[1]


def _meta(x: torch.Tensor, p: float, train: Optional[bool]) -> torch.Tensor:
    return torch.empty_strided(tuple(x.shape), tuple(x.stride()), dtype=torch.bool, device=x.device)


for _key in ("CPU", "CUDA"):
    _LIB.impl("dropout_mask", _draw, _key)
_LIB.impl("dropout_mask", _meta, "Meta")

DROPOUT_MASK = torch.ops.terra.dropout_mask.default
NATIVE_DROPOUT = torch.ops.aten.native_dropout.default
_BACKWARD = torch.ops.aten.native_dropout_backward.default


def split_args(args: tuple, kwargs: Optional[dict]) -> Optional[tuple]:
    """(x, p, train, scale) when native_dropout(*args, **kwargs) is a
    training-mode dropout of a floating tensor the recorder splits; else
    None (evaluation mode draws nothing and is an op like any other)."""
    kwargs = kwargs or {}
    names = ("input", "p", "train")
    if len(args) > 3 or set(kwargs) - set(names[len(args):]):
        return None
    bound = dict(zip(names, args), **kwargs)
    x, p, train = bound.get("input"), bound.get("p"), bound.get("train")
    if (not isinstance(x, torch.Tensor) or not x.is_floating_point() or isinstance(p, bool)
            or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0 or train is False):
        return None
    # What ATen's CPU kernel and native_dropout's derivative scale by.
    scale = 0.0 if p == 1 else 1.0 / (1.0 - p)
    return x, float(p), train, scale


def split(dispatch: Any, types_: Any, parts: tuple) -> tuple:
    """native_dropout's results from its two parts, each dispatched as an
    op of its own through `dispatch` (a recorder's `__torch_dispatch__`)."""
    x, p, train, scale = parts
    mask = dispatch(DROPOUT_MASK, types_, (x, p, train), {})
    out = dispatch(_BACKWARD, types_, (x, mask, scale), {})
    return out, mask

"""Advanced indexing with slices (`x[:, idx]`) as ops the graph has.

`x[:, idx]` reaches the recorder as `index(x, [None, idx])`, and its
backward (or `x[:, idx] = v`) as `index_put(x, [None, idx], v, acc)`. A
trace has no optional tensors in a list, so such calls made the step
uncompilable. The recorder runs them as ops without `None` entries
(`_Recorder.__torch_dispatch__`):

    index:      permute the indexed dims first, index them, move the
                index dims back where torch puts them (in place of the
                first indexed dim when the indexed dims are adjacent, in
                front otherwise), and make the result contiguous as
                eager's is;
    index_put:  the same permutation of `x` and of `values` (expanded to
                the indexed shape), a functional index_put, the inverse
                permutation; `index_put_` copies that into `x`.

Only integer index tensors are rewritten; boolean masks keep their own
path (a data-dependent count).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np
import torch
import torch._refs  # (_broadcast_shapes: torch's broadcasting rule in Python)

INDEX = torch.ops.aten.index.Tensor
INDEX_PUT = torch.ops.aten.index_put.default
INDEX_PUT_ = torch.ops.aten.index_put_.default
OPS = frozenset({INDEX, INDEX_PUT, INDEX_PUT_})
_PERMUTE = torch.ops.aten.permute.default
_CLONE = torch.ops.aten.clone.default
_EXPAND = torch.ops.aten.expand.default
_COPY_ = torch.ops.aten.copy_.default


class _Plan:
    """How `x[indices]` maps onto an index without `None` entries."""

    __slots__ = ("perm", "tensors", "first", "broadcast", "shape")

    def __init__(self, x: torch.Tensor, indices: list):
        adv = [d for d, i in enumerate(indices) if i is not None]
        rest = [d for d in range(x.dim()) if d not in adv]
        self.perm = adv + rest
        self.tensors = [indices[d] for d in adv]
        adjacent = adv == list(range(adv[0], adv[0] + len(adv)))
        # Where torch puts the index dims in the result.
        self.first = adv[0] if adjacent else 0
        self.broadcast = tuple(torch.broadcast_shapes(*(tuple(t.shape) for t in self.tensors)))
        rest_shape = [x.shape[d] for d in rest]
        self.shape = tuple(rest_shape[:self.first]) + self.broadcast + tuple(rest_shape[self.first:])

    def to_torch_order(self, nd: int) -> list[int]:
        """The permutation taking (index dims, other dims) to torch's order."""
        nb, k = len(self.broadcast), self.first
        return list(range(nb, nb + k)) + list(range(nb)) + list(range(nb + k, nd))


def plan(func: Any, args: tuple, kwargs: dict) -> Optional[_Plan]:
    """A plan when `func(*args, **kwargs)` indexes with `None` entries and
    integer index tensors only; else None (the call is recorded as it is)."""
    if kwargs or len(args) < 2:
        return None
    x, indices = args[0], args[1]
    if (not isinstance(x, torch.Tensor) or not isinstance(indices, (list, tuple))
            or not any(i is None for i in indices)  # (`None in indices` would compare tensors)
            or len(indices) > x.dim()):
        return None
    tensors = [i for i in indices if i is not None]
    if not tensors or any(not isinstance(t, torch.Tensor) or t.dtype not in (torch.int64, torch.int32)
                          for t in tensors):
        return None
    if func is not INDEX:
        values = args[2] if len(args) > 2 else None
        if not isinstance(values, torch.Tensor):
            return None
    p = _Plan(x, list(indices))
    if func is not INDEX and args[2].dim() > len(p.shape):
        return None
    return p


def run(dispatch: Any, types_: Any, func: Any, args: tuple, p: _Plan) -> Any:
    """`func(*args)` as ops without `None` index entries, each dispatched
    through `dispatch` (a recorder's `__torch_dispatch__`)."""
    x = args[0]
    t = dispatch(_PERMUTE, types_, (x, p.perm), {})
    if func is INDEX:
        r = dispatch(INDEX, types_, (t, p.tensors), {})
        if p.first:
            r = dispatch(_PERMUTE, types_, (r, p.to_torch_order(r.dim())), {})
        if not r.is_contiguous():
            r = dispatch(_CLONE, types_, (r,), {"memory_format": torch.contiguous_format})
        return r
    values, accumulate = args[2], args[3] if len(args) > 3 else False
    v = dispatch(_EXPAND, types_, (values, list(p.shape)), {})
    if p.first:
        # torch's order -> (index dims, other dims): the inverse of to_torch_order.
        order = p.to_torch_order(len(p.shape))
        v = dispatch(_PERMUTE, types_, (v, [order.index(d) for d in range(len(order))]), {})
    r = dispatch(INDEX_PUT, types_, (t, p.tensors, v, accumulate), {})
    back = dispatch(_PERMUTE, types_, (r, [p.perm.index(d) for d in range(len(p.perm))]), {})
    if func is INDEX_PUT_:
        return dispatch(_COPY_, types_, (x, back), {})
    if x.is_contiguous() and not back.is_contiguous():
        back = dispatch(_CLONE, types_, (back,), {"memory_format": torch.contiguous_format})
    return back


_NUMPY = torch.Tensor.numpy  # (torch's own, not a step's materialization wrapper)


def index_shape(shape: tuple, indices: list) -> Optional[tuple]:
    """The shape of `aten.index.Tensor(x, indices)` for an `x` of `shape`
    (torch's advanced-indexing rule, without a meta kernel: torch 1.13's
    is Python and costs ~140 us). The indices are `None`, int64 tensors
    (only their shapes matter: they may be placeholders) and at most one
    real boolean mask, which stands for k index tensors of its count of
    true elements (torch's nonzero) for the k dims it covers. The index
    tensors broadcast together; adjacent index dims stay where the first
    one is, others go in front. None for any other form (several masks, a
    uint8, 0-dim or non-CPU mask, a mask whose shape is not that of the
    dims it covers, other index dtypes, shapes that do not broadcast, too
    many indices): the caller asks torch, which also raises torch's error
    or warning."""
    dims: list = []  # per dim of x: None, or the shape of its index
    masks = 0
    for m in indices:
        if m is None:
            dims.append(None)
            continue
        if m.dtype is torch.int64:
            dims.append(tuple(m.shape))
            continue
        masks += 1
        if masks > 1 or m.dtype is not torch.bool or m.dim() == 0 or m.device.type != "cpu":
            return None
        k, at = m.dim(), len(dims)
        if tuple(m.shape) != shape[at:at + k]:
            return None
        # Counted by NumPy on the mask's memory: torch.count_nonzero and its
        # item() would each go through the co-executor's dispatch mode.
        dims += [(int(np.count_nonzero(_NUMPY(m))),)] * k
    if len(dims) > len(shape):
        return None
    dims += [None] * (len(shape) - len(dims))
    adv = [d for d, n in enumerate(dims) if n is not None]
    if not adv:
        return None
    try:  # torch's own broadcasting rule (the Python one of its references)
        index = tuple(torch._refs._broadcast_shapes(*[dims[d] for d in adv]))
    except (RuntimeError, ValueError):
        return None
    rest = [shape[d] for d, n in enumerate(dims) if n is None]
    first = adv[0] if adv[-1] - adv[0] == len(adv) - 1 else 0
    return tuple(rest[:first]) + index + tuple(rest[first:])


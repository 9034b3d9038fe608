"""Symbolic size arguments (spec 6.3.1: a changing dimension is relaxed,
not part of an op's identity).

Tensor types are relaxed when traces are merged: a dim that differs
between iterations becomes `?`. But some ops also carry dimension values in
their *arguments*: `view(x, [B, T, 12, 64])`, `expand(m, [B, T, T])`,
`slice_backward(g, input_sizes=[P, 85], ...)`. Recorded as numbers, these
would make every new batch size, sequence length or data-dependent count a
new op, hence a new path (a fallback and a regeneration each, until the
function gives up and runs eagerly).

The tracer therefore records an entry of such an argument that equals a
dim of one of the op's tensor operands as that dim, `SymDim(operand,
dim)` (MLIR `#terra.dim<operand, dim>`; the lowering reads it with
`tensor.dim`), much as Dynamo's SymInts stand for sizes. For the reshaping
ops, one remaining literal entry greater than one becomes -1 (the size
reshape infers), which covers products of dims (`view(x, [B * T, C])` ->
`[-1, #terra.dim<0, 2>]`). Entries 0 and 1 stay literal (they carry
structure, as Dynamo specializes them).

Both rewrites are exact for the iteration that records them, and the
co-executor computes the same form from its placeholders' shapes (which are
exact) before validating, so an op validates only when its form evaluates
to the numbers the program passed. A number that merely happened to equal
a dim in one iteration gives a different form in another: one more path,
never a wrong value.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional, Sequence

import torch


@dataclass(frozen=True)
class SymDim:
    """Size `dim` of tensor operand `operand` (index among the op's tensor
    operands, in order)."""
    operand: int
    dim: int

    def mlir(self) -> str:
        return f"#terra.dim<{self.operand}, {self.dim}>"


# op -> its size-list arguments.
SIZE_ARGS: dict[str, tuple[str, ...]] = {
    "aten.view": ("size",),
    "aten._unsafe_view": ("size",),
    "aten._reshape_alias": ("size",),
    "aten.reshape": ("shape",),
    "aten.expand": ("size",),
    "aten.slice_backward": ("input_sizes",),
    "aten.select_backward": ("input_sizes",),
    "aten.new_zeros": ("size",),
    "aten.new_ones": ("size",),
    "aten.new_empty": ("size",),
    "aten.new_full": ("size",),
    # F.affine_grid(theta, [N, C, H, W]): N is theta's count (Faster
    # R-CNN's RoIs, one count per step).
    "aten.affine_grid_generator": ("size",),
    "aten.affine_grid_generator_backward": ("size",),
    # Scalars: symbolic only once learnt to change (`mask[:t]`, `arange(t)`).
    "aten.slice.Tensor": ("end",),
    "aten.arange": ("end",),
    "aten.arange.start": ("end",),
}
# Ops whose tensor operand gives only a dtype and device, not a shape.
_DTYPE_DONORS = frozenset({"aten.new_zeros", "aten.new_ones", "aten.new_empty", "aten.new_full"})
# Reshapes: one literal entry may become -1.
RESHAPES = frozenset({"aten.view", "aten._unsafe_view", "aten._reshape_alias", "aten.reshape"})
# Arguments that follow from the sizes and that nothing reads: the traced
# layout of `_reshape_alias` (the lowering and the host treat it as a
# reshape), dropped so that it does not pin the sizes.
DROPPED_ARGS: dict[str, frozenset] = {"aten._reshape_alias": frozenset({"stride"})}


# The count of trailing operands an op has only for its symbolic sizes (dims
# of values that are not its own operands); the lowering and the host call
# ignore them otherwise.
SHAPE_OPERANDS = "terra.shape_operands"


def _find(v: int, i: int, n: int, shapes: Sequence[Sequence[int]], aligned: bool, anywhere: bool) -> Any:
    """The operand dim equal to `v` for entry `i` of an `n`-entry list: the
    corresponding dim of the first operand (trailing-aligned for
    broadcasts, same index otherwise), then, if `anywhere`, any operand's
    dim in order."""
    if shapes:
        first = shapes[0]
        j = i - (n - len(first)) if aligned else i
        if 0 <= j < len(first) and first[j] == v:
            return SymDim(0, j)
    if anywhere:
        for k, shape in enumerate(shapes):
            for d, s in enumerate(shape):
                if s == v:
                    return SymDim(k, d)
    return None


def symbolize(name: str, value: Any, tensors: Sequence[torch.Tensor], dynamic: Iterable[int] = (),
              lookup: Optional[Callable[[int, int], Any]] = None, extra: Optional[list] = None) -> Any:
    """The recorded form of size-list argument `value` of op `name` whose
    tensor operands are `tensors` (see the module doc). `dynamic` are the
    entries learnt to change between iterations: for a reshape, one of
    them becomes the inferred -1; the others, when no operand has their
    size, are looked up (`lookup(v, i)` -> (value, dim) of an earlier value
    of the trace, or None) and refer to that value, appended to `extra` (it
    becomes a trailing operand: operand `len(tensors) + its index`)."""
    if type(value) is int:  # a scalar size: only a learnt one is symbolic
        if 0 not in dynamic or value <= 1:
            return value
        form = symbolize(name, [value], tensors, (0,), lookup, extra)[0]
        return form if isinstance(form, SymDim) else value
    if not isinstance(value, list) or not all(type(x) is int for x in value):
        return value
    # `new_zeros(x, size)` takes only x's dtype: its size is unrelated to
    # x's shape (autograd's IndexBackward: new_zeros(grad, input's shape)).
    shapes = [] if name in _DTYPE_DONORS else [tuple(t.shape) for t in tensors]
    n = len(value)
    aligned = name == "aten.expand"
    out: list = []
    dynamic = set(dynamic)
    reshape = name in RESHAPES and bool(shapes)
    if reshape:
        # A reshape keeps a prefix and a suffix of its operand's dims: those
        # entries are the operand's dims (matched as runs, so that a size
        # equal to another dim by coincidence does not move them).
        src = shapes[0]
        k = 0
        while k < min(n, len(src)) and value[k] == src[k] and value[k] > 1:
            k += 1
        m = 0
        while m < min(n, len(src)) - k and value[n - 1 - m] == src[len(src) - 1 - m] and value[n - 1 - m] > 1:
            m += 1
        kept = {i: SymDim(0, i) for i in range(k)}
        kept.update({n - 1 - j: SymDim(0, len(src) - 1 - j) for j in range(m)})
    for i, v in enumerate(value):
        if reshape:
            sym = kept.get(i) or (_find(v, i, n, shapes, False, True) if i in dynamic and v >= 1 else None)
            out.append(v if sym is None else sym)
            continue
        # 0 and 1 carry structure, unless the entry is known to change; only
        # an entry known to change may match a dim in another position.
        sym = _find(v, i, n, shapes, aligned, i in dynamic) if v > 1 or (v == 1 and i in dynamic) else None
        out.append(v if sym is None else sym)
    dynamic = [i for i in sorted(dynamic) if i < n and type(out[i]) is int and out[i] > 1]
    if name in RESHAPES and -1 not in out and 0 not in out:
        literal = [i for i, v in enumerate(out) if type(v) is int and v > 1]
        pick = dynamic[0] if dynamic else literal[0] if literal else None
        if pick is not None:
            out[pick] = -1
    if lookup is not None and extra is not None:
        for i in dynamic:
            if out[i] == -1:
                continue
            hit = lookup(out[i], i)
            if hit is None:
                continue
            ref, d = hit
            if ref not in extra:
                extra.append(ref)
            out[i] = SymDim(len(tensors) + extra.index(ref), d)
    return out


def changed_sizes(before: Any, after: Any) -> set:
    """(site, op name, arg, entry) of the size-list entries that differ
    between two traces at the same op occurrence."""
    from . import relax  # not at the top: relax -> trace -> mlir_text -> sizes
    a, b = relax.ops_by_occurrence(before), relax.ops_by_occurrence(after)
    found = set()
    for k, ev in b.items():
        args = SIZE_ARGS.get(ev.name)
        old = a.get(k)
        if not args or old is None:
            continue
        where = relax.ENGINE if relax.is_engine(ev.site) else ev.site
        for arg in args:
            v, w = ev.args.get(arg), old.args.get(arg)
            if type(v) is int and type(w) is int and v != w and v >= 0 and w >= 0:
                found.add((where, ev.name, arg, 0))
            elif isinstance(v, list) and isinstance(w, list) and len(v) == len(w):
                found.update((where, ev.name, arg, i) for i, (x, y) in enumerate(zip(v, w)) if x != y)
    return found


def has_symbols(value: Any) -> bool:
    return isinstance(value, list) and any(isinstance(x, SymDim) for x in value)


def resolve(value: Any, tensors: Sequence[torch.Tensor]) -> Any:
    """`value` with its symbolic entries replaced by the dims of `tensors`
    (the op's tensor operands, shape operands included): how the host
    calls a recorded op."""
    if isinstance(value, SymDim):
        return tensors[value.operand].shape[value.dim]
    if not has_symbols(value):
        return value
    return [tensors[x.operand].shape[x.dim] if isinstance(x, SymDim) else x for x in value]

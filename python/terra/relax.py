"""Scalar relaxation (spec 6.3.1, after JANUS).

A Python float that an op takes as an argument is part of the op's
identity in a trace (`aten.div.Scalar {other = 0.9}`). When it changes from
one iteration to the next (Adam's bias corrections, a learning rate from a
schedule, a drop probability ramped by a Python object), every iteration
would be a new path. Such an argument is *relaxed* instead: the op is
recorded as its tensor form with the scalar fed as a 0-d tensor of the
op's dtype, so the graph reads the current value every iteration:

    div.Scalar(x, other=s)            -> div.Tensor(x, feed(s))
    add_.Tensor(x, y, alpha=a)        -> add_.Tensor(x, mul.Tensor(y, feed(a)))
    addcdiv_(x, t1, t2, value=v)      -> add_.Tensor(x, div.Tensor(mul.Tensor(t1, feed(v)), t2))
    addcmul_(x, t1, t2, value=v)      -> add_.Tensor(x, mul.Tensor(mul.Tensor(t1, feed(v)), t2))

Each form evaluates in the order ATen's CPU kernels do (`self + v * t1 / t2`),
and the scalar is fed in the tensor's dtype, as ATen converts it. Which
arguments to relax is learnt while tracing: an argument that differs
between two traces at the same site (same op, same occurrence) is relaxed,
the traces so far are dropped, and tracing starts again with it relaxed.
Only ops with a rule below are relaxed; a changing argument of another op
keeps making new paths (and the function eventually runs eagerly).

Float arguments of the ops torch's optimizers issue are relaxed from the
first trace on, without waiting to see them change (`@terra.function`
asks for this): learning-rate schedules change them, sometimes first long
after compilation (a step decay), where learning it would cost a
fallback, new traces and a recompilation.
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Optional

import torch

from .sites import AUTOGRAD_FILE, Site
from .trace import FeedEvent, OpEvent, Trace, TensorType, ConstSource, ValueRef

# (site, op name, argument name) of a relaxed scalar. Ops the autograd
# engine runs learn their site only after they are recorded, so for them
# the site is ENGINE: the argument is relaxed in every backward op of that
# name (feeding a scalar that happens not to change costs nothing).
RelaxKey = tuple[Any, str, str]
ENGINE = "<autograd engine>"


def is_engine(site: Site) -> bool:
    return bool(site.frames) and site.frames[0].file == AUTOGRAD_FILE

# op -> its .Tensor form: the scalar `other` becomes a second operand.
_TENSOR_FORM = {
    "aten.mul.Scalar": "aten.mul.Tensor", "aten.mul_.Scalar": "aten.mul_.Tensor",
    "aten.div.Scalar": "aten.div.Tensor", "aten.div_.Scalar": "aten.div_.Tensor",
    "aten.lt.Scalar": "aten.lt.Tensor", "aten.le.Scalar": "aten.le.Tensor",
    "aten.gt.Scalar": "aten.gt.Tensor", "aten.ge.Scalar": "aten.ge.Tensor",
    "aten.eq.Scalar": "aten.eq.Tensor", "aten.ne.Scalar": "aten.ne.Tensor",
    # `tensor / python_float` reaches aten as div.Tensor with a wrapped
    # number, which the tracer records as the scalar `other`.
    "aten.mul.Tensor": "aten.mul.Tensor", "aten.mul_.Tensor": "aten.mul_.Tensor",
    "aten.div.Tensor": "aten.div.Tensor", "aten.div_.Tensor": "aten.div_.Tensor",
}
# ops whose `alpha` scales the second operand.
_ALPHA_OPS = frozenset({"aten.add.Tensor", "aten.add_.Tensor", "aten.sub.Tensor", "aten.sub_.Tensor"})
# ops whose `value` scales t1 (addcdiv: then divided by t2; addcmul: times t2).
_VALUE_OPS = {"aten.addcdiv": ("aten.div.Tensor", "aten.add.Tensor"),
              "aten.addcdiv_": ("aten.div.Tensor", "aten.add_.Tensor"),
              "aten.addcmul": ("aten.mul.Tensor", "aten.add.Tensor"),
              "aten.addcmul_": ("aten.mul.Tensor", "aten.add_.Tensor")}


# `_foreach_` ops keep their name: the relaxed scalar (or scalar list)
# becomes one trailing operand, a 0-d (or 1-d, one per element) tensor.
_FOREACH_ARGS = frozenset({"scalar", "scalars", "alpha", "value"})
_FOREACH_ORDER = tuple(sorted(_FOREACH_ARGS))


def _is_foreach(name: str) -> bool:
    return name.startswith("aten._foreach_")


def relaxable(name: str, arg: str) -> bool:
    """Whether a changing `arg` of op `name` can be fed instead of fixed."""
    return ((name in _TENSOR_FORM and arg == "other") or (name in _ALPHA_OPS and arg == "alpha")
            or (name in _VALUE_OPS and arg == "value") or (_is_foreach(name) and arg in _FOREACH_ARGS))


def relaxable_op(name: str) -> bool:
    """Whether op `name` has a relaxable scalar argument."""
    return name in _TENSOR_FORM or name in _ALPHA_OPS or name in _VALUE_OPS or _is_foreach(name)


def _numbers(v: Any) -> Optional[list]:
    """`v` as a list of Python numbers (a scalar list arg), or None."""
    if isinstance(v, (list, tuple)) and v and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        return list(v)
    return None


def _by_occurrence(trace: Trace, kind: type, key: Any) -> dict[tuple, Any]:
    """The events of type `kind`, by `key(event) + (occurrence,)`: the
    same event of two traces has the same key."""
    seen: dict[tuple, int] = {}
    out = {}
    for ev in trace.events:
        if isinstance(ev, kind):
            k = key(ev)
            n = seen.get(k, 0)
            seen[k] = n + 1
            out[k + (n,)] = ev
    return out


def ops_by_occurrence(trace: Trace) -> dict[tuple, OpEvent]:
    return _by_occurrence(trace, OpEvent, lambda ev: (ev.site, ev.name))


def changed_feed_dims(before: Trace, after: Trace) -> set[tuple[Site, int]]:
    """(site, dim) of the fed tensors whose sizes differ between two traces
    at the same feed occurrence (dims of sizes 0 and 1 stay specialized)."""
    a, b = (_by_occurrence(t, FeedEvent, lambda ev: (ev.site,)) for t in (before, after))
    found = set()
    for k, ev in b.items():
        old = a.get(k)
        if old is None or len(old.type.shape) != len(ev.type.shape):
            continue
        found.update((ev.site, d) for d, (x, y) in enumerate(zip(old.type.shape, ev.type.shape))
                     if x != y and x > 1 and y > 1)
    return found


def changed_scalars(before: Trace, after: Trace) -> set[RelaxKey]:
    """The relaxable number arguments whose values differ between two traces
    at the same op occurrence."""
    a, b = ops_by_occurrence(before), ops_by_occurrence(after)
    found: set[RelaxKey] = set()
    for k, ev in b.items():
        old = a.get(k)
        if old is None:
            continue
        for arg, v in ev.args.items():
            w = old.args.get(arg)
            # An int counts too: autograd divides by an element count
            # (MeanBackward: `div.Scalar(grad, numel)`), which changes with
            # a dynamic size. Ops on int tensors are not rewritten (rewrite).
            scalar = (isinstance(v, (int, float)) and isinstance(w, (int, float))
                      and not isinstance(v, bool) and not isinstance(w, bool) and v != w)
            listed = _numbers(v) is not None and _numbers(w) is not None and len(v) == len(w) and v != w
            if (scalar or listed) and relaxable(ev.name, arg):
                found.add((ENGINE if is_engine(ev.site) else ev.site, ev.name, arg))
    return found


def value_type(trace: Trace, ref: ValueRef) -> TensorType:
    ev = trace.events[ref.event]
    if isinstance(ev, OpEvent):
        return ev.results[ref.result]
    return ev.type


def _broadcast(*types: TensorType) -> tuple[int, ...]:
    """Numpy broadcasting of the types' shapes; a dynamic dim (-1) stays
    dynamic unless the other side has a size other than 1."""
    rank = max(len(t.shape) for t in types)
    out = []
    for i in range(rank):
        dims = [t.shape[i - rank + len(t.shape)] for t in types if i - rank + len(t.shape) >= 0]
        sized = [d for d in dims if d != 1]
        known = [d for d in sized if d >= 0]
        out.append(known[0] if known else (-1 if sized else 1))
    return tuple(out)


class Rewrite:
    """The events replacing one op with a relaxed scalar: `ops` are
    (name, inputs, args, result types); the feed comes first."""

    def __init__(self, feed: FeedEvent, feed_value: torch.Tensor,
                 ops: list[tuple[str, list[Any], dict[str, Any], list[TensorType]]], arg: str = ""):
        # `arg`: the op argument the feed carries (a scalar or scalar list).
        self.feed, self.feed_value, self.ops, self.arg = feed, feed_value, ops, arg


FEED = "feed"  # placeholder for the feed's ValueRef in Rewrite.ops inputs


_OPTIM_DIR = os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), "optim") + os.sep
_IN_OPTIMIZER: dict[Site, bool] = {}


def in_optimizer(site: Site) -> bool:
    """Whether an op was issued by one of torch's optimizers (torch/optim)."""
    hit = _IN_OPTIMIZER.get(site)
    if hit is None:
        hit = _IN_OPTIMIZER[site] = bool(site.frames) and os.path.abspath(
            site.frames[0].file).startswith(_OPTIM_DIR)
    return hit


def _speculated(name: str, arg: str, value: Any) -> bool:
    """A float argument of an optimizer's op, relaxed before it ever
    changes: learning rates follow schedules (a step decay may first change
    long after compilation), and the scalars derived from them (`-lr`,
    `1 - lr * weight_decay`) would otherwise cost a fallback, new traces
    and a recompilation at the first change."""
    if not relaxable(name, arg):
        return False
    if isinstance(value, float):
        return True
    listed = _numbers(value)
    return listed is not None and any(isinstance(x, float) for x in listed)


def rewrite(trace: Trace, name: str, operands: list[ValueRef], args: dict[str, Any],
            results: list[TensorType], site: Site, relaxed: set[RelaxKey],
            engine: bool = False, speculate: bool = False) -> Optional[Rewrite]:
    """The relaxed form of an op about to be recorded, or None. With
    `speculate`, float arguments of optimizer ops are relaxed from the
    first trace on (see `_speculated`)."""
    optimizer = speculate and not engine and in_optimizer(site)
    if not relaxed and not optimizer:
        return None
    where = ENGINE if engine else site
    if _is_foreach(name):
        return _rewrite_foreach(trace, name, operands, args, results, site, where, relaxed, optimizer)
    arg = next((a for a in ("other", "alpha", "value")
                if (where, name, a) in relaxed or (optimizer and _speculated(name, a, args.get(a)))), None)
    if arg is not None and optimizer:
        relaxed.add((where, name, arg))  # reported like a learnt one
    if arg is None or not isinstance(args.get(arg), (int, float)) or isinstance(args.get(arg), bool):
        return None
    self_type = value_type(trace, operands[0])
    dtype = self_type.dtype
    if not dtype.is_floating_point:
        return None
    scalar = torch.tensor(float(args[arg]), dtype=dtype)
    feed = FeedEvent(TensorType(dtype, ()), site, ConstSource(scalar))
    rest = {k: v for k, v in args.items() if k != arg}
    if name in _TENSOR_FORM:
        return Rewrite(feed, scalar, [(_TENSOR_FORM[name], [operands[0], FEED], rest, results)], arg)
    if name in _ALPHA_OPS:
        other = value_type(trace, operands[1])
        scaled = TensorType(other.dtype, other.shape)
        return Rewrite(feed, scalar, [
            ("aten.mul.Tensor", [operands[1], FEED], {}, [scaled]),
            (name, [operands[0], 0], rest, results)], arg)  # 0: the previous op's result
    combine, add = _VALUE_OPS[name]
    t1, t2 = value_type(trace, operands[1]), value_type(trace, operands[2])
    scaled = TensorType(t1.dtype, t1.shape)
    combined = TensorType(t1.dtype, _broadcast(t1, t2))
    return Rewrite(feed, scalar, [
        ("aten.mul.Tensor", [operands[1], FEED], {}, [scaled]),
        (combine, [0, operands[2]], {}, [combined]),
        (add, [operands[0], 1], rest, results)], arg)


def _rewrite_foreach(trace: Trace, name: str, operands: list[ValueRef], args: dict[str, Any],
                     results: list[TensorType], site: Site, where: Any,
                     relaxed: set[RelaxKey], optimizer: bool = False) -> Optional[Rewrite]:
    """`_foreach_<op>` with its relaxed scalar (0-d feed) or scalar list (1-d
    feed, element i for list element i) as a trailing operand; the
    lowering reads the scalar from it (TerraToLinalg/Optimizer.cpp)."""
    arg = next((a for a in _FOREACH_ORDER if (where, name, a) in relaxed
                or (optimizer and _speculated(name, a, args.get(a)))), None)
    if arg is None or not operands:
        return None
    if optimizer:
        relaxed.add((where, name, arg))  # reported like a learnt one
    v = args.get(arg)
    dtype = value_type(trace, operands[0]).dtype
    if not dtype.is_floating_point:
        return None
    listed = _numbers(v)
    if listed is not None:
        if len(listed) != len(results):
            return None
        value = torch.tensor([float(x) for x in listed], dtype=dtype)
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        value = torch.tensor(float(v), dtype=dtype)
    else:
        return None
    feed = FeedEvent(TensorType(dtype, tuple(value.shape)), site, ConstSource(value))
    rest = {k: x for k, x in args.items() if k != arg}
    return Rewrite(feed, value, [(name, list(operands) + [FEED], rest, results)], arg)


def describe(keys: Iterable[RelaxKey]) -> str:
    return ", ".join(sorted(f"{name}.{arg}" for _, name, arg in keys))


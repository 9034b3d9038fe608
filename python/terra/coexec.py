"""The co-execution phase of one iteration (spec section 4).

The user's step runs unchanged, but every aten op it issues (forward,
autograd backward, optimizer updates) is intercepted by a `CoExecutor`:

* the op is recorded exactly as the tracer records it (the CoExecutor is a
  tracer whose ops do not run), and returns placeholders shaped by the
  op's meta kernel;
* the recorded events are validated in order against the TraceGraph by the
  C++ Cursor; case selections and loop conditions it decides go to the
  graph run at once, and host values (input batches, Python-made tensors)
  are fed without copies;
* reading a value (`.item()`, `print`, `bool()`, ...) blocks on its fetch.

A deviation (an op the graph does not have at that point, a read of a
value the graph does not publish, a graph error) cancels the run, gives
every placeholder made so far its real value by replaying the recorded ops
eagerly from the state as the iteration started (persistent state is
never written during co-execution, so it is intact), and lets the rest of
the iteration run eagerly. Python code runs exactly once either way: the
replay runs aten ops, not the program.

At the end of a validated iteration the graph's final state values are
fetched, and only then written into the user's tensors, all at once.

A committed iteration leaves a tape; the next iteration replays it without
recording while its ops match, and catches up with the recording where
they stop matching (tape.py).
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Callable, Optional

import torch
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from . import mlir_text, relax, sizes
from .placeholder import Placeholder, Token, real
from .loops import restrict, transitions
from .sites import Site, is_engine_site, user_line
from .tape import (End, Entry, Tape, Untapeable, flat_inputs, form_matches, matches, relax_host_shapes, relax_spec,
                   relaxed_value, schema_tensors, spec_of)
from .trace import ConstSource, FeedEvent, OpEvent, StateEvent, ValueRef, moves_loops
from .tracing import _OP_INFO, ALIAS_OPS, _flat_tensors_deep, _Recorder, _tensors_in, op_info


class Deviation(Exception):
    """Raised internally to stop validating; the iteration goes eager."""


def freeze(v: Any) -> Any:
    """A hashable, type-exact form of an op argument (1, 1.0 and True stay
    apart, as they do in the MLIR)."""
    if isinstance(v, dict):
        return tuple(sorted((k, freeze(x)) for k, x in v.items()))
    if isinstance(v, (list, tuple)):
        return ("[", tuple(freeze(x) for x in v))
    if isinstance(v, torch.dtype):
        return ("dtype", str(v))
    return (type(v).__name__, v)


def op_key(ev: Any) -> tuple:
    """The host-side identity of a recorded event; the compiled function
    maps it to the TraceGraph's key id (see Session.add_trace)."""
    if isinstance(ev, OpEvent):
        return ("op", ev.name, freeze(ev.args), ev.site,
                tuple((t.dtype, len(t.shape)) for t in ev.results))
    if isinstance(ev, FeedEvent):
        return ("feed", ev.site, ev.type.dtype, len(ev.type.shape))
    if isinstance(ev, StateEvent):
        return ("state", ev.name)
    raise TypeError(f"no key for {type(ev).__name__}")


def tensor_spec(t: torch.Tensor) -> tuple:
    """How a tensor crosses to the runtime: no copy, kept alive by `t`."""
    return (t.data_ptr(), mlir_text.element_type(t.dtype), list(t.shape), list(t.stride()), t)


def _to_meta(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return torch.empty_strided(tuple(x.shape), tuple(x.stride()), dtype=x.dtype, device="meta")
    return x


def _signature(x: Any, values: bool = True) -> Any:
    """What the meta result of an op can depend on in argument `x`; without
    `values`, a float stands for any float (its type still matters:
    `int_tensor / 2` and `/ 2.0` differ in dtype)."""
    if isinstance(x, torch.Tensor):
        if isinstance(x, Placeholder):
            sig = x._terra_sig  # a placeholder's metadata never changes
            if sig is None:
                sig = x._terra_sig = ("T", tuple(x.shape), tuple(x.stride()), x.dtype)
            return sig
        return ("T", tuple(x.shape), tuple(x.stride()), x.dtype)
    if isinstance(x, (list, tuple)):
        return tuple(_signature(y, values) for y in x)
    if isinstance(x, dict):
        return tuple(sorted((k, _signature(y, values)) for k, y in x.items()))
    if not values and type(x) is float:
        return float
    return freeze(x)


def _value_free(name: str) -> bool:
    """Ops whose result shapes and dtypes do not depend on the values of
    their float arguments (the elementwise and optimizer ops whose scalars
    change between steps: learning rates, bias corrections)."""
    return name.startswith("aten._foreach_") or relax.relaxable_op(name)


class MetaUnavailable(Exception):
    pass


_META_CACHE: dict[Any, Any] = {}
_MISSING = object()  # ops returning nothing cache None


# Ops without a meta kernel -> the rule that infers their results instead.
_RULE_ONLY: dict = {}


def infer_meta(func: Any, args: tuple, kwargs: dict) -> Any:
    """The op's outputs as meta tensors (shapes, strides, dtypes), cached by
    the op and its inputs' metadata."""
    values = not _value_free(op_info(func).name)
    sig = (func, _signature(args, values), _signature(kwargs, values))
    hit = _META_CACHE.get(sig, _MISSING)
    if hit is _MISSING:
        margs, mkwargs = tree_map(_to_meta, args), tree_map(_to_meta, kwargs)
        rule = _RULE_ONLY.get(func)
        if rule is not None:  # its meta kernel failed before: an exception costs ~0.5 ms
            hit = rule(*margs, **mkwargs)
        else:
            try:
                hit = func(*margs, **mkwargs)
            except Exception as exc:
                rule = _META_RULES.get(str(func)) or _like_input_rule(func) or _foreach_rule(func)
                if rule is None:
                    raise MetaUnavailable(f"{func} has no meta kernel ({type(exc).__name__})") from exc
                if isinstance(exc, NotImplementedError) and f"'{func._schema.name}'" in str(exc):
                    _RULE_ONLY[func] = rule  # the op itself has no meta kernel (for any argument)
                hit = rule(*margs, **mkwargs)
        _META_CACHE[sig] = hit
    return hit


def _convolution_backward(grad_output: torch.Tensor, input: torch.Tensor, weight: torch.Tensor,
                          bias_sizes: Any, *rest: Any, **kw: Any) -> tuple:
    mask = kw.get("output_mask", rest[-1] if rest else (True, True, True))
    like = lambda t: torch.empty(tuple(t.shape), dtype=t.dtype, device="meta")  # noqa: E731
    bias = (torch.empty(tuple(bias_sizes), dtype=grad_output.dtype, device="meta")
            if bias_sizes is not None else None)
    return (like(input) if mask[0] else None, like(weight) if mask[1] else None,
            bias if mask[2] else None)


def _index_tensor(self: torch.Tensor, indices: Any) -> torch.Tensor:
    """aten.index.Tensor (advanced indexing) with integer index tensors; a
    boolean mask's result size depends on its values and is not inferred."""
    positions = [i for i, t in enumerate(indices) if t is not None]
    if not positions or any(indices[i].dtype in (torch.bool, torch.uint8) for i in positions):
        raise MetaUnavailable("aten.index.Tensor with a boolean mask has a data-dependent shape")
    shape = list(self.shape)
    bshape = list(torch.broadcast_shapes(*(tuple(indices[i].shape) for i in positions)))
    rest = [d for i, d in enumerate(shape) if i not in positions]
    if positions == list(range(positions[0], positions[-1] + 1)):
        out = shape[:positions[0]] + bshape + shape[positions[-1] + 1:]
    else:  # separated advanced indices: their dims go first
        out = bshape + rest
    return torch.empty(out, dtype=self.dtype, device="meta")


def _like_input_rule(func: Any) -> Any:
    """Loss backward ops (`smooth_l1_loss_backward`, `huber_loss_backward`,
    ...) return the gradient of their `self` input: one tensor shaped and
    typed like it. Used only when the op has no meta kernel."""
    schema = func._schema
    name = schema.name.split("::")[-1]
    if not (name.endswith("loss_backward") and len(schema.returns) == 1):
        return None
    names = [a.name for a in schema.arguments]
    if "self" not in names:
        return None
    at = names.index("self")

    def rule(*args: Any, **kwargs: Any) -> torch.Tensor:
        x = args[at] if at < len(args) else kwargs["self"]
        return torch.empty(tuple(x.shape), dtype=x.dtype, device="meta")
    return rule


def _grid_sampler_2d_backward(grad_output: torch.Tensor, input: torch.Tensor, grid: torch.Tensor,
                              *rest: Any, **kw: Any) -> tuple:
    like = lambda t: torch.empty(tuple(t.shape), dtype=t.dtype, device="meta")  # noqa: E731
    return like(input), like(grid)


def _foreach_rule(func: Any) -> Any:
    """`_foreach_` ops (no meta kernels in torch 1.13): an in-place one
    returns nothing (its results are the tensors it writes, see
    tracing._record); the others return one tensor per element of their
    first list, shaped and typed like it."""
    if not op_info(func).name.startswith("aten._foreach_"):
        return None
    if not op_info(func).ret_alias:  # one entry per return
        return lambda *args, **kwargs: None

    def rule(first: Any, *args: Any, **kwargs: Any) -> list:
        return [torch.empty_like(t, device="meta") for t in first]
    return rule


def _adaptive_avg_pool2d_backward(grad_output: torch.Tensor, input: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(tuple(input.shape), tuple(input.stride()), dtype=input.dtype,
                               device="meta")


_META_RULES = {"aten.convolution_backward.default": _convolution_backward,
               "aten._adaptive_avg_pool2d_backward.default": _adaptive_avg_pool2d_backward,
               "aten.grid_sampler_2d_backward.default": _grid_sampler_2d_backward,
               "aten.index.Tensor": _index_tensor}


class CoExecutor(_Recorder):
    """Runs one iteration against a compiled graph (see the module doc)."""

    def __init__(self, compiled: Any, registry: Any, call_args: tuple, call_kwargs: dict,
                 stop: Any, serialized: bool = False):
        super().__init__(registry, call_args, call_kwargs, stop)
        self.track_dynamic_dims = False  # the graph's types came from the traces
        self.compiled = compiled
        self.cursor = compiled.cursor
        self.cursor.reset()
        self.serialized = serialized
        self.handles: dict[int, tuple[int, int]] = {}
        self.validated = 0
        self.pending: dict[int, int] = {}  # id(engine op record) -> event index
        self.feed_values: dict[int, torch.Tensor] = {}
        # (op, args, kwargs, placeholder results, site): the replay log.
        self.log: list[tuple[Any, tuple, dict, Any, Optional[Site]]] = []
        self.real_tokens: dict[tuple, Token] = {}
        self.deviation: Optional[tuple[str, Optional[Site]]] = None
        self.run_result: Optional[tuple] = None
        self.loop_ctx: tuple = ()  # graph loops the validation is inside
        # (exception, op, site) when replaying an op after a deviation raised.
        self.graph_error: Optional[tuple] = None
        # Values the host computed itself for tiny ops on known values
        # (see _host_eval): key of a real tensor written in place -> value.
        self.host_values: dict[tuple, torch.Tensor] = {}
        self._host_result: Optional[list] = None
        # Reads of values computed in this step: answered by the graph (a
        # fetch, the host may wait) or by a value the host computed.
        self.graph_reads = 0
        self.host_reads = 0
        now = self.initial_tensors
        states = [tensor_spec(compiled.state_value(name, now)) for name in compiled.state_names]
        self.run = compiled.graph.new_run(states, compiled.host_executor)
        if not serialized:
            self.run.start()
        # Tapes (tape.py). Identities of this iteration's tensors: id ->
        # ("state", name), ("arg", path) or (interaction, result index).
        self.idents: dict[int, tuple] = {}
        for name, t in now.items():
            self.idents.setdefault(id(t), ("state", name))
        # One tape per shape of the step's tensor arguments (a new batch
        # size or sequence length makes new result shapes).
        key = []
        for path, t in _tensors_in((call_args, call_kwargs), ()):
            self.idents.setdefault(id(t), ("arg", path))
            key.append((path, tuple(t.shape), t.dtype))
        self.tape_key = tuple(key)
        self.tape_keep: list = []  # real tensors made in the step (ids stay unique)
        self.host_ids: dict[tuple, int] = {}  # memory key -> n, for ("host", n, ...) identities
        # Several tapes per key: iterations that differ from their first
        # op on (host tensors of a new shape, another first branch).
        self.tape_choices: list = compiled.tapes.get(self.tape_key, []) if _TAPES_ENABLED else []
        tape = self.tape_choices[0] if self.tape_choices else None
        self.tape: Optional[Tape] = tape
        self.fast = tape is not None and (tape.limit > 0 or tape.end is not None)
        self.pos = 0  # the next entry of the tape
        self.replayed: list[_Replayed] = []  # one per entry replayed
        self.sent: list = []  # run effects the replay sent
        self.relaxed_feeds: dict[int, torch.Tensor] = {}  # entry -> its relaxed scalar's feed
        self.fed_values: dict[tuple, torch.Tensor] = {}  # (entry, input) -> value fed
        self._forced: Optional[_Replayed] = None
        self._forward: Optional[_Replayed] = None  # nodes not noted yet (_note_nodes)
        self.replaying: Optional[list] = None  # catching up: the effects the Cursor decides
        self._missed = ""  # TERRA_LOG=tape: the interaction a replay could not match
        self.end_wait_s = 0.0  # waiting for the run's end (host stall, with the fetches')
        self.feed_hosts: dict[int, int] = {}  # feed event -> number of the host tensor it feeds
        self.layout: list = []  # data-dependent sizes met so far in a replay (_memo_key)
        self._relaxed_hosts = compiled.host_dynamic.get(self.tape_key, {}) if _TAPES_ENABLED else {}
        self.b_events: dict[int, tuple] = {}  # entry -> (its events' range, masked, call), for _polymorphic
        self.ref_idents: dict[ValueRef, tuple] = {}  # trace value -> tape identity (tape building)
        self.host_tensors: dict[int, torch.Tensor] = {}  # host tensor number -> the tensor
        # The tape this iteration leaves (built while it is recorded).
        self.building: list[Entry] = []
        self.b_limit: Optional[int] = None  # first entry that cannot be replayed
        self.b_depth = 0
        self.b_current: Optional[Entry] = None
        self.b_pending: list = []  # effects between entries
        self.b_end: Optional[End] = None
        self.b_flat: list = []
        self._b_call: tuple = ((), {})  # the call of the entry being built
        self.feed_src: dict[int, Any] = {}  # feed event -> where its value comes from
        self._b_host = False
        self._b_answer: Any = None
        self._last_fetch: Optional[tuple] = None
        self.eager_threads = 0  # torch threads for eager work after a deviation (set by the function)

    # -- recording hooks -------------------------------------------------------
    def problem(self, text: str) -> None:
        super().problem(text)
        self._deviate(f"cannot co-execute: {text}")

    def value_of(self, t: torch.Tensor, site: Site) -> ValueRef:
        n = len(self.trace.events)
        ref = super().value_of(t, site)
        if len(self.trace.events) > n and isinstance(self.trace.events[ref.event], FeedEvent):
            self.feed_values[ref.event] = t.terra_real if isinstance(t, Placeholder) else t
            if self.b_current is not None:
                k = next((k for k, x in enumerate(self.b_flat) if x is t), None)
                if k is not None:
                    self.feed_src[ref.event] = ("in", len(self.building) - 1, k)
            if isinstance(self.trace.events[ref.event].source, ConstSource) and self.b_limit is None:
                number = self.host_ids.get(self.key(t))
                if number is not None:
                    self.feed_hosts[ref.event] = number
        if len(self.trace.events) > n and self.b_limit is None:
            i = self.idents.get(id(t))
            if i is not None:
                self.ref_idents.setdefault(ref, i)
        return ref

    def _note_feed(self, index: int, value: torch.Tensor, arg: str = "") -> None:
        self.feed_values[index] = value
        e = self.b_current
        if e is None or not arg or e.spec is None:
            return
        q = len(self.building) - 1
        args, kwargs = self._b_call
        for i, aname, kwarg_only, _, _ in op_info(e.func).args:
            if aname == arg:
                length = None if value.dim() == 0 else value.numel()
                e.relaxed = (i, arg, kwarg_only, value.dtype, length)
                e.spec = relax_spec(e.spec, i, arg, kwarg_only, length, len(args))
                self.feed_src[index] = ("relaxed", q)
                return

    def _record(self, name: str, operands: list, op_args: dict, written: list, out: Any,
                site: Site, engine: bool, func: Any = None) -> None:
        n = len(self.trace.events)
        try:
            super()._record(name, operands, op_args, written, out, site, engine, func)
        finally:
            if self.deviation is None:
                self._apply_host_result()
            self._host_result = None
        if engine and self._forced is None:
            for i in range(n, len(self.trace.events)):  # sites known when the autograd node ends
                self.pending[id(self.trace.events[i])] = i

    def _set_site(self, record: OpEvent, site: Site) -> None:
        record.site = site
        self.pending.pop(id(record), None)

    def __torch_dispatch__(self, func: Any, types_: Any, args: tuple = (), kwargs: Optional[dict] = None) -> Any:
        # The replay's common case first: the op the tape expects next.
        if self.fast and not self.b_depth and not self.paused:
            q = self.pos
            tape = self.tape
            if q < tape.limit and tape.entries[q].func is func and threading.get_ident() == self.thread:
                counter = self.loop_counter
                resume = counter.suspend()
                try:
                    kwargs = kwargs or {}
                    out = self._replay_op(func, args, kwargs)
                    return out if out is not _MISS else self._dispatch(func, args, kwargs)
                finally:
                    if resume:
                        counter.resume()
        return super().__torch_dispatch__(func, types_, args, kwargs)

    def _dispatch(self, func: Any, args: tuple, kwargs: dict) -> Any:
        if self.b_depth:  # inside an interaction being recorded
            return self._dispatch_recorded(func, args, kwargs)
        info = _OP_INFO.get(func) or op_info(func)
        if self.paused or not info.aten or threading.get_ident() != self.thread:
            return func(*args, **kwargs)  # not the program's op: neither recorded nor replayed
        if self.fast:
            out = self._replay_op(func, args, kwargs)
            if out is not _MISS:
                return out
            self._leave_fast()
        if self.b_limit is not None:  # no tape is being built any more
            return self._dispatch_recorded(func, args, kwargs)
        e = self._b_begin(func, args, kwargs)
        self.b_depth += 1
        try:
            out = self._dispatch_recorded(func, args, kwargs)
        finally:
            self.b_depth -= 1
            self.b_current = None
        self._b_end(e, out)
        return out

    def _dispatch_recorded(self, func: Any, args: tuple, kwargs: dict) -> Any:
        out = super()._dispatch(func, args, kwargs)
        if self.deviation is None and not self.paused:
            self._validate()
        return out

    # -- ops without running them ----------------------------------------------
    def _execute(self, func: Any, name: str, args: tuple, kwargs: dict) -> Any:
        if self.deviation is not None:
            return func(*args, **kwargs)  # placeholders run on their values
        forced = self._forced
        if forced is not None:  # catching up: the replay made the results
            self._host_result = self._host_eval(func, name, args, kwargs, forced.out)
            self._b_host = self._host_result is not None
            return forced.out
        try:
            out = self._placeholders(func, name, args, kwargs)
        except MetaUnavailable as exc:
            self._deviate(f"cannot infer the result of {name} without running it: {exc}")
            return func(*args, **kwargs)
        self.log.append((func, args, kwargs, out, self.current_site))
        self._host_result = self._host_eval(func, name, args, kwargs, out)
        self._b_host = self._host_result is not None
        return out

    # -- values the host computes itself ----------------------------------------
    def _host_value(self, t: torch.Tensor) -> Optional[torch.Tensor]:
        """`t`'s current value if the host has it without asking the graph."""
        if isinstance(t, Placeholder):
            return t._terra_real
        k = self.key(t)
        v = self.host_values.get(k)
        if v is not None:
            return v
        ref = self.producers.get(k)
        if ref is not None and isinstance(self.trace.events[ref.event], OpEvent):
            return None  # written in place during the step by the graph
        return t

    def _host_eval(self, func: Any, name: str, args: tuple, kwargs: dict, out: Any) -> Optional[list]:
        """Runs an op on the host too when it is tiny and all its inputs are
        known there: e.g. an optimizer's step counter (`step += 1` then
        `step.item()`, once per parameter in torch 1.13's Adam). Reading
        such a value then costs no round trip to the graph, which keeps
        computing it as well. Returns (result, value) pairs to bind once
        the op is recorded, or None."""
        if name in _NOT_HOST_EVALUATED:
            return None
        if isinstance(out, torch.Tensor):
            if out.numel() > _HOST_EVAL_MAX:
                return None  # the common case: leave quickly
            outs = [out]
        else:
            if isinstance(out, (tuple, list)) and any(
                    isinstance(o, torch.Tensor) and o.numel() > _HOST_EVAL_MAX for o in out):
                return None  # a big result: leave before flattening
            outs = [o for o in tree_flatten(out)[0] if isinstance(o, torch.Tensor)]
        info = op_info(func)
        targets: list[torch.Tensor] = []  # real tensors written in place
        if not outs and not info.ret_alias:
            # Returns nothing: the tensors it writes (`_foreach_add_`).
            for i, aname, kwarg_only, _, writes in info.args:
                if writes:
                    v = args[i] if i < len(args) and not kwarg_only else kwargs.get(aname)
                    targets += v if isinstance(v, (list, tuple)) else [v]
            outs = targets
        elif any(r is not None for r in info.ret_alias):
            # Only an in-place write into one real tensor.
            if len(info.ret_alias) != 1 or not info.ret_alias[0] or not info.ret_alias[0][1] or len(outs) != 1:
                return None
            targets = outs
        if not outs or any(not isinstance(o, torch.Tensor) or o.numel() > _HOST_EVAL_MAX
                           or o.device.type != "cpu" for o in outs):
            return None
        if any(isinstance(t, Placeholder) or t._base is not None for t in targets):
            return None  # a placeholder's or a view's value is not rebound here
        written = {id(t) for t in targets}
        values: dict[int, torch.Tensor] = {}
        for x in tree_flatten((args, kwargs))[0]:
            if isinstance(x, torch.Tensor) and id(x) not in values:
                if x.numel() > _HOST_EVAL_MAX or x.device.type != "cpu":
                    return None
                v = self._host_value(x)
                if v is None:
                    return None
                values[id(x)] = v.clone() if id(x) in written else v
        swap = lambda x: values[id(x)] if isinstance(x, torch.Tensor) else x  # noqa: E731
        try:
            with self.pause(), torch.no_grad():
                result = func(*tree_map(swap, args), **tree_map(swap, kwargs))
        except Exception:
            return None  # the graph and the replay report it
        if targets and not info.ret_alias:
            return [(t, values[id(t)]) for t in targets]
        reals = [r for r in tree_flatten(result)[0] if isinstance(r, torch.Tensor)]
        if len(reals) != len(outs):
            return None
        return list(zip(outs, reals))

    def _apply_host_result(self) -> None:
        pairs, self._host_result = self._host_result, None
        for o, r in pairs or ():
            if isinstance(o, Placeholder):
                o._terra_real = r
            else:
                self.host_values[self.key(o)] = r

    def _written(self, t: torch.Tensor) -> None:
        super()._written(t)
        # A value the host knew is out of date after a write it did not
        # compute (host-computed writes are bound again right after). After
        # a deviation ops run on the values themselves, which stay current.
        if self.deviation is not None:
            return
        if isinstance(t, Placeholder):
            t._terra_real = None
        else:
            self.host_values.pop(self.key(t), None)

    def _run_host_rng(self, func: Any, name: str, args: tuple, kwargs: dict) -> Any:
        """A random-number op runs on the host even in co-execution, so the
        generator advances exactly as in eager; placeholder inputs only
        lend their shapes (see tracing.HOST_RNG_OPS). An in-place op's
        target placeholder takes the result as its value."""
        if self.deviation is not None:
            return func(*args, **kwargs)
        forced = self._forced
        if forced is not None:  # catching up: drawn by the replay
            if forced.value is not None:
                forced.out._terra_real = forced.value
            return forced.out

        def scratch(x: Any) -> Any:
            if isinstance(x, Placeholder):
                return torch.empty_strided(tuple(x.shape), tuple(x.stride()), dtype=x.dtype)
            return x
        with self.pause():
            rargs, rkwargs = tree_map(scratch, args), tree_map(scratch, kwargs)
            out = func(*rargs, **rkwargs)
        target = args[0] if args else None
        if isinstance(target, Placeholder) and out is rargs[0]:
            target._terra_real = rargs[0]
            # A replay after a deviation must not draw again: it restores
            # the value drawn here.
            self.log.append((_same, (rargs[0],), {}, target, self.current_site))
            return target
        return out

    def _token_of(self, t: torch.Tensor) -> Token:
        if isinstance(t, Placeholder):
            return t._terra_token
        base = self.base(t)
        tok = self.real_tokens.get(base)
        if tok is None:
            tok = self.real_tokens[base] = Token()
        return tok

    def _placeholders(self, func: Any, name: str, args: tuple, kwargs: dict) -> Any:
        if name in ALIAS_OPS:
            src = args[0]
            if not isinstance(src, Placeholder):
                return func(*args, **kwargs)  # a real alias of a real tensor
            return _view_of(src, _to_meta(src), src._terra_token, src._terra_where)
        if name == "aten.index.Tensor" and any(
                isinstance(m, torch.Tensor) and m.dtype in (torch.bool, torch.uint8) for m in args[1]):
            # A boolean mask's count: from its values (a meta index raises
            # a ~4 ms NotImplementedError for nonzero).
            meta = self._index_with_mask_meta(func, args)
        else:
            meta = infer_meta(func, args, kwargs)
        opinfo = op_info(func)
        # Arguments by alias set, for results that return (a view of) one.
        by_alias: dict[Any, torch.Tensor] = {}
        for i, aname, kwarg_only, sets in opinfo.arg_alias:
            v = args[i] if i < len(args) and not kwarg_only else kwargs.get(aname)
            if isinstance(v, torch.Tensor):
                for s in sets:
                    by_alias[s] = v
        returns = opinfo.ret_alias
        single = not isinstance(meta, (tuple, list))
        metas = [meta] if single else list(meta)
        outs = []
        for j, m in enumerate(metas):
            info = returns[j] if j < len(returns) else None
            target = None
            if info is not None:
                for s in info[0]:
                    target = by_alias.get(s, target)
            if not isinstance(m, torch.Tensor):
                outs.append(m)
            elif target is not None and info[1]:
                outs.append(target)  # in place: the written argument itself
            elif target is not None:
                outs.append(_view_of(target, m, self._token_of(target), name, self.base(target)))
            else:
                ph = Placeholder(m)
                ph._terra_where = name
                outs.append(ph)
        if single:
            return outs[0]
        return type(meta)(outs) if isinstance(meta, tuple) else outs

    def _index_with_mask_meta(self, func: Any, args: tuple) -> torch.Tensor:
        """The result of `x[mask]`: its size comes from the mask's values,
        which the host has read (tracing records that read as a fetch)."""
        x, indices = args[0], args[1]
        reals = []
        for m in indices:
            if isinstance(m, Placeholder):
                if m._terra_real is None:
                    raise MetaUnavailable("the boolean index was not fetched")
                m = m._terra_real
            reals.append(m)
        with self.pause():
            probe = torch.zeros(tuple(x.shape), dtype=x.dtype)
            out = func(probe, reals)
            return torch.empty(tuple(out.shape), dtype=out.dtype, device="meta")

    # -- validation ------------------------------------------------------------
    def _handle(self, ref: ValueRef) -> tuple[int, int, int]:
        node, inst = self.handles[ref.event]
        return node, ref.result, inst

    def _signals(self) -> None:
        for is_case, point, value in self.cursor.take_signals():
            if is_case:
                self._send(("case", point, value))
            elif point not in self.compiled.unrolled:
                self._send(("loop", point, bool(value)))

    def _send(self, effect: tuple, value: Optional[torch.Tensor] = None) -> None:
        """Sends a case selection, loop condition or feed to the run (kept
        for the tape; held back while catching up on one)."""
        if self.b_limit is None:
            if effect[0] == "feed" and effect[2] is None:
                # A fed value the tape cannot find again.
                self._b_stop(len(self.building) - (1 if self.b_current is not None else 0),
                             "a fed value the tape cannot find again")
            elif self.b_current is not None:
                self.b_current.effects.append(effect)
            elif self.b_end is not None:
                self.b_end.effects.append(effect)
            else:
                self.b_pending.append(effect)
        if self.replaying is not None:
            self.replaying.append((effect, value))
            return
        self._send_now(effect, value)

    def _send_now(self, effect: tuple, value: Optional[torch.Tensor]) -> None:
        kind = effect[0]
        if kind == "case":
            self.run.send_case(effect[1], effect[2])
        elif kind == "loop":
            self.run.send_loop(effect[1], effect[2])
        else:
            self.run.feed(effect[1], tensor_spec(value))

    def _validate(self) -> None:
        """Validates the recorded events not validated yet, in order, up to
        the first whose site is still unknown."""
        events = self.trace.events
        keys = self.compiled.keys
        try:
            while self.validated < len(events):
                i = self.validated
                ev = events[i]
                if id(ev) in self.pending:
                    return
                if self.compiled.dynamic_loops and moves_loops(ev):
                    self._move_loops(restrict(ev.loops, self.compiled.dynamic_loops))
                if isinstance(ev, OpEvent):
                    key = keys.get(op_key(ev))
                    if key is None:
                        raise Deviation(f"{ev.name} is not in the graph at this site")
                    flat: list[int] = []
                    for r in ev.inputs:
                        flat.extend(self._handle(r))
                    got = self.cursor.op(key, flat)
                    if got is None:
                        raise Deviation(f"{ev.name} is not in the graph on this path")
                    self.handles[i] = got
                elif isinstance(ev, FeedEvent):
                    key = keys.get(op_key(ev))
                    got = self.cursor.feed(key) if key is not None else None
                    if got is None:
                        raise Deviation("a value fed from Python is not in the graph here")
                    self.handles[i] = got
                    value = self.feed_values.pop(i)
                    if not self.compiled.shape_fits(got[0], value.shape):
                        raise Deviation(f"a fed tensor has shape {list(value.shape)}; the graph was "
                                        f"compiled for {self.compiled.feed_shape(got[0])}")
                    self._send(("feed", got[0], self.feed_src.get(i)), value)
                elif isinstance(ev, StateEvent):
                    key = keys.get(op_key(ev))
                    got = self.cursor.state(key) if key is not None else None
                    if got is None:
                        raise Deviation(f"the graph does not read state {ev.name}")
                    self.handles[i] = (got[0], got[2])
                self._signals()
                self.validated = i + 1
        except Deviation as d:
            ev = events[self.validated]
            self._deviate(str(d), getattr(ev, "site", None))

    def _move_loops(self, to: tuple) -> None:
        """Tells the cursor about the program loops entered, iterated and
        left between the last validated event and the next (loops.py)."""
        for kind, site in transitions(self.loop_ctx, to):
            if kind == "begin":
                key = self.compiled.keys.get(("loop", site))
                ok = key is not None and self.cursor.loop_begin(key)
            elif kind == "iter":
                ok = self.cursor.loop_iter()
            else:
                ok = self.cursor.loop_end()
            if not ok:
                raise Deviation(f"the graph has no loop {kind} at {site.frames[0].file}:{site.frames[0].line}"
                                if site is not None else f"the graph cannot {kind} a loop here")
            self._signals()
        self.loop_ctx = to

    # -- values ------------------------------------------------------------------
    def _fetch(self, ref: ValueRef) -> Optional[torch.Tensor]:
        """The value of a validated event's result from the graph, or None
        (after deviating) when the graph does not publish it or failed."""
        node, result, inst = self._handle(ref)
        fid = self.cursor.fetch_id(node, result)
        if fid < 0:
            self._deviate("reads a value the graph does not publish (a new fetch point)",
                          getattr(self.trace.events[ref.event], "site", None))
            return None
        self._last_fetch = (fid, inst)
        value = self._fetch_point(fid, inst)
        if value is None:
            self._deviate_after_run_failure()
        return value

    def _fetch_point(self, fid: int, inst: int) -> Optional[torch.Tensor]:
        arr = self._fetch_array(fid, inst)
        if arr is None:
            return None
        with self.pause():
            return torch.from_numpy(arr)

    def _fetch_array(self, fid: int, inst: int) -> Any:
        """A fetch point's value as the run hands it over (None: the run
        failed); a serialized run computes it now."""
        if self.serialized:
            self.run.start()
        arr = self.run.fetch(fid, inst)
        if self.serialized:
            self.run.wait_idle()
        return arr

    def _catch_up(self) -> None:
        """Validates everything recorded so far (backward sites resolved), so
        a value the host reads has its handle."""
        self.backward.resolve()
        self.backward.flush()
        self.in_engine = False
        self._validate()

    def _ready(self, t: torch.Tensor) -> None:
        """Makes sure a placeholder the host reads has its value."""
        if self.deviation is not None or not isinstance(t, Placeholder) or t._terra_real is not None:
            return
        self._catch_up()
        if self.deviation is not None:
            return
        ref = self.producers.get(self.key(t))
        if ref is None or ref.event not in self.handles:
            self._deviate("reads a value the trace did not compute")
            return
        self.graph_reads += 1
        value = self._fetch(ref)
        if value is not None:
            t._terra_real = value

    def materialize(self, t: torch.Tensor, kind: str, call: Any, site: Optional[Site] = None) -> Any:
        forced = self._forced
        if forced is not None:
            # Catching up: the replay read the value already. A read by a
            # tensor method is an entry of the tape this iteration leaves,
            # as it would have been live.
            self._catch_up()
            top = forced.func is None and self.b_limit is None and self.b_depth == 0
            if top:
                e = self._b_begin(None, (t,), {})
                e.kind, e.mat_kind = "mat", kind
                self._site_info = (forced.site, forced.reached, forced.loops)
                self._b_answer = forced.entry.answer
            if isinstance(t, Placeholder) and forced.value is not None:
                t._terra_real = forced.value
            if not top and kind == "shape" and forced.entry.mask_reads and isinstance(t, Placeholder):
                # A boolean mask the replayed index read: read again (the run
                # keeps what it published), as the recording did.
                flat = flat_inputs(forced.args, forced.kwargs)
                answer = next((a for k, a in forced.entry.mask_reads if flat[k] is t), None)
                if answer is not None:
                    if t._terra_real is None and answer[0] == "fetch":
                        t._terra_real = self._fetch_point(answer[1], answer[2])
                    if self.b_current is not None:
                        self._b_masks.append((t, answer))
            self.loop_context = forced.loops
            result = super().materialize(t, kind, lambda _: forced.result, site or forced.site)
            if top:
                self.b_current = None
                self._b_end(e, None)
            return result
        if self.fast:
            if site is None:
                r = self._replay_read(t, kind, call)
                if r is not _MISS:
                    return r
            self._leave_fast()
        top = site is None and self.b_limit is None and self.b_depth == 0
        if top:
            e = self._b_begin(None, (t,), {})
            e.kind, e.mat_kind = "mat", kind
            self.b_depth += 1
        try:
            self._last_fetch = None
            self._ready(t)
            if isinstance(t, Placeholder):
                value = t._terra_real
                self._b_answer = ("fetch",) + self._last_fetch if self._last_fetch else ("known",)
                if not top and kind == "shape" and self.b_current is not None:
                    self._b_masks.append((t, self._b_answer))  # a boolean mask's read (tracing._dispatch)
            else:
                value = self._updated_value(t)
                self._b_answer = (("plain",) if value is None else ("updated-fetch",) + self._last_fetch
                                  if self._last_fetch else ("updated-host",))
            if value is not None:
                # Readers (numpy, repr, item, ...) get the plain current value.
                result = super().materialize(t, kind, lambda _: call(value), site)
            else:
                result = super().materialize(t, kind, call, site)
        finally:
            if top:
                self.b_depth -= 1
                self.b_current = None
        if top:
            self._b_end(e, None)
        return result

    def _updated_value(self, t: torch.Tensor) -> Optional[torch.Tensor]:
        """For a real tensor the step updated in place (persistent state such
        as Adam's `step`), its current value from the graph: the tensor
        itself still holds the value from before the iteration, because
        state is written only when the iteration commits."""
        if self.deviation is not None:
            return None
        known = self.host_values.get(self.key(t))
        if known is not None:
            self.host_reads += 1
            return known
        ref = self.producers.get(self.key(t))
        if ref is None or not isinstance(self.trace.events[ref.event], OpEvent):
            return None
        self._catch_up()
        if self.deviation is not None or ref.event not in self.handles:
            return None
        self.graph_reads += 1
        value = self._fetch(ref)
        if value is None:
            return None
        with self.pause():
            return value.reshape(t.shape)

    # -- deviation -----------------------------------------------------------------
    def _deviate_after_run_failure(self) -> None:
        self.run.cancel()
        status = self.run.wait()
        self.run_result = status
        why = f"the graph failed: {status[1]}" if status[0] == "error" else "the graph run ended early"
        self._deviate(why)

    def _deviate(self, reason: str, site: Optional[Site] = None) -> None:
        """Cancels the run and replays the recorded ops eagerly so every
        placeholder has its value; the iteration goes on eagerly."""
        if self.fast:
            self._leave_fast()
        if self.deviation is not None:
            return
        self.deviation = (reason, site)
        if self.eager_threads and torch.get_num_threads() != self.eager_threads:
            torch.set_num_threads(self.eager_threads)  # the rest runs eagerly (function._host_threads)
        self.run.cancel()
        if self.run_result is None:
            self.run_result = self.run.wait()
        with self.pause(), torch.no_grad():
            for func, args, kwargs, out, site in self.log:
                try:
                    result = func(*real(args), **real(kwargs))
                except Exception as exc:
                    # The op fails as it would have eagerly (the graph ran it
                    # concurrently, so Python learns it here, at the next
                    # synchronization point): same exception, with where.
                    self.log.clear()
                    self.graph_error = (exc, func, site)
                    exc.add_note(f"terra: raised by {func} at {user_line(site)}; the step's Python code "
                                 "ran ahead of the graph and learnt it at the next read of a value")
                    raise
                outs, _ = tree_flatten(out)
                reals, _ = tree_flatten(result)
                for o, r in zip(outs, reals):
                    if isinstance(o, Placeholder):
                        o._terra_real = r
        self.log.clear()
        self.host_values.clear()  # real tensors now hold the values

    # -- end of the iteration ---------------------------------------------------------
    def end(self, result: Any) -> tuple[Any, list]:
        """Closes the iteration: validates its end, fetches the returned
        values and the final state, and commits the state. Returns the
        trace and the state updates applied."""
        if self.fast:
            done = self._replay_end(result)
            if done is not None:
                return done
            self._leave_fast()
        if self.b_limit is None:
            self.b_end = End()
        self.record_return(result)
        trace = self.finish()
        if self.deviation is None:
            self._validate()
        if self.deviation is None and self.pending:
            self._deviate("backward ops without a site at the end of the iteration")
        if self.deviation is None and self.loop_ctx:
            try:
                self._move_loops(())
            except Deviation as d:
                self._deviate(str(d))
        if self.deviation is None and not self.cursor.finish():
            self._deviate("the iteration ends where the graph does not")
        if self.deviation is None:
            # Ending the iteration can decide a case (an empty case taken
            # at the end); after that the graph gets nothing more.
            self._signals()
            self.run.finish_host()
        values: dict[int, torch.Tensor] = {}
        points: dict[int, tuple] = {}
        if self.deviation is None:
            for k, f in enumerate(trace.fetches):
                if f.kind in ("return", "commit"):
                    v = self._fetch(f.value)
                    if v is None:
                        break
                    values[k] = v
                    points[k] = self._last_fetch
        if self.deviation is None:
            status = self._wait_run()
            self.run_result = status
            if status[0] != "ok":
                self._deviate(f"the graph failed: {status[1]}" if status[0] == "error"
                              else "the graph run was cancelled")
        if self.deviation is None:
            self._commit(trace, values, result, points)
            self._publish_escapes()
            self._leave_tape(result)
        self.log.clear()
        return trace

    def _commit(self, trace: Any, values: dict[int, torch.Tensor], result: Any,
                points: dict[int, tuple]) -> None:
        end = self.b_end if self.b_limit is None else None
        slots = {s.name: s for s in self.final_slots}
        for k, f in enumerate(trace.fetches):
            if f.kind == "commit":
                slots[f.commit].set(values[k])
                if end is not None:
                    end.commits.append((f.commit,) + points[k])
        for name in trace.dropped_state:
            slots[name].set(None)
        # Returned placeholders get their fetched values.
        returned = {f.value: k for k, f in enumerate(trace.fetches) if f.kind == "return"}
        for i, t in enumerate(_flat_tensors_deep(result)):
            if not isinstance(t, Placeholder):
                continue
            ref = self.producers.get(self.key(t))
            if t._terra_real is None and ref in returned:
                t._terra_real = values[returned[ref]]
                if end is not None:
                    end.returns.append((i,) + points[returned[ref]])

    def _publish_escapes(self) -> None:
        """Placeholders still without a value may be read after the step:
        each reads its fetch from this (finished) run, if the graph
        publishes it."""
        run, cursor = self.run, self.cursor
        escapes = self.b_end.escapes if self.b_end is not None and self.b_limit is None else {}
        for func, args, kwargs, out, _ in self.log:
            for o in tree_flatten(out)[0]:
                if isinstance(o, Placeholder) and o._terra_real is None and o._terra_resolve is None:
                    ref = self.producers.get(self.key(o))
                    if ref is None or ref.event not in self.handles:
                        continue
                    node, result, inst = self._handle(ref)
                    fid = cursor.fetch_id(node, result)
                    if fid >= 0:
                        o._terra_resolve = lambda run=run, fid=fid, inst=inst: _from_fetch(run, fid, inst)
                        escapes[self.idents.get(id(o))] = (fid, inst)

    # -- tapes (tape.py) ------------------------------------------------------------
    def _ident(self, t: torch.Tensor) -> Optional[tuple]:
        i = self.idents.get(id(t))
        if i is not None:
            return i
        return None if isinstance(t, Placeholder) else self._host_ident(t)

    def _host_ident(self, t: torch.Tensor) -> tuple:
        """The identity of a real tensor that is neither state, nor a step
        argument, nor made in the step, as the recorder sees it: state if
        it is a state tensor's memory, else the n-th host memory used."""
        k = self.key(t)
        name = self.state_name_of(t)
        if name is not None:
            i: tuple = ("state", name)
        else:
            n = self.host_ids.get(k)
            if n is None:
                n = self.host_ids[k] = len(self.host_ids)
                self.host_tensors[n] = t
                if n in self._relaxed_hosts:  # its sizes may differ from the tape's
                    self.layout.append((n, tuple(t.shape)))
            i = ("host", n, tuple(t.shape), tuple(t.stride()), t.dtype)
        self.idents[id(t)] = i
        self.tape_keep.append(t)  # its id stays its own
        return i

    def _name_results(self, q: int, e: Entry, out: Any) -> None:
        """Gives entry `q`'s results their identities."""
        struct = e.struct
        if struct is None:
            flat = (out,)
        elif struct is list or struct is tuple:
            flat = out
        else:
            flat = tree_flatten(out)[0]
        idents = self.idents
        for j, (o, recipe) in enumerate(zip(flat, e.outs)):
            if recipe[0] != "same" and isinstance(o, torch.Tensor):
                idents[id(o)] = (q, j)
                if not isinstance(o, Placeholder):
                    self.tape_keep.append(o)
                ref = self.producers.get(self.key(o))
                if ref is not None:
                    self.ref_idents.setdefault(ref, (q, j))

    def _name_replayed(self, e: Entry, out: Any) -> None:
        """`_name_results` for a replayed entry (identities made with the tape)."""
        struct = e.struct
        idents = self.idents
        if struct is None:
            i = e.ids[0]
            if i is not None and isinstance(out, torch.Tensor):
                idents[id(out)] = i
                if type(out) is not Placeholder:
                    self.tape_keep.append(out)
            return
        flat = out if struct is list or struct is tuple else tree_flatten(out)[0]
        for o, i in zip(flat, e.ids):
            if i is not None and isinstance(o, torch.Tensor):
                idents[id(o)] = i
                if type(o) is not Placeholder:
                    self.tape_keep.append(o)

    def _b_begin(self, func: Any, args: tuple, kwargs: dict) -> Entry:
        try:
            spec = spec_of(args, kwargs, self._ident) if func is not None else self._ident(args[0])
        except Untapeable:
            spec = None
        e = Entry("stop", func, spec)
        e.effects, self.b_pending = self.b_pending, []
        self.building.append(e)
        self.b_current = e
        self.b_flat = flat_inputs(args, kwargs)
        self._b_call = (args, kwargs)
        self._kind = None
        self._b_host = False
        self._b_answer = None
        self._b_masks: list = []
        self._written_now = []
        self._record_from = None
        self._site_info = None
        return e

    def _b_end(self, e: Entry, out: Any) -> None:
        """Completes the tape entry of an interaction recorded live."""
        q = len(self.building) - 1
        if e.func is not None:
            e.kind = self._kind or "stop"
            e.name = op_info(e.func).name
        if self._site_info is not None:
            e.site, e.reached, e.loops = self._site_info
        e.engine = e.site is not None and is_engine_site(e.site, e.reached)
        if e.engine and self._record_from is not None:
            e.engine_sites = (self._record_from, len(self.trace.events))  # sites filled in at the end
        e.host_eval = self._b_host
        try:
            if e.spec is None or self.deviation is not None or e.site is None:
                raise Untapeable("not recorded")
            if e.kind == "mat":
                if self._b_answer is None:
                    raise Untapeable("read not answered")
                e.answer = self._b_answer
                if e.func is not None:
                    e.mat_kind = "item"
            elif e.kind in ("op", "rng", "pass", "masked"):
                masked = e.kind == "masked"
                if masked:
                    reads = []
                    for m in self._b_call[0][1]:
                        if isinstance(m, Placeholder):
                            answer = next((a for t, a in self._b_masks if t is m), None)
                            if answer is None:
                                raise Untapeable("a boolean mask read in no way the tape knows")
                            reads.append((next(k for k, x in enumerate(self.b_flat) if x is m), answer))
                    e.mask_reads = tuple(reads)
                    e.kind = "op"
                flat_in = self.b_flat
                e.written = tuple(next(k for k, x in enumerate(flat_in) if x is w) for w in self._written_now)
                self._recipes(e, out, flat_in)
                if e.kind == "op":  # (an alias op records no event: lo is None)
                    self.b_events[q] = (self._record_from, len(self.trace.events), masked, self._b_call)
                self._name_results(q, e, out)
            else:
                raise Untapeable(e.kind)
        except (Untapeable, StopIteration) as exc:
            e.kind = "stop"
            if self.b_limit is None:
                self._b_stop(q, f"{e.name or e.kind}: {exc or 'a result not among the arguments'}")

    @staticmethod
    def _limit_before(entries: list, q: int, why: Optional[str], engine: Optional[bool] = None) -> int:
        """Where a tape that cannot replay entry `q` ends: before `q`, or,
        for an op of the autograd engine, before its backward pass (see
        _b_stop). Says why with TERRA_LOG=tape when `why` is given."""
        if engine if engine is not None else q < len(entries) and entries[q].engine:
            p = q
            while p > 0 and entries[p - 1].engine:
                p -= 1
            q = max(p - 1, 0)
        if why is not None and _TAPE_LOG:
            print(f"[terra] tape ends at entry {q}: {why}", file=sys.stderr, flush=True)
        return q

    def _b_stop(self, q: int, why: str) -> None:
        """The tape being built ends before entry `q`; inside the autograd
        engine, before the backward pass instead: a catch-up there could not
        hook the autograd node already running (a post hook added while a
        node runs does not fire), so the rest of its ops would get another
        node's backward site, a path the graph does not have."""
        if self.in_engine:
            q = self._limit_before(self.building, q, None, engine=True)
        self.b_limit = q
        if _TAPE_LOG:
            e = self.building[q] if q < len(self.building) else None
            where = f" at {user_line(e.site)}" if e is not None and e.site is not None else ""
            print(f"[terra] tape ends at entry {q}{where}: {why}", file=sys.stderr, flush=True)

    def _recipes(self, e: Entry, out: Any, flat_in: list) -> None:
        """How the replay makes an entry's results (see tape.py)."""
        if isinstance(out, torch.Tensor):
            flat, e.struct = [out], None
        elif type(out) in (list, tuple) and not any(type(o) in (list, tuple, dict) for o in out):
            flat, e.struct = list(out), type(out)  # the common multi-result form, without pytree
        else:
            flat, e.struct = tree_flatten(out)
        recipes, real_made = self._recipe_list(flat, flat_in)
        if real_made and e.kind == "op" and any(r[0] not in ("real", "value") for r in recipes):
            raise Untapeable("real and placeholder results")
        e.outs = tuple(recipes)

    def _recipe_list(self, flat: list, flat_in: list) -> tuple[list, bool]:
        """The recipes of an interaction's flat results; whether one is real."""
        recipes = []
        real_made = False
        for o in flat:
            if not isinstance(o, torch.Tensor):
                recipes.append(("value", o))
                continue
            k = next((k for k, x in enumerate(flat_in) if x is o), None)
            if k is not None:
                recipes.append(("same", k))
            elif isinstance(o, Placeholder):
                tok = o._terra_token
                k = next((k for k, x in enumerate(flat_in)
                          if (x._terra_token if isinstance(x, Placeholder) else self.real_tokens.get(self.base(x)))
                          is tok), None)
                meta = (tuple(o.shape), tuple(o.stride()))
                if k is not None:
                    recipes.append(("view", k) + meta + (o.storage_offset() - flat_in[k].storage_offset(),
                                                          o.dtype, o._terra_where))
                else:
                    recipes.append(("new",) + meta + (o.storage_offset(), o.dtype, o._terra_where))
            else:
                real_made = True
                recipes.append(("real",))
        return recipes, real_made

    def _shape_polymorphic(self, e: Entry, info: tuple) -> None:
        """Marks an entry whose results the graph types with dynamic dims
        (a boolean mask's count and what it flows into, a host tensor fed
        with sizes the traces saw change): the replay infers their shapes
        from its own arguments (the graph's types are the ground truth of
        what may vary: a static dim that changes fails the graph's guard),
        and the size arguments that stand for dynamic dims are checked
        against them (tape.form_matches) instead of by value."""
        lo, hi, masked, (args, kwargs) = info
        if lo is None:  # an alias (`detach`): its view has its argument's shape
            if any(r[0] == "view" for r in e.outs):
                e.infer = True
                e.outs = tuple(r if r[0] in ("same", "value") else ("infer",) for r in e.outs)
                e.memo = {}
            return
        events = self.trace.events
        idx = next((i for i in range(hi - 1, lo - 1, -1) if isinstance(events[i], OpEvent)), None)
        if idx is None:
            return
        ev = events[idx]
        compiled = self.compiled
        infer = masked
        if not infer:
            handle = self.handles.get(idx)
            infer = handle is None or any(d < 0 for j in range(len(ev.results))
                                          for d in compiled.node_shape(handle[0], j))

        def events_shape(ref: ValueRef) -> list:
            handle = self.handles.get(ref.event)
            return compiled.node_shape(handle[0], ref.result) if handle is not None else []

        def dynamic_dim(ref: ValueRef, d: int) -> bool:
            handle = self.handles.get(ref.event)
            if handle is None:
                return True
            shape = compiled.node_shape(handle[0], ref.result)
            return d >= len(shape) or shape[d] < 0
        forms: dict = {}
        if e.name in sizes.SIZE_ARGS:
            own = len(ev.inputs) - ev.args.get(sizes.SHAPE_OPERANDS, 0)
            for aname in sizes.SIZE_ARGS[e.name]:
                form = ev.args.get(aname)
                syms = [form] if isinstance(form, sizes.SymDim) else \
                    [x for x in form if isinstance(x, sizes.SymDim)] if isinstance(form, list) else []
                # A reshape's inferred entry (-1) follows its operand's numel.
                inferred_entry = (isinstance(form, list) and -1 in form and e.name in sizes.RESHAPES and ev.inputs
                                  and any(dynamic_dim(ev.inputs[0], d) for d in range(len(events_shape(ev.inputs[0])))))
                if not inferred_entry and not any(
                        x.operand < len(ev.inputs) and dynamic_dim(ev.inputs[x.operand], x.dim) for x in syms):
                    continue  # a static size: checked by value
                extra = tuple(self.ref_idents.get(r) for r in ev.inputs[own:])
                if any(x.operand >= own for x in syms) and (None in extra or any(
                        i[0] != "host" and not isinstance(i[0], int) for i in extra)):
                    raise Untapeable("a data-dependent size taken from a value the tape cannot find")
                forms[aname] = (form, extra)
        if forms and e.name == "aten._reshape_alias" and "size" in forms:
            # Its strides (dropped from the graph's op, a reshape) are the
            # contiguous strides of its size when they were so here.
            values = {aname: (args[i] if i < len(args) and not kwarg_only else kwargs.get(aname))
                      for i, aname, kwarg_only, _, _ in op_info(e.func).args}
            size, stride, x = values.get("size"), values.get("stride"), values.get("self")
            if isinstance(size, list) and isinstance(stride, list) and stride == _view_strides(x, size):
                forms["stride"] = ("view-strides", ())
        if forms:
            sa, sk = e.spec
            sa, sk = list(sa), list(sk)
            keyed: dict = {}
            for i, aname, kwarg_only, _, _ in op_info(e.func).args:
                if aname not in forms:
                    continue
                if i < len(args) and not kwarg_only:
                    sa[i] = ("F", type(args[i]), None)
                    keyed[i] = forms[aname]
                else:
                    sk = [(k, ("F", type(kwargs[k]), None) if k == aname else leaf) for k, leaf in sk]
                    keyed[aname] = forms[aname]
            e.spec = (tuple(sa), tuple(sk))
            e.forms = keyed
            infer = True
        if infer:
            if any(r[0] == "real" for r in e.outs):
                raise Untapeable("real results with data-dependent sizes")
            e.infer = True
            e.outs = tuple(r if r[0] in ("same", "value") else ("infer",) for r in e.outs)
            # Shapes that follow from the inputs' shapes alone are memoized
            # per input layout (GPT-2's few lengths); a mask's count is not.
            e.memo = None if masked else {}

    def _forms_match(self, e: Entry, func: Any, args: tuple, kwargs: dict) -> bool:
        tensors = schema_tensors(func, args, kwargs, op_info(func).args)
        for key, (form, extra) in e.forms.items():
            v = args[key] if type(key) is int else kwargs.get(key)
            if form == "view-strides":  # _reshape_alias's strides: those of the view it stands for
                if v != _view_strides(args[0], args[1] if len(args) > 1 else kwargs.get("size")):
                    return False
                continue
            operands = tensors
            if extra:  # sizes of values that are not operands (tracing: shape operands)
                found = [self._tensor_of(i) for i in extra]
                if any(t is None for t in found):
                    return False
                operands = tensors + found
            if not form_matches(form, v, operands):
                return False
        return True

    def _tensor_of(self, ident: tuple) -> Optional[torch.Tensor]:
        """This iteration's tensor with tape identity `ident` (a result of a
        replayed entry, or a host tensor by its number), or None."""
        if isinstance(ident[0], int):
            q, j = ident
            if q >= len(self.replayed):
                return None
            out = self.replayed[q].out
            flat = (out,) if isinstance(out, torch.Tensor) else tree_flatten(out)[0]
            return flat[j] if j < len(flat) and isinstance(flat[j], torch.Tensor) else None
        if ident[0] == "host":
            return self.host_tensors.get(ident[1])
        return None

    def _leave_tape(self, result: Any) -> None:
        """After a committed iteration recorded live: its tape, for the next."""
        if not _TAPES_ENABLED:
            return
        entries, limit, end = self.building, self.b_limit, self.b_end
        if limit is not None:
            end = None
        else:
            limit = len(entries)
            end.slots = [(s.name, None if (t := s.get()) is None else self._ident(t) or ("?",))
                         for s in self.final_slots]
            end.dropped = list(self.trace.dropped_state)
            end.result = [self._ident(t) for t in _flat_tensors_deep(result)]
            if any(i is None for i in end.result) or any(i == ("?",) for _, i in end.slots):
                end = None
        _prune_host_evals(entries[:limit])
        fed: dict[int, list[int]] = {}
        for src in self.feed_src.values():
            if src[0] == "in":
                fed.setdefault(src[1], []).append(src[2])
        for q, ks in fed.items():
            if q < len(entries):
                entries[q].feeds = tuple(ks)
        events = self.trace.events
        for e in entries[:limit]:
            if e.engine and e.engine_sites:
                lo, hi = e.engine_sites
                e.engine_sites = tuple(events[i].site for i in range(lo, hi))
        for q in sorted(self.b_events):
            if q >= limit:
                break
            try:
                self._shape_polymorphic(entries[q], self.b_events[q])
            except Untapeable as exc:
                limit = self._limit_before(entries, q, f"{entries[q].name}: {exc}")
                end = None
                break
        # Host tensors fed where the graph's feed has dynamic dims (Faster
        # R-CNN's RoIs from NumPy): those dims are checked by the feed's type.
        host_dynamic: dict[int, frozenset] = {}
        for i, n in self.feed_hosts.items():
            handle = self.handles.get(i)
            if handle is not None:
                dims = frozenset(d for d, w in enumerate(self.compiled.node_shape(handle[0], 0)) if w < 0)
                if dims:
                    host_dynamic[n] = dims
        # Relaxed alike in every tape of this key (tapes agree on a prefix
        # only if they check it alike): a host tensor relaxed once stays so.
        known = self.compiled.host_dynamic.setdefault(self.tape_key, {})
        grew = any(known.get(n, frozenset()) | dims != known.get(n) for n, dims in host_dynamic.items())
        for n, dims in host_dynamic.items():
            known[n] = known.get(n, frozenset()) | dims
        if known:
            for e in entries[:limit]:
                if e.kind != "mat" and e.spec is not None:
                    e.spec = relax_host_shapes(e.spec, known)
        tape = Tape(entries[:limit], end, limit)
        tapes = self.compiled.tapes
        choices = tapes.pop(self.tape_key, [])
        if grew:
            for old in choices:
                for e in old.entries:
                    if e.kind != "mat" and e.spec is not None:
                        e.spec = relax_host_shapes(e.spec, known)
                _chain(old)
        if len(tapes) >= _MAX_TAPES:  # the least recently made goes
            del tapes[next(iter(tapes))]
        _chain(tape)
        # The new tape first; an identical older one goes.
        tapes[self.tape_key] = [tape] + [t for t in choices if t.signature != tape.signature][:_MAX_TAPES - 1]

    # -- replaying a tape ---------------------------------------------------------------
    def _replay_op(self, func: Any, args: tuple, kwargs: dict) -> Any:
        q = self.pos
        tape = self.tape
        e = tape.entries[q] if q < tape.limit else None
        if e is None or e.func is not func or (e.kind != "pass" and not (matches(
                e.spec, args, kwargs, self.idents, self._host_ident) and (
                    e.forms is None or self._forms_match(e, func, args, kwargs)))):
            if _TAPE_LOG:
                self._missed = f"{op_info(func).name}" + ("" if e is None or e.func is not func else " (other arguments)")
            if not self._choose_tape(q, lambda c: c.func is func and (c.kind == "pass" or (matches(
                    c.spec, args, kwargs, self.idents, self._host_ident) and (
                        c.forms is None or self._forms_match(c, func, args, kwargs))))):
                return _MISS
            tape = self.tape
            e = tape.entries[q]
        kind = e.kind
        inferred = None
        memo_key = memo_recipes = None
        if e.infer:  # data-dependent sizes: shapes from these arguments
            if e.memo is not None:
                # Shapes that follow the inputs' shapes: recipes kept per input layout.
                memo_key = self._memo_key(e, args)
                memo_recipes = e.memo.get(memo_key)
            if memo_recipes is None:
                if e.mask_reads and not self._read_masks(e, args, kwargs):
                    return _MISS
                try:
                    inferred = self._placeholders(func, e.name, args, kwargs)
                except Exception as exc:  # noqa: BLE001 - recorded live, it deviates or raises as it should
                    if _TAPE_LOG:
                        self._missed = f"{e.name} whose shape inference failed ({exc})"
                    return _MISS
                if e.memo is None:  # a boolean mask's count: a new data-dependent size
                    self.layout.append(tuple(tuple(t.shape) for t in _flat_tensors_deep(inferred)))
        if kind == "mat":
            return self._replay_answer(q, e, args[0], lambda v: func(v, *args[1:], **kwargs), func, args, kwargs)
        fwd = self._forward
        if fwd is not None:  # _note_nodes, its common case inline
            if fwd.entry.struct is None and isinstance(fwd.out, torch.Tensor):
                self._forward = None
                fwd.nodes = [fwd.out.grad_fn]
            else:
                self._note_nodes()
        self.pos = q + 1
        self.current_site = e.site
        flat = flat_inputs(args, kwargs) if e.needs_flat else None
        for k in e.feeds:  # a fed value is taken when the op reads it
            t = flat[k]
            self.fed_values[(q, k)] = t.terra_real if isinstance(t, Placeholder) else t
        value = None
        if kind == "rng":
            for k in e.written:
                self._replay_written(flat[k])
            out = self._run_host_rng(func, e.name, args, kwargs)
            if isinstance(out, Placeholder):
                value = out._terra_real
        elif kind == "pass" or e.real:
            out = func(*args, **kwargs)
            if kind != "pass":
                self.log.append((func, args, kwargs, out, e.site))
        elif memo_recipes is not None:
            out = self._make_results(e, flat, memo_recipes)
            self.log.append((func, args, kwargs, out, e.site))
        elif inferred is not None:
            out = inferred
            if memo_key is not None and len(e.memo) < _MEMO_MAX:
                results = [out] if e.struct is None else list(out) if e.struct in (list, tuple) \
                    else tree_flatten(out)[0]
                recipes, real_made = self._recipe_list(results, flat)
                if not real_made:
                    e.memo[memo_key] = tuple(recipes)
            self.log.append((func, args, kwargs, out, e.site))
        else:
            out = self._make_results(e, flat)
            self.log.append((func, args, kwargs, out, e.site))
        if kind == "op":
            host = self._host_eval(func, e.name, args, kwargs, out) if e.host_eval else None
            for k in e.written:
                t = flat[k]
                if type(t) is Placeholder:
                    t._terra_real = None
                else:
                    self._replay_written(t)
            if host is not None:
                self._host_result = host
                self._apply_host_result()
        if e.relaxed is not None:
            self.relaxed_feeds[q] = relaxed_value(e, args, kwargs)
        self._name_replayed(e, out)
        r = _Replayed(e, func, args, kwargs, out, value, None)
        self.replayed.append(r)
        if not e.engine and kind != "pass":
            self._forward = r
        if e.effects:
            self._emit(e.effects)
        if kind == "op" and e.host_eval and host is None:
            self._leave_fast()  # the host could not compute it this time
        return out

    def _memo_key(self, e: Entry, args: tuple) -> tuple:
        """What an inferred entry's result shapes depend on: every
        data-dependent size this iteration has met so far (`layout`: the
        shapes of relaxed host tensors and of boolean-mask results, in
        order; the same tape prefix with the same sizes gives every value
        the same shape) and its relaxed scalar (fed, so unchecked)."""
        if e.relaxed is None:
            return tuple(self.layout)
        position, name, kwarg_only = e.relaxed[:3]
        v = args[position] if position < len(args) and not kwarg_only else name
        return tuple(self.layout) + (("relaxed", tuple(v) if isinstance(v, list) else v),)

    def _read_masks(self, e: Entry, args: tuple, kwargs: dict) -> bool:
        """The values of the boolean masks the graph computes that a
        replayed index needs for its result's size, fetched as the
        recording did; False if one is not available (the run failed, or a
        value the recording knew is not known now)."""
        flat = flat_inputs(args, kwargs)
        for k, answer in e.mask_reads:
            m = flat[k]
            if not isinstance(m, Placeholder):
                return False
            if m._terra_real is not None:
                continue
            if answer[0] != "fetch":
                return False
            value = self._fetch_point(answer[1], answer[2])
            if value is None:
                return False
            self.graph_reads += 1
            m._terra_real = value
        return True

    def _make_results(self, e: Entry, flat: Optional[list], recipes: Optional[tuple] = None) -> Any:
        outs = []
        for r in e.outs if recipes is None else recipes:
            k = r[0]
            if k == "new":
                ph = _make_wrapper(Placeholder, r[1], strides=r[2], storage_offset=r[3], dtype=r[4],
                                   device="cpu", requires_grad=False)
                ph._terra_token = Token()
                ph._terra_where = r[5]
                outs.append(ph)
            elif k == "same":
                outs.append(flat[r[1]])
            elif k == "view":
                target = flat[r[1]]
                rel = r[4]
                if isinstance(target, Placeholder):
                    token, addr, base = target._terra_token, target._terra_addr, target._terra_base
                else:
                    token, addr, base = self._token_of(target), target.data_ptr(), self.base(target)
                ph = Placeholder.make(r[2], r[3], target.storage_offset() + rel, r[5], token)
                ph._terra_base = base
                if addr is not None:
                    ph._terra_addr = addr + rel * ph.element_size()
                ph._terra_where = r[6]
                outs.append(ph)
            else:  # "value"
                outs.append(r[1])
        struct = e.struct
        if struct is None:
            return outs[0]
        if struct is list:
            return outs
        if struct is tuple:
            return tuple(outs)
        return tree_unflatten(outs, struct)

    def _replay_written(self, t: torch.Tensor) -> None:
        if isinstance(t, Placeholder):
            t._terra_real = None
        elif self.host_values:
            self.host_values.pop(self.key(t), None)

    def _replay_read(self, t: torch.Tensor, kind: str, call: Any) -> Any:
        """A read by a tensor method (`numpy`, `bool`, ...) from the tape."""
        q = self.pos

        def same(e: Entry) -> bool:
            return e.kind == "mat" and e.func is None and e.mat_kind == kind and self._ident(t) == e.spec
        if q >= self.tape.limit or not same(self.tape.entries[q]):
            if not self._choose_tape(q, same):
                return _MISS
        return self._replay_answer(q, self.tape.entries[q], t, call, None, (t,), {"kind": kind})

    def _choose_tape(self, q: int, fits: Callable[[Entry], bool]) -> bool:
        """Another tape of this key that agrees with the current one on
        entries 0..q-1 (checks, results and run effects: what was replayed
        so far is a replay of it too) and whose entry `q` `fits` the call:
        an iteration that takes another branch than its tape replays the
        tape of an earlier iteration that took it."""
        here = self.tape.entries[q - 1].chain if q else None
        for tape in self.tape_choices:
            if tape is self.tape or tape.limit <= q:
                continue
            if (q == 0 or tape.entries[q - 1].chain == here) and fits(tape.entries[q]):
                self.tape = tape
                return True
        return False

    def _replay_answer(self, q: int, e: Entry, t: torch.Tensor, call: Any, func: Any, args: tuple,
                       kwargs: dict) -> Any:
        how = e.answer
        what = how[0]
        if what == "known" and (not isinstance(t, Placeholder) or t._terra_real is None):
            return _MISS
        if what == "updated-host" and self.host_values.get(self.key(t)) is None:
            return _MISS
        if self._forward is not None:
            self._note_nodes()
        self.pos = q + 1
        self.current_site = e.site
        self._emit(e.effects)
        value = None
        if what in ("fetch", "updated-fetch"):
            value = self._fetch_point(how[1], how[2])
            if value is None:  # the run failed: record what was replayed, then deviate
                self._leave_fast()
                self._deviate_after_run_failure()
                value = t._terra_real if isinstance(t, Placeholder) else None
            else:
                self.graph_reads += 1
                if what == "fetch":
                    t._terra_real = value
                else:
                    with self.pause():
                        value = value.reshape(t.shape)
        elif what == "known":
            value = t._terra_real
        elif what == "updated-host":
            self.host_reads += 1
            value = self.host_values.get(self.key(t))
        with self.pause():
            result = call(value if value is not None else t)
        if self.fast:
            self.replayed.append(_Replayed(e, func, args, kwargs, None, value if what == "fetch" else None,
                                           result))
        return result

    def _note_nodes(self) -> None:
        """The autograd nodes of the last replayed forward op's results, as
        the recorder would have found them at this interaction."""
        r, self._forward = self._forward, None
        out, struct = r.out, r.entry.struct
        if struct is None:
            r.nodes = [out.grad_fn] if isinstance(out, torch.Tensor) else []
            return
        flat = out if struct is list or struct is tuple else tree_flatten(out)[0]
        r.nodes = [o.grad_fn for o in flat if isinstance(o, torch.Tensor)]

    def _emit(self, effects: list) -> None:
        run = self.run
        for eff in effects:
            kind = eff[0]
            if kind == "case":
                run.send_case(eff[1], eff[2])
            elif kind == "loop":
                run.send_loop(eff[1], eff[2])
            else:
                src = eff[2]
                if src[0] == "relaxed":
                    value = self.relaxed_feeds[src[1]]
                else:
                    value = self.fed_values[src[1:]]
                run.feed(eff[1], tensor_spec(value))
            self.sent.append(eff)

    def _leave_fast(self) -> None:
        """Catches up on the entries replayed so far (see tape.py): records
        them as they would have been recorded live, checks the Cursor
        decides what the replay sent, and sends what it decides beyond it."""
        if not self.fast:
            return
        self.fast = False
        if self.eager_threads and self.deviation is None and torch.get_num_threads() != 1:
            torch.set_num_threads(1)  # recording computes on the host (function._host_threads)
        if self._forward is not None:
            self._note_nodes()
        if _TAPE_LOG:
            e = self.tape.entries[self.pos] if self.pos < len(self.tape.entries) else None
            want = "the end" if e is None else f"{e.kind} {e.name or e.mat_kind} at {user_line(e.site)}"
            got, self._missed = self._missed, ""
            print(f"[terra] tape left at entry {self.pos} of {len(self.tape.entries)}: expected {want}"
                  + (f", got {got}" if got else ""),
                  file=sys.stderr, flush=True)
        replayed, self.replayed = self.replayed, []
        for r in replayed:  # values are recomputed in order
            if r.out is not None:
                for o in ([r.out] if isinstance(r.out, torch.Tensor) else tree_flatten(r.out)[0]):
                    if isinstance(o, Placeholder):
                        o._terra_real = None
        self.host_values.clear()
        self.idents = {k: v for k, v in self.idents.items() if v[0] in ("state", "arg", "host")}
        reads = (self.graph_reads, self.host_reads)
        self.replaying = []
        # Recorded as inside __torch_dispatch__: with this mode off (the
        # recorder's own torch calls must not come back to it).
        outside = self.mode_on()
        if outside:
            self.mode_off()
        try:
            for r in replayed:
                self._forced = r
                try:
                    if r.func is None:
                        self.materialize(r.args[0], r.kwargs["kind"], None, r.entry.site)
                    else:
                        self._dispatch(r.func, r.args, r.kwargs)
                finally:
                    self._forced = None
                if self.deviation is not None:
                    break
        finally:
            if outside:
                self.mode_back()
            decided, self.replaying = self.replaying, None
            self.graph_reads, self.host_reads = reads
        if self.deviation is not None:
            return
        sent = self.sent
        same = len(decided) >= len(sent) and all(
            d[:2] == s[:2] and (d[0] == "feed" or d[2] == s[2]) for (d, _), s in zip(decided, sent))
        if not same:
            self._deviate("the host left the recorded path where the replayed signals no longer hold")
            return
        for effect, value in decided[len(sent):]:
            self._send_now(effect, value)

    def _replay_end(self, result: Any) -> Optional[Any]:
        """The end of a fully replayed iteration, or None if it differs
        from the tape's."""
        tape = self.tape
        end = tape.end
        if end is None or self.pos != len(tape.entries):
            # Another tape that agrees so far and ends here.
            q = self.pos
            here = tape.entries[q - 1].chain if q and q <= len(tape.entries) else None
            tape = next((t for t in self.tape_choices if t is not tape and t.end is not None
                         and len(t.entries) == q and (q == 0 or t.entries[q - 1].chain == here)), None)
            if tape is None:
                return None
            self.tape, end = tape, tape.end
        flat = list(_flat_tensors_deep(result))
        if [self._ident(t) for t in flat] != end.result:
            return None
        slots = self.registry.slots()
        if [(s.name, None if (t := s.get()) is None else self._ident(t)) for s in slots] != end.slots:
            return None
        self._emit(end.effects)
        self.run.finish_host()
        if self.serialized:
            self.run.start()
        status = self._wait_run()
        self.run_result = status
        if status[0] != "ok":
            return self._replay_end_failed(result)
        by_name = {s.name: s for s in slots}
        with self.pause():  # once for all the end's fetches
            # Every value is fetched before the state is written (all of it
            # or none: a failure deviates, replaying from the old state).
            returns = [self.run.fetch(fid, inst) for _, fid, inst in end.returns]
            late = None if any(a is None for a in returns) else self._commit_direct(end.commits, by_name)
            if late is None:
                return self._replay_end_failed(result)
            # Published (fetch_into saw every commit), so no fetch fails now.
            for name, fid, inst in late:
                by_name[name].set(torch.from_numpy(self.run.fetch(fid, inst)))
            returns = [torch.from_numpy(arr) for arr in returns]
        for name in end.dropped:
            by_name[name].set(None)
        for (i, _, _), v in zip(end.returns, returns):
            if flat[i]._terra_real is None:
                flat[i]._terra_real = v
        run, replayed = self.run, self.replayed  # entry q was replayed as replayed[q]
        for where, (fid, inst) in end.escapes.items():
            if not (isinstance(where, tuple) and len(where) == 2 and isinstance(where[0], int)):
                continue
            out = replayed[where[0]].out
            flat = (out,) if isinstance(out, torch.Tensor) else tree_flatten(out)[0]
            o = flat[where[1]] if where[1] < len(flat) else None
            if isinstance(o, Placeholder) and o._terra_real is None and o._terra_resolve is None:
                o._terra_resolve = lambda run=run, fid=fid, inst=inst: _from_fetch(run, fid, inst)
        self.log.clear()
        self.keepalive.clear()
        return self.trace

    def _wait_run(self) -> tuple:
        """Waits for the run to end; the time counts as host stall (the
        host waits for the graph, as at a fetch)."""
        start = time.perf_counter()
        status = self.run.wait()
        self.end_wait_s += time.perf_counter() - start
        return status

    def _commit_direct(self, commits: list, by_name: dict) -> Optional[list]:
        """Commits the run's final state values that can be copied straight
        into the program's tensors (Run.fetch_into: one native call, no
        torch op, so no parallel region of torch's on the host). Each
        tensor written gets its autograd version bumped (`t.copy_(t)`, a
        no-op copy), as eager's in-place updates do: autograd checks saved
        tensors' versions. Returns the commits left to the slots' setters
        (a slot without a tensor of the value's dtype and shape), or None
        if a value was never published (then nothing was written)."""
        direct, late = [], []
        for c in commits:
            cur = by_name[c[0]].get()
            if cur is None or type(cur) not in (torch.Tensor, torch.nn.Parameter) or cur.device.type != "cpu":
                late.append(c)
            else:
                direct.append((c, cur))
        if not direct:
            return late
        items = [(fid, inst, t.data_ptr(), mlir_text.element_type(t.dtype), list(t.shape), list(t.stride()))
                 for (_, fid, inst), t in direct]
        copied = self.run.fetch_into(items)
        if copied is None:
            return None
        with torch.no_grad():
            for (c, t), ok in zip(direct, copied):
                if ok:
                    t.copy_(t)
                else:
                    late.append(c)
        return late

    def _replay_end_failed(self, result: Any) -> Any:
        """The graph failed while a replayed iteration ended: record the
        iteration, then deviate as a recorded one would."""
        self._leave_fast()
        self.record_return(result)
        trace = self.finish()
        self._deviate_after_run_failure()
        self.log.clear()
        return trace


def _tensor_idents(spec: Any) -> list:
    """The identities a spec checks, in flat input order."""
    out: list = []
    for leaf in list(spec[0]) + [s for _, s in spec[1]]:
        if leaf[0] == "T":
            out.append(leaf[1])
        elif leaf[0] == "L":
            out.extend(x[1] for x in leaf[2] if x[0] == "T")
    return out


def _prune_host_evals(entries: list[Entry]) -> None:
    """A replay computes a tiny op's value on the host only if a read the
    host answers itself needs it (directly or through other such ops):
    e.g. an optimizer's step counter, not every bias gradient of a narrow
    model."""
    needed: set = set()
    for e in entries:
        if e.kind == "mat" and e.answer is not None and e.answer[0] in ("known", "updated-host"):
            needed.add(e.spec if e.func is None else _tensor_idents(e.spec)[0])
    for q in range(len(entries) - 1, -1, -1):
        e = entries[q]
        if not e.host_eval or e.kind != "op":
            continue
        inputs = _tensor_idents(e.spec)
        made = {(q, j) if r[0] != "same" else inputs[r[1]] for j, r in enumerate(e.outs)}
        made.update(inputs[k] for k in e.written)
        if made & needed:
            needed.update(inputs)
        else:
            e.host_eval = False


_make_wrapper = torch.Tensor._make_wrapper_subclass  # Placeholder.make, inlined in the replay


def _view_strides(x: Any, size: Any) -> Optional[list]:
    """The strides of `x.view(size)` (what reshape passes `_reshape_alias`),
    from metadata only; None if it is no view."""
    if not isinstance(x, torch.Tensor) or not isinstance(size, (list, tuple)):
        return None
    try:
        meta = torch.empty_strided(tuple(x.shape), tuple(x.stride()), dtype=x.dtype, device="meta")
        return list(meta.view(list(size)).stride())
    except RuntimeError:
        return None


def _chain(tape: Tape) -> None:
    """Each entry's `chain`: a digest of the entries up to it (what they
    check, how they make results, what they send and answer, their sites
    and loop contexts, which a catch-up records), so two tapes
    whose entries agree up to `q` are told from the digests at `q`; the
    tape's `signature` also covers its end."""
    h = 0
    for q, e in enumerate(tape.entries):
        e.ids = tuple(None if r[0] == "same" else (q, j) for j, r in enumerate(e.outs))
        e.needs_flat = bool(e.written or e.feeds or e.struct is not None or len(e.outs) != 1
                            or e.outs[0][0] in ("same", "view") or e.infer)
        e.real = any(r[0] == "real" for r in e.outs)
        h = hash((h, e.func, e.kind, e.mat_kind, repr(e.spec), repr(e.outs), repr(e.effects), repr(e.answer),
                  e.written, e.feeds, e.host_eval, repr(e.relaxed), e.site, repr(e.loops), e.engine_sites,
                  repr(e.forms), repr(e.mask_reads)))
        e.chain = h
    end = tape.end
    tape.signature = (h, tape.limit, None if end is None else repr(
        (end.effects, end.slots, end.dropped, end.commits, end.returns, end.result)))


class _Replayed:
    """An entry replayed in this iteration, for catching up on it."""

    __slots__ = ("entry", "func", "args", "kwargs", "out", "value", "result", "nodes")

    def __init__(self, entry: Entry, func: Any, args: tuple, kwargs: dict, out: Any, value: Any, result: Any):
        self.entry, self.func, self.args, self.kwargs = entry, func, args, kwargs
        self.out, self.value, self.result = out, value, result
        # The autograd nodes of a forward op's results, as the next
        # interaction found them (a later in-place op replaces grad_fn).
        self.nodes: Optional[list] = None

    # What the recorder takes from the entry when catching up (tracing.py).
    site = property(lambda self: self.entry.site)
    reached = property(lambda self: self.entry.reached)
    loops = property(lambda self: self.entry.loops)
    engine_sites = property(lambda self: self.entry.engine_sites)


_MISS = object()
_MAX_TAPES = 16  # per compiled graph
_MEMO_MAX = 16  # input layouts whose inferred recipes an entry keeps
# TERRA_TAPE=0 records every co-executed iteration (for comparisons).
_TAPES_ENABLED = os.environ.get("TERRA_TAPE", "1") != "0"
# TERRA_LOG=tape also says where each iteration leaves its tape.
_TAPE_LOG = "tape" in os.environ.get("TERRA_LOG", "").split(",")


# Host-side evaluation (CoExecutor._host_eval): tensors of at most this many
# elements, and ops it never runs (they have effects or random results).
_HOST_EVAL_MAX = 16
_NOT_HOST_EVALUATED = frozenset({"aten._local_scalar_dense", "aten.copy_", "aten.set_",
                                 "aten.resize_", "aten.empty", "aten.empty_strided",
                                 "aten.empty_like", "aten.new_empty", "aten.new_empty_strided",
                                 "aten.bernoulli", "aten.bernoulli_", "aten.dropout",
                                 "aten.native_dropout", "aten.multinomial", "aten.normal",
                                 "aten.poisson", "aten.rrelu_with_noise"})


def _same(x: torch.Tensor) -> torch.Tensor:
    return x


def _view_of(target: torch.Tensor, meta: torch.Tensor, token: Token, where: str,
             real_base: Optional[tuple] = None) -> Placeholder:
    """A placeholder viewing `target`'s memory; `meta` is the view of a
    meta copy of `target` (offsets relative to `target`)."""
    ph = Placeholder(meta, token, offset=target.storage_offset() + meta.storage_offset())
    if isinstance(target, Placeholder):
        addr, ph._terra_base = target._terra_addr, target._terra_base
    else:
        addr, ph._terra_base = target.data_ptr(), real_base
    if addr is not None:
        ph._terra_addr = addr + meta.storage_offset() * meta.element_size()
    ph._terra_where = where
    return ph


def _from_fetch(run: Any, fid: int, inst: int) -> torch.Tensor:
    arr = run.fetch(fid, inst)
    if arr is None:
        raise RuntimeError("the graph run that computed this value did not publish it")
    return torch.from_numpy(arr)


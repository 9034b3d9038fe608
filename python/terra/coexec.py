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
import threading
from typing import Any, Callable, Optional

import torch
from torch._prims_common import make_contiguous_strides_for
from torch.utils._pytree import tree_flatten, tree_map

from . import backward, dropout, indexing, native, relax, replay, tracing
from .placeholder import Placeholder, Token, ValueUnavailable, real, view_placeholder
from .loops import restrict, transitions
from .replay import _MISS, _RUN_HERE, TapeRecorder, WeakResults, _Replayed, logged_outputs
from .runio import resolve_later, tensor_spec, tensor_specs, to_torch
from .sites import Site, engine_frame, user_line
from .tape import End, Entry, Tape, flat_inputs, relax_spec
from .trace import ConstSource, FeedEvent, OpEvent, StateEvent, ValueRef, moves_loops
from .tracing import _OP_INFO, ALIAS_OPS, _flat_tensors_deep, _Recorder, _tensors_in, has_kernel, op_info


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



def _to_meta(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return torch.empty_strided(tuple(x.shape), tuple(x.stride()), dtype=x.dtype, device="meta")
    if isinstance(x, torch.device):
        # A device argument (autocast's `_to_copy(x, dtype=..., device=cpu)`):
        # a meta input cannot be copied to a real device.
        return _META_DEVICE
    return x


_META_DEVICE = torch.device("meta")


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


class StateUnreadable(Exception):
    """The program's state cannot be read at the start of a co-executed
    step (e.g. a parameter replaced by a sparse tensor): the step runs
    eagerly instead (TerraFunction._coexec)."""


class MetaUnavailable(Exception):
    pass


_META_CACHE: dict[Any, Any] = {}
_MISSING = object()  # ops returning nothing cache None


# Ops without a meta kernel -> the rule that infers their results instead.
# Filled as meta kernels fail, and first with the ops whose meta kernel is
# a Python decomposition that costs ~1 ms a shape (grid_sampler_2d's: Faster
# R-CNN meets a new RoI count, a new shape, most steps).
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
        if rule is None and _without_meta_kernel(func):
            # Straight to the rule: the dispatcher's NotImplementedError
            # costs 2-5 ms (its message and a C++ backtrace), ~10 ms of an
            # SGD program's first co-executed step for its three foreach ops.
            rule = _META_RULES.get(str(func)) or _like_input_rule(func) or _foreach_rule(func)
            if rule is not None:
                _RULE_ONLY[func] = rule
        if rule is not None:  # its meta kernel failed before: an exception costs ~0.5 ms
            hit = rule(*margs, **mkwargs)
        else:
            try:
                hit = func(*margs, **mkwargs)
            except Exception as exc:
                rule = _META_RULES.get(str(func)) or _like_input_rule(func) or _foreach_rule(func)
                if rule is None:
                    raise MetaUnavailable(f"{func} has no meta kernel ({type(exc).__name__})") from exc
                if isinstance(exc, NotImplementedError):
                    # No meta kernel for the op (the dispatcher names any of
                    # its overloads: smooth_l1_loss_backward fails as its
                    # `.grad_input` form) or a backend-only one
                    # (convolution_backward_overrideable): never for any
                    # argument. Trying again costs ~3.5 ms per new shape,
                    # the dispatcher's message listing every backend.
                    _RULE_ONLY[func] = rule
                hit = rule(*margs, **mkwargs)
        fix = _CPU_META_FIXES.get(str(func))
        if fix is not None:
            hit = fix(args, kwargs, hit)
        _META_CACHE[sig] = hit
    return hit


_NO_META_KERNEL: dict[Any, bool] = {}


def _without_meta_kernel(func: Any) -> bool:
    """Whether the dispatcher has no kernel that runs `func` on meta tensors
    (a Meta kernel, or a composite one whose ops may have theirs): torch
    1.13's foreach ops, `_weight_norm_interface`."""
    known = _NO_META_KERNEL.get(func)
    if known is None:
        known = not has_kernel(func, ("Meta", "CompositeImplicitAutograd", "CompositeExplicitAutograd",
                                      "CompositeExplicitAutogradNonFunctional"))
        _NO_META_KERNEL[func] = known
    return known


_EMBEDDING_BAG_ARGS = ("scale_grad_by_freq", "mode", "sparse", "per_sample_weights", "include_last_offset",
                       "padding_idx")


def _embedding_bag_on_cpu(args: tuple, kwargs: dict, hit: Any) -> Any:
    """torch's meta kernel of `_embedding_bag` gives the non-CPU shapes (its
    arguments are on the meta device): on the CPU, the sum of a float
    weight (the fast path) makes no `offset2bag` (size 0), which its
    backward then computes itself, and `max_indices` has one entry per bag
    (per bag and column for the max)."""
    weight, indices, offsets = args[:3]
    if not isinstance(offsets, torch.Tensor) or offsets.device.type != "cpu":
        return hit
    named = dict(zip(_EMBEDDING_BAG_ARGS, args[3:]))
    named.update(kwargs)
    mode, psw = named.get("mode", 0), named.get("per_sample_weights")
    padding_idx = named.get("padding_idx", -1)
    fast = (weight.dtype in (torch.float32, torch.float16) and weight.stride(1) == 1
            and (padding_idx is None or padding_idx < 0) and (psw is None or psw.stride(0) == 1))
    output, _, bag_size, _ = hit
    n = indices.shape[0] if mode in (1, 2) or not fast else 0
    most = tuple(output.shape) if mode == 2 else tuple(bag_size.shape)  # max: an index per bag and column
    return (output, torch.empty((n,), dtype=offsets.dtype, device="meta"), bag_size,
            torch.empty(most, dtype=offsets.dtype, device="meta"))


# Ops whose meta kernel gives other shapes than their CPU kernel: the
# inferred results are corrected from the real arguments.
_CPU_META_FIXES = {"aten._embedding_bag.default": _embedding_bag_on_cpu,
                   "aten._embedding_bag_forward_only.default": _embedding_bag_on_cpu}


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


def _grid_sampler_2d(input: torch.Tensor, grid: torch.Tensor, *rest: Any, **kw: Any) -> torch.Tensor:
    n, c = input.shape[:2]
    return torch.empty((n, c, grid.shape[1], grid.shape[2]), dtype=input.dtype, device="meta")


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


def _embedding_bag_dense_backward(grad: torch.Tensor, indices: torch.Tensor, offset2bag: Any, bag_size: Any,
                                  maximum_indices: Any, num_weights: int, *rest: Any, **kw: Any) -> torch.Tensor:
    """The weight's gradient: (num_weights, embedding dim), dense."""
    return torch.empty((num_weights, grad.shape[-1]), dtype=grad.dtype, device="meta")


def _embedding_bag_per_sample_weights_backward(grad: torch.Tensor, weight: torch.Tensor,
                                               indices: torch.Tensor, *rest: Any, **kw: Any) -> torch.Tensor:
    """One gradient per index (per sample weight)."""
    return torch.empty((indices.shape[0],), dtype=grad.dtype, device="meta")


def _unfold_backward(grad_in: torch.Tensor, input_sizes: Any, *rest: Any, **kw: Any) -> torch.Tensor:
    """The gradient of the tensor `unfold` windowed: its sizes, dense."""
    return torch.empty(tuple(input_sizes), dtype=grad_in.dtype, device="meta")


def _weight_norm_interface(v: torch.Tensor, g: torch.Tensor, dim: int = 0) -> tuple:
    """`nn.utils.weight_norm`'s op (no meta kernel in torch 1.13): the
    weight, dense like `v`, and the norms, laid out like `g` (fp32 for a
    bf16 `g`), as ATen's CPU kernel makes them."""
    dtype = torch.float32 if g.dtype == torch.bfloat16 else g.dtype
    return (torch.empty(tuple(v.shape), dtype=v.dtype, device="meta"),
            torch.empty_strided(tuple(g.shape), tuple(g.stride()), dtype=dtype, device="meta"))


def _weight_norm_interface_backward(grad_w: torch.Tensor, saved_v: torch.Tensor, saved_g: torch.Tensor,
                                    *rest: Any, **kw: Any) -> tuple:
    """The gradients of `v` and `g`, dense."""
    return (torch.empty(tuple(saved_v.shape), dtype=saved_v.dtype, device="meta"),
            torch.empty(tuple(saved_g.shape), dtype=saved_g.dtype, device="meta"))


def _shift(self: torch.Tensor, other: Any) -> torch.Tensor:
    """`x >> k`, `x << k` (torch 1.13 has no meta kernel for `__rshift__`
    and `__lshift__`): the operands broadcast, the dtype promotes."""
    if isinstance(other, torch.Tensor):
        shape = torch.broadcast_shapes(tuple(self.shape), tuple(other.shape))
        return torch.empty(shape, dtype=torch.result_type(self, other), device="meta")
    return torch.empty(tuple(self.shape), dtype=self.dtype, device="meta")


_META_RULES = {**{f"aten.__{op}shift__.{overload}": _shift
                  for op in ("r", "l", "ir", "il") for overload in ("Scalar", "Tensor")},
               "aten.convolution_backward.default": _convolution_backward,
               "aten._adaptive_avg_pool2d_backward.default": _adaptive_avg_pool2d_backward,
               "aten.grid_sampler_2d_backward.default": _grid_sampler_2d_backward,
               "aten.index.Tensor": _index_tensor,
               "aten.unfold_backward.default": _unfold_backward,
               "aten._weight_norm_interface.default": _weight_norm_interface,
               "aten._weight_norm_interface_backward.default": _weight_norm_interface_backward,
               "aten._embedding_bag_dense_backward.default": _embedding_bag_dense_backward,
               "aten._embedding_bag_per_sample_weights_backward.default":
                   _embedding_bag_per_sample_weights_backward}
_RULE_ONLY[torch.ops.aten.grid_sampler_2d.default] = _grid_sampler_2d


_OUT_OF_PLACE: dict[Any, Any] = {}


def _out_of_place(func: Any, args: tuple, targets: list) -> Any:
    """The out-of-place form of an in-place foreach op that writes only its
    first argument (`aten._foreach_add_.Scalar` -> `aten._foreach_add.Scalar`),
    or None."""
    op = _OUT_OF_PLACE.get(func, _MISSING)
    if op is _MISSING:
        op = None
        packet, overload = func.overloadpacket.__name__, func._overloadname
        if packet.startswith("_foreach_") and packet.endswith("_"):
            op = getattr(getattr(torch.ops.aten, packet[:-1], None), overload, None)
        _OUT_OF_PLACE[func] = op
    if op is None or not args or not isinstance(args[0], (list, tuple)) or len(args[0]) != len(targets) \
            or any(a is not t for a, t in zip(args[0], targets)):
        return None
    return op


_HOOK_OWNER: Optional["CoExecutor"] = None  # the co-executor the dispatch hook calls


def _overload(name: str, overload: str) -> Any:
    """The OpOverload of operator `name` ("aten::mul") and `overload`
    ("Tensor", "default"): the object torch passes `__torch_dispatch__`."""
    namespace, op = name.split("::", 1)
    return getattr(getattr(getattr(torch.ops, namespace), op), overload)


class CoExecutor(TapeRecorder, _Recorder):
    """Runs one iteration against a compiled graph (see the module doc)."""

    def __init__(self, compiled: Any, registry: Any, call_args: tuple, call_kwargs: dict,
                 stop: Any, serialized: bool = False):
        # The run starts first: on a graph-bound program its graph idles
        # from the last step's end until then, and the recorder's own
        # set-up (~0.2 ms on YOLOv3, cache misses after the graph's run)
        # needs none of it. A state that cannot be read makes the step run
        # eagerly, before anything is recorded.
        try:
            now: dict = registry.tensors()
        except Exception as exc:  # noqa: BLE001 - any failure to read it
            raise StateUnreadable(f"cannot identify the state: {exc!r}") from exc
        states = tensor_specs(compiled.state_values(now), compiled.state_specs_seen)
        compiled.state_specs_seen = states
        run = compiled.graph.new_run(states, compiled.host_executor)
        if not serialized:
            run.start()
        super().__init__(registry, call_args, call_kwargs, stop, initial=now)
        self.track_dynamic_dims = False  # the graph's types came from the traces
        self.compiled = compiled
        self.cursor = compiled.cursor
        self.cursor.reset()
        self.serialized = serialized
        # The previous step's CoExecutor, dropped in _wait_run (function._coexec).
        self.retired: Any = None
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
        # Data pointers of the real tensors in host_values (a superset: never
        # shrinks), so forgetting a written tensor's value costs one lookup
        # for the many writes that have none (an optimizer's updates);
        # None when a key has no pointer (an empty tensor): check them all.
        self.host_value_ptrs: Optional[set] = set()
        self._host_result: Optional[list] = None
        # Reads of values computed in this step: answered by the graph (a
        # fetch, the host may wait) or by a value the host computed.
        self.graph_reads = 0
        self.host_reads = 0
        self.run = run
        # State name -> the spec its tensor crossed with: a replayed
        # iteration changes no real tensor's metadata (its ops run in the
        # graph), so the commit reuses them (TapeRecorder._commit_direct).
        self.state_specs: dict[str, tuple] = dict(zip(compiled.state_names, states))
        # Tapes (tape.py). Identities of this iteration's tensors: id ->
        # ("state", name), ("arg", path) or (interaction, result index).
        # The state tensors' part is the last step's while they are the same
        # objects (YOLOv3's 570: 0.5 ms a step, made afresh).
        # (They are a function of the names and the objects' ids, in order.)
        idents_key = (list(now), list(map(id, now.values())))
        cached = getattr(registry, "_state_idents", None)
        if cached is not None and cached[0] == idents_key:
            self.idents: dict[int, tuple] = dict(cached[1])
        else:
            self.idents = {}
            for name, t in now.items():
                self.idents.setdefault(id(t), ("state", name))
            registry._state_idents = (idents_key, dict(self.idents))
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
        self.tape_choices: list = compiled.tapes.get(self.tape_key, []) if replay._TAPES_ENABLED else []
        tape = self.tape_choices[0] if self.tape_choices else None
        self.tape: Optional[Tape] = tape
        self.fast = tape is not None and (tape.limit > 0 or tape.end is not None)
        self.pos = 0  # the next entry of the tape
        self.replayed: list[_Replayed] = []  # one per entry replayed
        self.sent: list = []  # run effects the replay sent
        self.relaxed_feeds: dict[int, torch.Tensor] = {}  # entry -> its relaxed scalar's feed
        self.fed_values: dict[tuple, torch.Tensor] = {}  # (entry, input) -> value fed
        self._forced: Optional[_Replayed] = None
        # (result, gradient) of a copy's allocation replayed as the gradient
        # taken over, until the copy that follows it (_replay_taken_over).
        self._accumulate_clone: Optional[tuple] = None
        self._forward: Optional[_Replayed] = None  # nodes not noted yet (_note_nodes)
        self.replaying: Optional[list] = None  # catching up: the effects the Cursor decides
        self._missed = ""  # TERRA_LOG=tape: the interaction a replay could not match
        self.end_wait_s = 0.0  # waiting for the run's end (host stall, with the fetches')
        self.feed_hosts: dict[int, int] = {}  # feed event -> number of the host tensor it feeds
        self.layout: list = []  # data-dependent sizes met so far in a replay (_memo_key)
        self._relaxed_hosts = compiled.host_dynamic.get(self.tape_key, {}) if replay._TAPES_ENABLED else {}
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
        # Backward passes (backward.py): (first entry, end, call checks) of
        # the passes this iteration recorded, the hook epoch it began in,
        # and how many passes it replayed without the engine.
        self.b_blocks: list = []
        self.hook_epoch0 = backward.HOOK_EPOCH[0]
        self.backward_macros = 0
        self.backward_validations = 0
        self.b_pattern: list = []  # backward._pattern's node types so far
        self.deferred: list = []  # passes replayed whole whose records wait (backward.expand)
        # The loop hook starts only if the replay leaves its tape (replay.
        # _leave_fast); an iteration whose loop counts cannot be known then
        # deviates and its trace is not merged (`unmerged`).
        self.loop_counter.defer = (self.fast and _LAZY_LOOP_COUNTS
                                   and self.tape_key not in compiled.loop_hook_keys)
        self.unmerged = False

    def release(self) -> None:
        super().release()
        # The graph's error (raised to the program by now) holds frames that
        # hold this co-executor: a cycle through its traceback.
        self.graph_error = None

    # -- recording hooks -------------------------------------------------------
    def problem(self, text: str) -> None:
        super().problem(text)
        self._deviate(f"cannot co-execute: {text}", self.current_site)

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

    def _direct_mode(self) -> Any:
        """tracing._DirectMode in C with the native replay of plain entries
        (NativeReplay.cpp), when there is one."""
        if replay.NATIVE_REPLAY is None:
            return super()._direct_mode()
        mode = native.load().DirectMode(self, tracing._STACK_MODE.__torch_dispatch__,
                                        tracing._set_torch_dispatch_mode, tracing._len_torch_dispatch_stack)
        self._native_read = (mode.read, _MISS)  # reads the tape answers on the host (tracing.py)
        return mode

    def __enter__(self) -> "CoExecutor":
        super().__enter__()
        # The tape's ops replayed from a dispatch key below autograd, before
        # torch's Python fallback (DispatchHook.cpp), while this co-executor's
        # native handler is torch's (one hook at a time: a co-executor
        # inside another's step replays through Python).
        global _HOOK_OWNER
        hook = native.load_dispatch() if self._direct is not None and replay.NATIVE_REPLAY else None
        self._hook_was: Optional[bool] = None
        if hook is not None and _HOOK_OWNER is None:
            _HOOK_OWNER = self
            hook.arm(self._direct.fast, _MISS, _overload, _RUN_HERE, self._direct.ran)
            self._hook_was = hook.enable(True)
        return self

    def __exit__(self, *exc: Any) -> None:
        global _HOOK_OWNER
        if _HOOK_OWNER is self:
            hook = native.load_dispatch()
            hook.enable(bool(self._hook_was))
            hook.disarm()
            _HOOK_OWNER = None
        super().__exit__(*exc)

    def __torch_dispatch__(self, func: Any, types_: Any, args: tuple = (), kwargs: Optional[dict] = None) -> Any:
        if (func in tracing.DECOMPOSED or self.decomposing) and not self.paused:
            out = self._decomposed(func, types_, args, kwargs or {})
            if out is not NotImplemented:
                return out
        # The replay's common case first: the op the tape expects next.
        if self.fast and not self.b_depth and not self.paused:
            q = self.pos
            tape = self.tape
            if q < tape.limit and (e := tape.entries[q]).func is func and threading.get_ident() == self.thread:
                if e.plain and (native_replay := replay.NATIVE_REPLAY) is not None:
                    out = native_replay(self, e, func, args, kwargs or {}, q)
                    if out is not _MISS:
                        return out
                counter = self.loop_counter
                resume = counter.suspend()
                try:
                    kwargs = kwargs or {}
                    out = self._replay_op(func, args, kwargs)
                    if out is not _MISS:
                        return out
                    self._leave_fast()  # (what _dispatch would do after the same miss)
                    return self._dispatch(func, args, kwargs)
                finally:
                    if resume:
                        counter.resume()
        return super().__torch_dispatch__(func, types_, args, kwargs)

    def _dispatch(self, func: Any, args: tuple, kwargs: dict) -> Any:
        if self.b_depth:  # inside an interaction being recorded
            return self._dispatch_recorded(func, args, kwargs)
        info = _OP_INFO.get(func) or op_info(func)
        if info.foreign and not self.paused and threading.get_ident() == self.thread:
            return self._foreign(func, info, args, kwargs)  # (run on the host, on values it reads)
        if self.paused or not info.aten or (threading.get_ident() != self.thread
                                            and engine_frame(self.thread) is None):
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
            self._deviate(f"cannot infer the result of {name} without running it: {exc}", self.current_site)
            return func(*args, **kwargs)
        logged = WeakResults(out, self) if self.in_engine else out
        self.log.append((func, args, kwargs, logged, self.current_site))
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
                           or not o.is_cpu for o in outs):
            return None
        if any(isinstance(t, Placeholder) or t._base is not None for t in targets):
            return None  # a placeholder's or a view's value is not rebound here
        # An in-place foreach op (Adam's `_foreach_add_(steps, 1)`) runs as its
        # out-of-place form, which makes the new values without cloning the
        # old ones one by one.
        fresh = _out_of_place(func, args, targets) if targets and not info.ret_alias else None
        written = () if fresh is not None else {id(t) for t in targets}
        values: dict[int, torch.Tensor] = {}
        # (An aten op's tensors are arguments or in lists one level deep:
        # flat_inputs, not pytree, which cost ~1 us per element.)
        for x in flat_inputs(args, kwargs):
            if id(x) not in values:
                if x.numel() > _HOST_EVAL_MAX or not x.is_cpu:
                    return None
                v = self._host_value(x)
                if v is None:
                    return None
                values[id(x)] = v.clone() if id(x) in written else v

        def swap(a: Any) -> Any:
            if isinstance(a, torch.Tensor):
                return values[id(a)]
            if type(a) in (list, tuple):
                return type(a)(values[id(x)] if isinstance(x, torch.Tensor) else x for x in a)
            return a
        try:
            with self.pause(), torch.no_grad():
                result = (fresh or func)(*[swap(a) for a in args], **{k: swap(a) for k, a in kwargs.items()})
        except Exception:
            return None  # the graph and the replay report it
        if fresh is not None:
            if not isinstance(result, (list, tuple)) or len(result) != len(targets):
                return None
            return list(zip(targets, result))
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
                k = self.key(o)
                self.host_values[k] = r
                if k[0] == "empty":
                    self.host_value_ptrs = None
                elif self.host_value_ptrs is not None:
                    self.host_value_ptrs.add(k[1])

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

        reads = name not in tracing.HOST_RNG_OPS  # values it reads, the host has them now
        written = tracing.written_args(func, args, kwargs) if reads else ()

        def scratch(x: Any) -> Any:
            if not isinstance(x, Placeholder):
                return x
            if reads and not any(x is w for w in written):
                if x._terra_real is None:
                    raise ValueUnavailable(f"{name} reads a value the host does not have")
                return x._terra_real
            # On the placeholder's device: a CUDA op draws from the CUDA
            # generator, as in eager.
            return dropout.scratch_like(x)
        with self.pause():
            if any(isinstance(x, (list, tuple, dict)) for x in (*args, *kwargs.values())):
                rargs, rkwargs = tree_map(scratch, args), tree_map(scratch, kwargs)
            else:  # flat (dropout's bernoulli_): no pytree walk, ~20 µs a call
                rargs = tuple(scratch(x) for x in args)
                rkwargs = {k: scratch(v) for k, v in kwargs.items()}
            out = rargs[0] if _draw_bernoulli(name, rargs, rkwargs) else func(*rargs, **rkwargs)
        target = args[0] if args else None
        if isinstance(target, Placeholder) and out is rargs[0]:
            target._terra_real = rargs[0]
            # A replay after a deviation must not draw again: it restores
            # the value drawn here.
            self.log.append((_same, (rargs[0],), {}, target, self.current_site))
            return target
        for k, x in enumerate(args):
            if k and isinstance(x, Placeholder) and any(x is w for w in written):
                # Written besides the result (rrelu's noise): the drawn value.
                x._terra_real = rargs[k]
                self.log.append((_same, (rargs[k],), {}, x, self.current_site))
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
        if name == "aten.index.Tensor" and (shape := self._index_shape(func, args)) is not None:
            # A new, contiguous tensor (as torch's meta kernel makes it).
            ph = Placeholder.make(shape, make_contiguous_strides_for(shape), 0, args[0].dtype)
            ph._terra_where = name
            return ph
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

    def _index_shape(self, func: Any, args: tuple) -> Optional[tuple]:
        """The shape of `x[indices]` without a meta kernel (None: ask
        it). A boolean mask's count comes from its values, which the host
        has read (tracing records that read as a fetch); a meta index
        raises a ~4 ms NotImplementedError for nonzero, so forms the rule
        leaves run on zeros."""
        x, indices = args[0], args[1]
        if not any(isinstance(m, torch.Tensor) and m.dtype in (torch.bool, torch.uint8) for m in indices):
            return indexing.index_shape(tuple(x.shape), indices)
        reals = []
        for m in indices:
            if isinstance(m, Placeholder):
                if m._terra_real is None:
                    raise MetaUnavailable("the boolean index was not fetched")
                m = m._terra_real
            reals.append(m)
        shape = indexing.index_shape(tuple(x.shape), reals)
        if shape is None:  # (another form: torch's own answer, or its error)
            with self.pause():
                shape = tuple(func(torch.zeros(tuple(x.shape), dtype=x.dtype), reals).shape)
        return shape

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
                if self.loop_counter.late and self.loop_counter.unsure():
                    self._deviate_unmerged("a generator that started before loops were counted was resumed "
                                           "(loops are counted from the step's start from now on)", getattr(ev, "site", None))
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
                    if value.device.type not in self.compiled.readable_devices:
                        raise Deviation(f"a fed tensor is on {value.device}; the graph runs on "
                                        f"{self.compiled.device}")
                    if not self.compiled.shape_fits(got[0], value.shape):
                        raise Deviation(f"a fed tensor has shape {list(value.shape)}; the graph was "
                                        f"compiled for {self.compiled.node_shape(got[0], 0)}")
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
            return to_torch(arr)

    def _fetch_array(self, fid: int, inst: int) -> Any:
        """A fetch point's value as the run hands it over (None: the run
        failed); a serialized run computes it now."""
        if self.serialized:
            self.run.start()
        if self.retired is not None:
            self._free_retired_until(lambda: self.run.ready(fid, inst))
        arr = self.run.fetch(fid, inst)
        if self.serialized:
            self.run.wait_idle()
        return arr

    def _free_retired_until(self, ready: Callable[[], bool]) -> None:
        """Frees the previous step's records (`retired`, ~0.4 ms of
        deallocation for DCGAN's 211 replayed entries, their placeholders
        and autograd nodes) while the host would wait for the graph
        anyway: a chunk of entries at a time, until `ready()` says the
        value waited for is there. What is left goes at the end of the
        step (replay._wait_run)."""
        entries = self.retired.replayed
        while not ready():
            if not entries:
                self.retired = None
                return
            del entries[-_FREE_CHUNK:]

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
            if top and isinstance(t, Placeholder) and forced.value is not None:
                t._terra_real = forced.value
            if not top and kind in ("shape", "value") and forced.entry.mask_reads and isinstance(t, Placeholder):
                # A boolean mask the replayed index read, or a value a random
                # op read: read again (the run keeps what it published), as
                # the recording did.
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
                if not top and kind in ("shape", "value") and self.b_current is not None:
                    # A boolean mask's read, or a random op's (tracing._dispatch).
                    self._b_masks.append((t, self._b_answer))
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
    def _foreign_write(self, func: Any, args: tuple, kwargs: dict, name: str) -> Any:
        """(tracing._Recorder._foreign_write; the traces never had it.) The
        iteration deviates: its placeholders get their values and the op
        runs on them eagerly."""
        self._deviate(f"{name} (an op of another library) writes its argument in place")
        return func(*args, **kwargs)

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
            self._leave_fast((reason, site))
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
                outs = logged_outputs(out)
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
                if f.kind in ("return", "commit", "arg"):
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
            # What the state slots hold before the commit writes values into
            # them: a gradient made in the step (zero_grad(set_to_none=True))
            # is this step's placeholder there, a real tensor after.
            held = [s.get() for s in self.final_slots]
            self._commit(trace, values, result, points)
            self._publish_escapes()
            self._leave_tape(result, held)
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
        # Step arguments written in place get their final values, as eager
        # leaves them (the graph wrote a value of its own, not their memory).
        with torch.no_grad():
            for k, f in enumerate(trace.fetches):
                if f.kind == "arg":
                    tracing._at_path(self._call, f.arg).copy_(values[k])
        # Returned placeholders get their fetched values.
        returned = {f.value: k for k, f in enumerate(trace.fetches) if f.kind == "return"}
        for i, t in enumerate(_flat_tensors_deep(result)):
            if not isinstance(t, Placeholder):
                continue
            ref = self.producers.get(self.key(t))
            if ref in returned:
                if t._terra_real is None:
                    t._terra_real = values[returned[ref]]
                # Recorded even when the host computed the value itself
                # (_host_eval of a tiny op): a replay of the tape may not,
                # and then its end must fetch it.
                if end is not None:
                    end.returns.append((i,) + points[returned[ref]])

    def _publish_escapes(self) -> None:
        """Placeholders still without a value may be read after the step:
        each reads its fetch from this (finished) run, if the graph
        publishes it."""
        run, cursor = self.run, self.cursor
        escapes = self.b_end.escapes if self.b_end is not None and self.b_limit is None else {}
        for func, args, kwargs, out, _ in self.log:
            for o in logged_outputs(out):
                if isinstance(o, Placeholder) and o._terra_real is None and o._terra_resolve is None:
                    ref = self.producers.get(self.key(o))
                    if ref is None or ref.event not in self.handles:
                        continue
                    node, result, inst = self._handle(ref)
                    fid = cursor.fetch_id(node, result)
                    if fid >= 0:
                        resolve_later(o, run, fid, inst)
                        escapes[self.idents.get(id(o))] = (fid, inst)


# Host-side evaluation (CoExecutor._host_eval): tensors of at most this many
# elements, and ops it never runs (they have effects or random results).
_HOST_EVAL_MAX = 16
_NOT_HOST_EVALUATED = frozenset({"aten._local_scalar_dense", "aten.copy_", "aten.set_",
                                 "aten.resize_", "aten.empty", "aten.empty_strided",
                                 "aten.empty_like", "aten.new_empty", "aten.new_empty_strided",
                                 "aten.bernoulli", "aten.bernoulli_", "aten.dropout",
                                 "aten.native_dropout", "aten.multinomial", "aten.normal",
                                 "aten.poisson", "aten.rrelu_with_noise"})
# Replays count loop iterations only once they leave their tape
# (loops.LoopCounter.start_late); TERRA_LAZY_LOOP_COUNTS=0 counts them always.
_LAZY_LOOP_COUNTS = os.environ.get("TERRA_LAZY_LOOP_COUNTS", "1") != "0"
# Replayed entries freed between two polls of a fetch (~1.7 us each).
_FREE_CHUNK = 16


def _draw_bernoulli(name: str, args: tuple, kwargs: dict) -> bool:
    """Draws `args[0].bernoulli_(p)` with the native kernel (HostRng.cpp:
    PyTorch's numbers from PyTorch's default generator, ~5x faster than
    its serial loop) when it applies: a contiguous float CPU tensor, p a
    number in [0, 1], the default generator. False: torch must draw it."""
    if name != "aten.bernoulli_.float" or len(args) > 2 or kwargs.keys() - {"p"}:
        return False
    out = args[0]
    p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
    if type(p) not in (float, int) or not 0.0 <= p <= 1.0 or out.device.type != "cpu" \
            or out.dtype not in _BERNOULLI_DTYPES or not out.is_contiguous():
        return False
    state = torch.get_rng_state()
    native.load().rng_bernoulli(state.data_ptr(), state.numel(), out.data_ptr(), out.numel(),
                                _BERNOULLI_DTYPES[out.dtype], float(p))
    torch.set_rng_state(state)
    return True


_BERNOULLI_DTYPES = {torch.float32: "float32", torch.float64: "float64"}


def _same(x: torch.Tensor) -> torch.Tensor:
    return x


def _view_of(target: torch.Tensor, meta: torch.Tensor, token: Token, where: str,
             real_base: Optional[tuple] = None) -> Placeholder:
    """A placeholder viewing `target`'s memory; `meta` is the view of a
    meta copy of `target` (offsets relative to `target`)."""
    return view_placeholder(target, meta.shape, meta.stride(), meta.storage_offset(), meta.dtype, token, where,
                            real_base)
"""The tracer: runs a step function eagerly and records one `terra.trace`
per call (spec 1.4; conventions in docs/tracing.md).

A TorchDispatchMode sees every aten op below autograd: the forward, the
ops the autograd engine runs for `loss.backward()`, and the optimizer's
updates. Each is recorded as `terra.op "aten.<op>[.<overload>]"` with its
tensor operands, its other arguments as `args`, its results' types and its
site. An operand's provenance decides what it becomes in the trace:

* produced by an op recorded earlier in this call -> that SSA value;
* a registered persistent tensor (parameter, gradient, optimizer state,
  buffer) -> `terra.state "<name>"`;
* anything else (input batches, tensors from Python scalars, tensors made
  before the step) -> `terra.feed`, remembered with where it came from.

Tensors are identified by their memory and view (data pointer, shape,
strides, dtype, device), not by Python object: autograd hands saved
tensors back as new objects, and `detach()` makes new objects for the same
memory. Storage of every traced tensor is kept alive until the call ends so
an address is never reused within one trace.
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading
import types
import weakref
from typing import Any, Callable, Iterator, Optional, Sequence, Union

import torch
from torch._C import _len_torch_dispatch_stack
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode, _pop_mode, _push_mode

try:  # torch 1.13: one Python handler runs the mode stack (see _DirectMode)
    from torch._C import _set_torch_dispatch_mode
    from torch.utils._python_dispatch import _TorchDispatchStackMode
except ImportError:  # torch 2.x keeps the modes on a C++ stack: no handler to replace
    _set_torch_dispatch_mode = None
    _TorchDispatchStackMode = None

from . import dropout, indexing, mlir_text, native, relax, sizes
from .loops import LoopCounter
from .sites import BackwardSites, Frame, Site, capture, engine_frame, is_engine_site
from .placeholder import INPLACE_VIEWS, Placeholder, restride
from .state import StateRegistry
from .trace import (ArgSource, ConstSource, FeedEvent, FetchEvent, Materialization, OpEvent,
                    StateEvent, StateSource, TensorType, Trace, ValueRef, module_text)

# TERRA_DIRECT_DISPATCH=0 uses torch's own mode stack handler (_DirectMode).
_DIRECT = _set_torch_dispatch_mode is not None and os.environ.get("TERRA_DIRECT_DISPATCH", "1") != "0"

# Ops that only make a new Python view of the same memory (or touch only
# autograd metadata): their output keeps its input's provenance.
ALIAS_OPS = frozenset({"aten.detach", "aten.alias", "aten.lift_fresh", "aten.lift", "aten.detach_"})
# Ops that read metadata only; they have no tensor result and no value.
METADATA_OPS = frozenset({"aten.is_same_size", "aten.sym_size", "aten.sym_stride", "aten.sym_numel",
                          "aten.sym_storage_offset", "aten.size", "aten.stride", "aten.numel",
                          "aten.dim", "aten.is_contiguous"})
# Ops the graph has no lowering for that torch decomposes (torch._decomp)
# into ops it has: recorded as their decomposition.
try:
    from torch._decomp import decomposition_table as _TORCH_DECOMPOSITIONS
except ImportError:  # pragma: no cover - every torch since 1.13 has it
    _TORCH_DECOMPOSITIONS = {}
TORCH_DECOMPOSED = {op: _TORCH_DECOMPOSITIONS[op] for op in (
    torch.ops.aten.native_group_norm.default, torch.ops.aten.native_group_norm_backward.default,
    torch.ops.aten.binary_cross_entropy.default, torch.ops.aten.binary_cross_entropy_backward.default)
    # (Only those written with aten ops: torch._refs ones call prims.)
    if op in _TORCH_DECOMPOSITIONS
    and getattr(_TORCH_DECOMPOSITIONS[op], "__module__", "") == "torch._decomp.decompositions"}
# Ops the recorder runs as other ops (_Recorder._decomposed).
DECOMPOSED = frozenset({dropout.NATIVE_DROPOUT, *INPLACE_VIEWS, *indexing.OPS, *TORCH_DECOMPOSED})
# Ops whose schema (torch 1.13) does not mark arguments they write in place.
UNMARKED_WRITES = {"aten.native_batch_norm": ("running_mean", "running_var"),
                   "aten._native_batch_norm_legit": ("running_mean", "running_var"),
                   "aten.cudnn_batch_norm": ("running_mean", "running_var"),
                   "aten.miopen_batch_norm": ("running_mean", "running_var"),
                   "aten.rrelu_with_noise": ("noise",)}


# Random-number ops whose result does not depend on their tensor inputs
# values (only shapes, or nothing). They run on the host in every phase,
# drawing from PyTorch's own generator exactly as eager does, and their
# results reach the graph as feeds: results match eager bit for bit. (Ops
# like `bernoulli(p_tensor)` read values and are not in this set.)
HOST_RNG_OPS = frozenset({
    "aten.rand", "aten.randn", "aten.rand_like", "aten.randn_like", "aten.randint",
    "aten.randint.low", "aten.randint_like", "aten.randint_like.low_dtype", "aten.randperm",
    "aten.bernoulli_.float", "aten.bernoulli.p", "aten.uniform_", "aten.normal_",
    "aten.exponential_", "aten.geometric_", "aten.log_normal_", "aten.cauchy_",
    "aten.rand.generator", "aten.randn.generator", "aten.rand.names", "aten.randn.names",
    "aten.rand.generator_with_names", "aten.randn.generator_with_names", "aten.randint.generator",
    "aten.randint.low_generator", "aten.randperm.generator", "aten.normal.float_float",
    "aten.random_", "aten.random_.to", "aten.random_.from",
    "terra.dropout_mask"})  # native_dropout's mask (dropout.py)
# Ops whose result's shape depends on their inputs' values, with no shape
# rule the host could run without them. Like the random ops below, the
# host reads their inputs (fetch points) and runs them itself; the graph is
# fed the result. As graph ops the host could not shape their results in
# co-execution: each step fell back. (A boolean mask index keeps its own
# path: the host reads the mask and the graph indexes.)
HOST_VALUE_OPS = frozenset({
    "aten.nonzero", "aten.masked_select", "aten._unique2", "aten.unique_dim",
    "aten.unique_consecutive", "aten.repeat_interleave.Tensor", "aten.bincount"})
# Random-number ops whose result depends on their inputs' values
# (probabilities, means, rates, the activation rrelu scales). They run on
# the host as well, after the host reads the values they take (fetch points
# in every phase): in the graph they could only be host callbacks on the
# graph's thread, drawing from the generator at another time than eager.
# rrelu_with_noise draws only when training. Any other op with a Generator
# argument is taken for one of these (OpInfo.random).
HOST_RNG_VALUE_OPS = frozenset({
    "aten.bernoulli", "aten.bernoulli_.Tensor", "aten.multinomial", "aten.normal.Tensor_float",
    "aten.normal.float_Tensor", "aten.normal.Tensor_Tensor", "aten.poisson", "aten.binomial",
    "aten._standard_gamma", "aten._sample_dirichlet", "aten.rrelu_with_noise"})


def storage_of(t: torch.Tensor) -> Any:
    """The storage behind `t` (`untyped_storage` from torch 2.0 on)."""
    return t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()


def _arg(func: Any, args: tuple, kwargs: dict, name: str, default: Any) -> Any:
    """The value of schema argument `name` in a call, or `default`."""
    for i, aname, kwarg_only, _, _ in op_info(func).args:
        if aname == name:
            if i < len(args) and not kwarg_only:
                return args[i]
            return kwargs.get(name, default)
    return default


# Sizes that stand for a data-dependent dim when probing an op's shape
# function (_Recorder._dynamic_dims): unusual sizes no real dim is likely to
# equal. The probe runs on this device.
_SENTINEL = 104723
_META = torch.device("meta")
# Ops whose result sizes come from their operands' values (symbolic sizes
# prefer these, sizes.py).
_SIZE_SOURCES = frozenset({"aten.index.Tensor", "aten.nonzero", "aten.masked_select"})
# Argument kinds that do not change what an op computes in the graph.
_IGNORED_ARG_NAMES = frozenset({"pin_memory", "non_blocking"})
_IGNORED_ARG_TYPES = (torch.device, torch.layout, torch.memory_format)

# Tensor methods that hand a value to Python (materializations) -> kind.
MATERIALIZERS = {"item": "item", "tolist": "tolist", "numpy": "numpy", "__array__": "numpy",
                 "__float__": "float", "__int__": "int", "__bool__": "bool", "__index__": "index",
                 "__repr__": "repr", "__format__": "format"}

Key = tuple


def op_name(func: Any) -> str:
    """`aten.addmm` for aten.addmm.default, `aten.add.Tensor` otherwise:
    the lowering registry's names (the "default" overload is dropped)."""
    name = str(func)
    return name[: -len(".default")] if name.endswith(".default") else name


class OpInfo:
    """What the recorder needs from an op's schema, read once per overload
    (reading `func._schema` builds new Python objects on every access).

    `args`: (position, name, kwarg_only, is a tensor type, written in place)
    per schema argument; `arg_alias`: (position, name, kwarg_only, alias
    sets) per argument with alias information; `ret_alias`: per return,
    (alias sets, is_write) or None."""

    __slots__ = ("name", "aten", "foreign", "through", "args", "arg_alias", "ret_alias", "random")

    def __init__(self, func: Any):
        schema = func._schema
        self.name = op_name(func)
        # terra's own ops (dropout.py) are recorded like aten's.
        namespace = schema.name.split("::", 1)[0]
        self.aten = namespace in ("aten", "terra")
        # An op of another library (a custom op, torchvision's) that the step
        # runs on values: the graph does not have it (_Recorder._foreign).
        # The profiler's ops only mark ranges (record_function's handle).
        self.foreign = namespace not in ("aten", "terra", "profiler")
        # An op of another library with no autograd kernel: autograd falls
        # through it, so eagerly its kernel runs with autograd live, which
        # records the ops the kernel calls (torch 1.13; torch 2.x's default
        # autograd fallback runs it below autograd instead).
        self.through = self.foreign and _autograd_falls_through(func)
        self.args = tuple((i, a.name, a.kwarg_only, _is_tensor_type(str(a.type)),
                           a.alias_info is not None and a.alias_info.is_write)
                          for i, a in enumerate(schema.arguments))
        self.arg_alias = tuple((i, a.name, a.kwarg_only, frozenset(a.alias_info.before_set))
                               for i, a in enumerate(schema.arguments) if a.alias_info is not None)
        self.ret_alias = tuple((frozenset(r.alias_info.before_set), r.alias_info.is_write)
                               if r.alias_info is not None else None for r in schema.returns)
        # Draws random numbers: takes a generator (torch's schemas give every
        # random op one), or is one of the random ops listed above.
        self.random = (self.name in HOST_RNG_OPS or self.name in HOST_RNG_VALUE_OPS
                       or any("Generator" in str(a.type) for a in schema.arguments))


def has_kernel(func: Any, keys: Sequence[str]) -> bool:
    """Whether the dispatcher has a kernel of OpOverload `func` (this
    overload) for any of the dispatch `keys`; a name it does not know has
    none."""
    schema = func._schema
    name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    try:
        return any(has(name, key) for key in keys)
    except RuntimeError:
        return False


def _autograd_falls_through(func: Any) -> bool:
    """Whether autograd falls through OpOverload `func` (no autograd kernel
    of its own and torch's autograd fallback is a fallthrough)."""
    mode = getattr(torch._C, "_get_autograd_fallback_mode", None)
    if mode is not None and mode() != "nothing":
        return False
    return not has_kernel(func, ("Autograd", "AutogradCPU", "AutogradCUDA", "CompositeImplicitAutograd"))


_OP_INFO: dict[Any, OpInfo] = {}


def op_info(func: Any) -> OpInfo:
    info = _OP_INFO.get(func)
    if info is None:
        info = _OP_INFO[func] = OpInfo(func)
    return info


def _is_tensor_type(type_text: str) -> bool:
    return "Tensor" in type_text


class TraceProblem(Exception):
    """Why an op cannot be recorded faithfully (kept in Trace.problems)."""


class _DirectMode:
    """The handler torch calls for every op while a recorder is the only
    dispatch mode: torch's own stack handler (`_TorchDispatchStackMode`)
    pops and pushes the mode around every op through a context manager,
    ~1 us per op in torch 1.13; this one only switches the handler off
    while the recorder runs. The recorder stays on torch's mode stack, so
    a mode the program pushes on top of it is seen here (the stack is
    longer) and handled the standard way from then on."""

    __slots__ = ("rec",)

    def __init__(self, rec: "_Recorder"):
        self.rec = rec

    def __torch_dispatch__(self, func: Any, types_: Any, args: tuple = (), kwargs: Optional[dict] = None) -> Any:
        if _len_torch_dispatch_stack() != 1:
            return _STACK_MODE.__torch_dispatch__(func, types_, args, kwargs)
        _set_torch_dispatch_mode(None)
        rec = self.rec
        rec.inside += 1
        try:
            return rec.__torch_dispatch__(func, types_, args, kwargs)
        finally:
            rec.inside -= 1
            _set_torch_dispatch_mode(self)


_STACK_MODE = _TorchDispatchStackMode() if _TorchDispatchStackMode is not None else None


class _Recorder(TorchDispatchMode):
    """Records one call of the step function."""

    # (read, miss): the native replay of reads (coexec.CoExecutor), or None.
    _native_read: Optional[tuple] = None

    def __init__(self, registry: StateRegistry, call_args: tuple, call_kwargs: dict,
                 stop: types.FrameType, initial: Optional[dict[str, torch.Tensor]] = None):
        """`initial`: the registry's tensors, when the caller read them."""
        super().__init__()
        self.trace = Trace()
        self.fetch_count = 0  # FetchEvents in trace.events
        self.registry = registry
        self.stop = stop
        self.paused = 0
        self.thread = threading.get_ident()
        self.inside = 0  # depth of _DirectMode calls
        self.decomposing = 0  # depth of torch decompositions run (_decomposed)
        self._direct: Optional[_DirectMode] = None
        self.producers: dict[Key, ValueRef] = {}
        # Memory (base) -> key of each view of it bound -> its region.
        self.views: dict[tuple, dict[Key, tuple]] = {}
        self.stale: set[Key] = set()
        self.keepalive: list[Any] = []
        # Scalar arguments recorded as feeds (see relax.py), set by the caller.
        self.relaxed: set = set()
        # Relax optimizers' float arguments before they change (relax.py).
        self.speculate = False
        # Memory of tensors the host made in the step (random numbers): fed
        # to the graph, but written in place like any value of the step.
        self.host_made: set[tuple] = set()
        self.in_engine = False
        # Size-list entries learnt to change (sizes.py), from the function.
        self.dynamic_sizes: dict = {}
        # size, or (size, dim) -> (value, dim), see _dim_lookup
        self._dims: dict[Any, tuple[ValueRef, int]] = {}
        self._source_dims: dict[Any, tuple[ValueRef, int]] = {}
        # Whether fed tensors' leading dims are dynamic (the function's
        # `dynamic_batch`); both kinds of dynamic dims are traced, not
        # co-executed (the graph's types come from the traces; a co-executed
        # trace is merged only after a deviation, relaxing to them).
        self.dynamic_batch = False
        # Site -> dims of the tensor fed there known to change (the function's).
        self.dynamic_feeds: dict = {}
        self.track_dynamic_dims = True
        # Values with data-dependent sizes (a boolean mask's count) -> their
        # dynamic dims, recorded as dynamic (see _record).
        self._taint: dict[ValueRef, frozenset] = {}
        self._source: Optional[tuple[int, int]] = None  # (count, dim) of a mask index
        self._real_shapes: dict[ValueRef, tuple] = {}  # of tainted values
        self._last_call: Any = None
        self._dims_upto = 0
        self.state_reads: dict[str, ValueRef] = {}
        self.initial_tensors: dict[str, torch.Tensor] = {}
        # The state slots at the end of the step (`finish`), for the commit.
        self.final_slots: list[Any] = []
        # Memory of fed tensors written in place (base -> shape, the tensor
        # to adopt as state or None, the argument's path or None).
        self.written_feeds: dict[tuple, tuple] = {}
        # Memory of each fed tensor -> its first feed (writes through views).
        self.fed_bases: dict[tuple, ValueRef] = {}
        # Key of a view the step made (an op of _SCATTER_OF or _INVERSE_VIEW)
        # -> (the tensor it views, the view op, its arguments): writes
        # through it are written back into that tensor (`_functionalize`),
        # and a view such a write made stale is derived again (`_rederive`).
        self.view_parent: dict[Key, tuple] = {}
        self._call = (call_args, call_kwargs)
        self._indexed: Optional[tuple] = None  # see _index
        # Weak references to the real tensors a traced step computed: those
        # still alive when it ends escaped it (stored in a global, a
        # module, a list) and become fetches (kind "escape", see finish),
        # so co-executed steps have their values too. Tracing only: a
        # co-executor's values come from the graph.
        self._escape_candidates: Optional[list] = [] if type(self) is _Recorder else None
        self._state_ptrs: Optional[dict] = None  # see state_name_of
        try:
            self.initial_tensors = registry.tensors() if initial is None else initial
        except Exception as exc:  # e.g. a sparse parameter: still run the step
            self.problem(f"cannot identify the state or arguments: {exc!r}")
        self.backward = BackwardSites(self._leaf_name)
        self.backward.bind(self._set_site)
        # Program loops: iteration counts while the step runs, and the loop
        # context of the event being recorded (loops.py).
        self.loop_counter = LoopCounter()
        self.loop_context: tuple = ()
        self.current_site: Optional[Site] = None  # of the op being recorded
        # The op being replayed by a co-executor catching up on its tape
        # (coexec.py): its site, loop context and results are known.
        self._forced: Any = None
        # What the op being dispatched turned out to be, for the tape:
        # "op", "rng", "mat", "pass" or "stop" (cannot be replayed).
        self._kind: Optional[str] = None
        self._site_info: Any = None
        self._written_now: list = []  # tensors the op being dispatched writes
        self._record_from: Optional[int] = None

    # Persistent state at the start of the call and the call's tensor
    # arguments, by memory: indexed when first needed (a replayed iteration,
    # coexec.py, usually never needs them).
    @property
    def initial(self) -> dict[str, Key]:
        return (self._indexed or self._index())[0]

    @property
    def state_by_key(self) -> dict[Key, str]:
        return (self._indexed or self._index())[1]

    @property
    def state_bases(self) -> dict[tuple, str]:
        return (self._indexed or self._index())[2]

    @property
    def arg_paths(self) -> dict[Key, tuple]:
        """Tensor arguments of the call, by where they sit in (args, kwargs)."""
        return (self._indexed or self._index())[3]

    def _index(self) -> tuple:
        initial: dict[str, Key] = {}
        by_key: dict[Key, str] = {}
        bases: dict[tuple, str] = {}
        arg_paths: dict[Key, tuple] = {}
        self._indexed = (initial, by_key, bases, arg_paths)
        try:
            for name, t in self.initial_tensors.items():
                k = self.key(t)
                initial[name] = k
                by_key.setdefault(k, name)
                bases.setdefault(self.base(t), name)
            for path, t in _tensors_in(self._call, ()):
                arg_paths.setdefault(self.key(t), (("args", "kwargs")[path[0]],) + path[1:])
        except Exception as exc:  # e.g. a sparse parameter: still run the step
            self.problem(f"cannot identify the state or arguments: {exc!r}")
        return self._indexed

    def state_name_of(self, t: torch.Tensor) -> Optional[str]:
        """The state slot whose tensor at the start of the call has `t`'s
        memory and metadata, without indexing every state tensor's key."""
        if self._indexed is not None:
            return self._indexed[1].get(self.key(t))
        ptrs = self._state_ptrs
        if ptrs is None:
            # Natively where the dispatch hook is built: YOLOv3's 570 state
            # tensors cost ~0.6 ms through their Python methods, at its
            # first host tensor, between the fetch of its predictions and
            # the feed of its targets (the graph waits for it).
            index = native.optional_function("pointer_index", dispatch=True)
            initial = self.initial_tensors
            ptrs = index(list(initial), list(initial.values())) if index is not None else None
            if ptrs is None:
                ptrs = {}
                for name, s in initial.items():
                    if s.numel():
                        ptrs.setdefault(s.data_ptr(), []).append(name)
            self._state_ptrs = ptrs
        if not t.numel():
            return None
        k = self.key(t)
        for name in ptrs.get(t.data_ptr(), ()):
            if self.key(self.initial_tensors[name]) == k:
                return name
        return None

    # -- identity ----------------------------------------------------------
    @staticmethod
    def key(t: torch.Tensor) -> Key:
        if isinstance(t, Placeholder):
            # A placeholder's metadata never changes: its key is computed once.
            k = t._terra_key
            if k is None:
                if t.numel() == 0:
                    k = ("empty", id(t))
                elif t._terra_addr is not None:
                    k = (t.device, t._terra_addr, tuple(t.shape), tuple(t.stride()), t.dtype)
                else:
                    k = (t.device, id(t._terra_token), t.storage_offset(), tuple(t.shape),
                         tuple(t.stride()), t.dtype)
                t._terra_key = k
            return k
        if t.numel() == 0:
            return ("empty", id(t))
        return (t.device, t.data_ptr(), tuple(t.shape), tuple(t.stride()), t.dtype)

    @staticmethod
    def base(t: torch.Tensor) -> tuple:
        if isinstance(t, Placeholder):
            return t._terra_base if t._terra_base is not None else (t.device, id(t._terra_token))
        return (t.device, t.data_ptr() - t.storage_offset() * t.element_size())

    def _keep(self, t: torch.Tensor) -> None:
        if isinstance(t, Placeholder):
            self.keepalive.append(t._terra_token)
            return
        self.keepalive.append(storage_of(t))

    def release(self) -> None:
        """Breaks the recorder's reference cycles (the caller's frame, whose
        locals hold the recorder; bound methods held by the backward-site
        tracker) once the step is over, so reference counting frees the
        step's records at once instead of a garbage collection walking
        them all."""
        self.stop = None
        self.backward.bind(lambda record, site: None)
        self.backward.release()

    def _leaf_name(self, t: torch.Tensor) -> Optional[str]:
        return self.state_by_key.get(self.key(t))

    def _set_site(self, record: OpEvent, site: Site) -> None:
        record.site = site

    # -- the dispatch mode ------------------------------------------------------
    def __enter__(self) -> "_Recorder":
        _push_mode(self)
        if _DIRECT and _len_torch_dispatch_stack() == 1:
            self._direct = self._direct_mode()
            _set_torch_dispatch_mode(self._direct)
        return self

    def __exit__(self, *exc: Any) -> None:
        # (A native handler refers back to the recorder: a cycle the
        # collector cannot see through, broken here.)
        self._direct = self._native_read = None
        _pop_mode()

    def _direct_mode(self) -> Any:
        """The handler torch calls while this recorder is the only mode."""
        return _DirectMode(self)

    def mode_on(self) -> bool:
        """Whether this thread's ops come to this recorder now (it is
        active and its handler is not running)."""
        return _get_current_dispatch_mode() is self and self.inside == 0

    def mode_off(self) -> None:
        """Takes this recorder off (after `mode_on()`), for `mode_back`."""
        _pop_mode()

    def mode_back(self) -> None:
        _push_mode(self)
        if self._direct is not None and _len_torch_dispatch_stack() == 1:
            _set_torch_dispatch_mode(self._direct)

    @contextlib.contextmanager
    def pause(self) -> Iterator[None]:
        """Runs torch code of the tracer itself without recording it."""
        self.paused += 1
        try:
            yield
        finally:
            self.paused -= 1

    def problem(self, text: str) -> None:
        if text not in self.trace.problems:
            self.trace.problems.append(text)

    # -- provenance ----------------------------------------------------------
    def _append(self, event: Any) -> int:
        if not isinstance(event, StateEvent):
            event.loops = self.loop_context
        if isinstance(event, FetchEvent):
            self.fetch_count += 1
        self.trace.events.append(event)
        return len(self.trace.events) - 1

    def value_of(self, t: torch.Tensor, site: Site) -> ValueRef:
        """The SSA value of an operand; makes a state read or a feed for a
        tensor the trace has not seen."""
        k = self.key(t)
        if k in self.stale and self._rederive(t, site) is None:
            self.problem(f"reads a tensor after an in-place write through another view of its memory "
                         f"(shape {list(t.shape)}); views are not modelled")
        ref = self.producers.get(k)
        if ref is not None:
            return ref
        ttype = TensorType.of(t)
        mlir_text.element_type(t.dtype)
        name = self.state_by_key.get(k)
        if name is not None:
            ref = ValueRef(self._append(StateEvent(name, ttype, site)))
            self.state_reads[name] = ref
        else:
            owner = self.state_bases.get(self.base(t))
            if owner is not None:
                ref = self._view_of_state(t, owner, site)
                if ref is not None:
                    self._bind(t, ref)
                    return ref
                self.problem(f"reads a view of persistent state {owner} made outside the step "
                             f"(shape {list(t.shape)}, strides {list(t.stride())}) that is no block of it")
            path = self.arg_paths.get(k)
            if path is not None:
                source: Union[ArgSource, ConstSource] = ArgSource(path)
            else:
                with self.pause():
                    source = ConstSource(t.detach().clone())
            if self.dynamic_batch and len(ttype.shape) > 0 and ttype.shape[0] > 1:
                # The leading dim of a fed tensor (a batch) is dynamic from
                # the first trace, so a new batch size is no deviation; the
                # dims that follow it are found like data-dependent ones.
                ttype = TensorType(ttype.dtype, (-1,) + ttype.shape[1:])
            learnt = self.dynamic_feeds.get(site)
            if learnt:  # dims seen to change before tracing started again
                ttype = TensorType(ttype.dtype, tuple(-1 if i in learnt and d > 1 else d
                                                      for i, d in enumerate(ttype.shape)))
            ref = ValueRef(self._append(FeedEvent(ttype, site, source)))
            if t.numel():  # (empty tensors share one address)
                self.fed_bases.setdefault(self.base(t), ref)
            dynamic = frozenset(i for i, d in enumerate(ttype.shape) if d == -1)
            if dynamic:
                self._taint[ref] = dynamic
                self._real_shapes[ref] = tuple(t.shape)
        self._bind(t, ref)
        return ref

    def _view_of_state(self, t: torch.Tensor, owner: str, site: Site) -> Optional[ValueRef]:
        """A view of persistent state the program made before the step (`row =
        ema[0]` at set-up, written in the step): the state's value viewed by
        `as_strided` with the view's geometry, and noted as a view of it, so
        writes through it are written back into the state (`_functionalize`)
        and committed. None if the state is not a dense tensor of that
        memory or the view is no block of it (overlapping strides)."""
        state = self.initial_tensors.get(owner)
        if (state is None or self.base(state) != self.base(t) or state.dtype != t.dtype
                or not state.is_contiguous() or isinstance(state, Placeholder)):
            return None
        offset = t.storage_offset() - state.storage_offset()
        stride = list(t.stride())
        if offset < 0 or t.numel() == 0 or any(d > 1 and st <= 0 for d, st in zip(t.shape, stride)):
            return None
        last = offset + sum((d - 1) * st for d, st in zip(t.shape, stride))
        if last >= state.numel():
            return None
        args = {"size": list(t.shape), "stride": stride, "storage_offset": offset}
        parent = self.value_of(state, site)
        event = OpEvent("aten.as_strided", [parent], dict(args), [TensorType.of(t)], site,
                        _synthetic_call("aten.as_strided", args, 1))
        ref = ValueRef(self._append(event))
        self.view_parent[self.key(t)] = (state, "aten.as_strided", dict(args))
        return ref

    def _note_feed(self, index: int, value: torch.Tensor, arg: str = "") -> None:
        """A feed event made for a relaxed scalar, with its value."""

    def _bind(self, t: torch.Tensor, ref: ValueRef) -> None:
        k = self.key(t)
        self.producers[k] = ref
        if self._escape_candidates is not None and not isinstance(t, Placeholder):
            self._escape_candidates.append(weakref.ref(t))
        self.stale.discard(k)
        self.views.setdefault(self.base(t), {})[k] = _region(t)
        self._keep(t)

    def _written(self, t: torch.Tensor) -> None:
        """`t` was written in place: other views of its memory that overlap
        it are stale (a chunk written, its sibling chunks are not)."""
        k = self.key(t)
        region = _region(t)
        for other, where in self.views.get(self.base(t), {}).items():
            if other != k and regions_overlap(region, where):
                self.producers.pop(other, None)
                self.stale.add(other)

    def _check_writable(self, ref: ValueRef, t: torch.Tensor) -> None:
        """An in-place write into a fed tensor would change the host's tensor
        in eager mode but not in the graph: nothing commits feeds. It is
        fine when the tensor ends up as persistent state (e.g. optimizer
        state created during the step), which is committed; `finish` checks."""
        ev = self.trace.events[ref.event]
        if not isinstance(ev, FeedEvent):
            # A view of a fed tensor (`x[:, 0].zero_()`) writes its memory too.
            fed = self.fed_bases.get(self.base(t))
            ev = self.trace.events[fed.event] if fed is not None else ev
        if isinstance(ev, FeedEvent) and self.base(t) not in self.host_made:
            # A tensor the program holds outside the step (not an argument)
            # can become persistent state; a step argument gets its final
            # value after the step (`finish`).
            held = t if t._base is None else t._base
            adoptable = (isinstance(ev.source, ConstSource) and type(held) in (torch.Tensor, torch.nn.Parameter)
                         and not held.requires_grad)
            path = ev.source.path if isinstance(ev.source, ArgSource) else None
            self.written_feeds.setdefault(self.base(t), (list(t.shape), held if adoptable else None, path))

    # -- ops -----------------------------------------------------------------
    def __torch_dispatch__(self, func: Any, types_: Any, args: tuple = (), kwargs: Optional[dict] = None) -> Any:
        if (func in DECOMPOSED or self.decomposing) and not self.paused:
            out = self._decomposed(func, types_, args, kwargs or {})
            if out is not NotImplemented:
                return out
        # The tracer's own code runs outside tracing mode (loops.py); the
        # hook belongs to the step's thread (ops of other threads, e.g. an
        # autograd device thread, must not touch it).
        counter = self.loop_counter
        resume = threading.get_ident() == self.thread and counter.suspend()
        try:
            return self._dispatch(func, args, kwargs or {})
        finally:
            if resume:
                counter.resume()

    def _dispatch(self, func: Any, args: tuple, kwargs: dict) -> Any:
        info = _OP_INFO.get(func) or op_info(func)
        if self.paused or not info.aten:
            if info.foreign and not self.paused and threading.get_ident() == self.thread:
                return self._foreign(func, info, args, kwargs)
            return func(*args, **kwargs)
        if threading.get_ident() == self.thread:
            start = sys._getframe(1)
        else:  # the autograd engine's device thread running the step's backward?
            start = engine_frame(self.thread)
            if start is None:
                return func(*args, **kwargs)  # not the program's op
        name = info.name
        forced = self._forced
        try:
            self.backward.resolve()
            if forced is None:
                raw: list = []
                site, reached = capture(start, self.stop, raw)
                self.loop_context = self.loop_counter.context(raw)
            else:  # a co-executor catching up on its tape (replay.py)
                site, reached, self.loop_context = forced.site, forced.reached, forced.loops
        except Exception as exc:  # never break the user's program
            self.problem(f"tracer error before {name}: {exc!r}")
            self._kind = "stop"
            return func(*args, **kwargs)
        self._site_info = (site, reached, self.loop_context)
        if site.frames and site.frames[0].file.replace("\\", "/").endswith("torch/autograd/profiler.py"):
            self._kind = "pass"
            return func(*args, **kwargs)  # record_function bookkeeping
        self.current_site = site
        engine = is_engine_site(site, reached)
        if engine and not self.in_engine:
            self.backward.backward_started()
        elif not engine:
            self.backward.flush()
        self.in_engine = engine
        if name in ALIAS_OPS:
            self._kind = "op"
            out = self._execute(func, name, args, kwargs)
            if isinstance(out, torch.Tensor) and args and isinstance(args[0], torch.Tensor):
                ref = self.producers.get(self.key(args[0]))
                if ref is not None and self.key(out) != self.key(args[0]):
                    self._bind(out, ref)
                elif self._escape_candidates is not None and not isinstance(out, Placeholder):
                    # Same memory, same key: `loss.detach()` kept is `loss` kept.
                    self._escape_candidates.append(weakref.ref(out))
            return out
        # Run on the host on values it reads first (rrelu draws only when training).
        value_rng = name in HOST_VALUE_OPS or (
            info.random and name not in HOST_RNG_OPS
            and (name != "aten.rrelu_with_noise" or _arg(func, args, kwargs, "training", False)))
        if name in HOST_RNG_OPS or value_rng:
            self._kind = "rng"
            written = written_args(func, args, kwargs)
            if value_rng:
                args, kwargs = self._read_operands(func, args, kwargs, written, site)
            # Written in place by the host: later reads are fresh feeds.
            self._written_now = written
            for target in written:
                self.producers.pop(self.key(target), None)
                self._written(target)
            out = self._run_host_rng(func, name, args, kwargs)
            for t in _flat_tensors(out):
                self.host_made.add(self.base(t))  # step-local: writable in place
            return out
        if name == "aten.index.Tensor" and len(args) > 1:
            # A boolean mask's count of true elements is the result's size:
            # the host reads the mask (a fetch point in every phase), so the
            # co-executor can shape the result.
            masks = [m for m in args[1] if isinstance(m, torch.Tensor) and m.dtype in (torch.bool, torch.uint8)]
            if masks:
                self._kind = "masked"  # a data-dependent result shape (replay.py: its shape is inferred)
            for m in masks:
                self.materialize(m, "shape", lambda v: None, site)
            self._source = None
            if (self.track_dynamic_dims and len(masks) == 1
                    and all(m is None or m is masks[0] for m in args[1])):
                # x[..., mask]: the count is the result's dim at the mask's
                # position (after the dims skipped with None).
                count = self._true_count(masks[0])
                if count is not None:
                    self._source = (count, next(k for k, m in enumerate(args[1]) if m is masks[0]))
        if name == "aten._local_scalar_dense":
            self._kind = "mat"
            return self.materialize(args[0], "item", lambda v: func(v, *args[1:], **kwargs), site)
        try:
            operands, op_args, written = self._operands(func, name, args, kwargs, site)
            self._written_now = written
        except Exception as exc:
            self.problem(f"cannot record {name}: {exc}")
            self._kind = "stop"
            return self._execute(func, name, args, kwargs)
        if self._kind is None:
            self._kind = "op"
        out = self._execute(func, name, args, kwargs)
        self._last_call = (func, args, kwargs)
        try:
            self._record(name, operands, op_args, written, out, site, engine, func)
        except Exception as exc:
            self.problem(f"cannot record {name}: {exc}")
        return out

    def _execute(self, func: Any, name: str, args: tuple, kwargs: dict) -> Any:
        """Runs one op for the program (eagerly while tracing)."""
        return func(*args, **kwargs)

    def _run_host_rng(self, func: Any, name: str, args: tuple, kwargs: dict) -> Any:
        """Runs a random-number op (HOST_RNG_OPS) on the host."""
        return func(*args, **kwargs)

    def _handler_switch(self) -> Optional[tuple[Callable[[], None], Callable[[], None]]]:
        """This recorder is off while its handler runs: how to turn it on
        again for ops the handler calls on the program's behalf (a
        decomposition's, a kernel's), where it is the only mode, and off
        after; None elsewhere."""
        if _DIRECT and self._direct is not None and self.inside and _len_torch_dispatch_stack() == 1:
            return (lambda: _set_torch_dispatch_mode(self._direct)), (lambda: _set_torch_dispatch_mode(None))
        if not _DIRECT and _len_torch_dispatch_stack() == 0:  # torch's mode stack (2.x)
            return (lambda: _push_mode(self)), _pop_mode
        return None

    def _decomposed(self, func: Any, types_: Any, args: tuple, kwargs: dict) -> Any:
        """An op of DECOMPOSED run as other ops, each dispatched as an op of
        its own (recorded, validated and replayed like any), or
        NotImplemented when this call is recorded as it is:
          * training-mode native_dropout: a host-drawn mask and the graph's
            scaling (dropout.py);
          * an in-place view op (INPLACE_VIEWS): its view op, then the
            argument takes the view's metadata; its new identity is the
            view's (same memory, sizes and strides), so later ops read the
            view's value;
          * indexing with slices (`x[:, idx]`, indexing.py);
          * an op of TORCH_DECOMPOSED: torch's decomposition runs with this
            recorder handling its ops (its frames are not part of their
            sites: sites.py), where the recorder is the only mode (else
            it stays one op, a host call)."""
        decomposition = TORCH_DECOMPOSED.get(func)
        if decomposition is None and self.decomposing and _composite(func):
            # An op a decomposition calls that torch composes of others
            # (`to`, `var`): reached here below autograd, where torch does
            # not decompose it; its composition, as the program's would be.
            decomposition = func.decompose
        if decomposition is not None:
            switch = self._handler_switch()
            if switch is None:
                return NotImplemented
            on, off = switch
            self.decomposing += 1
            on()
            try:
                return decomposition(*args, **kwargs)
            finally:
                off()
                self.decomposing -= 1
        if func not in DECOMPOSED:
            return NotImplemented
        dispatch = self.__torch_dispatch__
        if func is dropout.NATIVE_DROPOUT:
            parts = dropout.split_args(args, kwargs)
            return NotImplemented if parts is None else dropout.split(dispatch, types_, parts)
        if func in INPLACE_VIEWS:
            view = dispatch(INPLACE_VIEWS[func], types_, args, kwargs)
            with self.pause():
                restride(args[0], view)
            return args[0]
        p = indexing.plan(func, args, kwargs)
        return NotImplemented if p is None else indexing.run(dispatch, types_, func, args, p)

    def _foreign(self, func: Any, info: OpInfo, args: tuple, kwargs: dict) -> Any:
        """An op of another library (OpInfo.foreign: a custom op,
        torchvision's) on tensors. The graph does not have it, so it runs on
        the host, as it does eagerly, on the current value of each tensor
        argument, which the host reads as it reads any value (kind "value":
        a fetch of a value the graph computes, the updated value of state
        the step wrote in place, nothing for a plain host tensor); its
        results are host tensors, fed to the graph where the step uses
        them. Nothing it runs is recorded. (Run on the placeholders
        themselves, it failed: their values were never published.)

        Where autograd falls through the op (OpInfo.through) and a tensor
        argument requires grad, eager autograd records the ops its kernel
        calls, and gradients flow through them: the kernel then runs as it
        does eagerly, above autograd, and its ops are the program's
        (_through_kernel)."""
        flat, spec = tree_flatten((args, kwargs))
        if not any(isinstance(x, torch.Tensor) for x in flat):
            return func(*args, **kwargs)
        if any(a[4] for a in info.args):
            return self._foreign_write(func, args, kwargs, info.name)
        if info.through and torch.is_grad_enabled() and any(
                isinstance(x, torch.Tensor) and x.requires_grad for x in flat):
            out = self._through_kernel(func, args, kwargs)
            if out is not NotImplemented:
                return out
            self.problem(f"{info.name} (an op of another library with no autograd kernel) "
                         "cannot run its kernel above autograd here")
        values = [self.materialize(x, "value", self._operand_value) if isinstance(x, torch.Tensor) else x
                  for x in flat]
        args, kwargs = tree_unflatten(values, spec)
        with self.pause():
            return func(*args, **kwargs)

    def _through_kernel(self, func: Any, args: tuple, kwargs: dict) -> Any:
        """Runs `func`'s kernel with autograd's keys live and this recorder
        on, as eager runs an op autograd falls through: the ops it calls
        are recorded (or validated) and differentiated like the program's
        own. NotImplemented where the recorder cannot be turned on for them
        or the dispatch hook's module is not built (the op then runs on the
        host, no gradient reaches its inputs, and the function does not
        compile)."""
        run_through = native.optional_function("run_through", dispatch=True)
        switch = self._handler_switch()
        if run_through is None or switch is None:
            return NotImplemented
        on, off = switch
        on()
        try:
            return run_through(func, tuple(args), dict(kwargs))
        finally:
            off()

    def _foreign_write(self, func: Any, args: tuple, kwargs: dict, name: str) -> Any:
        """An op of another library that writes an argument in place: the
        graph could not see the write, so the step cannot be compiled (the
        function runs eagerly from then on, and says why)."""
        self.problem(f"{name} (an op of another library) writes its argument in place, "
                     "which the graph cannot see")
        return func(*args, **kwargs)

    def _read_operands(self, func: Any, args: tuple, kwargs: dict, written: list,
                       site: Site) -> tuple[tuple, dict]:
        """The values an op of HOST_VALUE_OPS or HOST_RNG_VALUE_OPS reads, read by the
        host (a fetch of each one the graph computes, kind "value"): the
        call's arguments with each tensor it reads replaced by what the
        host has for it (while tracing, the tensor itself)."""
        def current(t: Any) -> Any:
            if not isinstance(t, torch.Tensor) or any(t is w for w in written):
                return t
            return self.materialize(t, "value", self._operand_value, site)
        return tree_map(current, args), tree_map(current, kwargs)

    @staticmethod
    def _operand_value(t: torch.Tensor) -> torch.Tensor:
        """What the host has for `t` when an op it runs reads it: the value
        a materialization hands over (see _read_operands)."""
        return t

    def _operands(self, func: Any, name: str, args: tuple, kwargs: dict,
                  site: Site) -> tuple[list[ValueRef], dict[str, Any], list[torch.Tensor]]:
        """Tensor operands (in schema order), the `args` dictionary, and the
        tensors the op writes in place."""
        operands: list[ValueRef] = []
        op_args: dict[str, Any] = {}
        written: list[torch.Tensor] = []
        unmarked = UNMARKED_WRITES.get(name, ())
        if unmarked and not _arg(func, args, kwargs, "training", True):
            unmarked = ()  # evaluation mode reads the running statistics only
        # How to call the op again from its tensor operands (host calls).
        recipe: list[tuple] = []
        self._last_recipe = recipe
        tensors: list[torch.Tensor] = []  # the operands' tensors, for symbolic sizes
        for (_, aname, kwarg_only, tensor_arg, writes), v in passed_args(op_info(func).args, args, kwargs):
            if isinstance(v, torch.Tensor):
                recipe.append((aname, kwarg_only, "t", None))
                operands.append(self.value_of(v, site))
                tensors.append(v)
                if writes or aname in unmarked:
                    written.append(v)
                    self._check_writable(operands[-1], v)
            elif isinstance(v, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in v):
                recipe.append((aname, kwarg_only, "tl", len(v)))
                for x in v:
                    if x is None:
                        raise TraceProblem(f"argument {aname} is a tensor list with None entries")
                    if not isinstance(x, torch.Tensor):
                        raise TraceProblem(f"argument {aname} mixes tensors and {type(x).__name__}")
                    operands.append(self.value_of(x, site))
                    tensors.append(x)
                    if writes:
                        written.append(x)
                        self._check_writable(operands[-1], x)
            elif v is None:
                if aname not in _IGNORED_ARG_NAMES:
                    recipe.append((aname, kwarg_only, "v", v))
                if tensor_arg:
                    op_args[aname] = None  # an absent optional tensor: `name = unit`
            elif isinstance(v, _IGNORED_ARG_TYPES) or aname in _IGNORED_ARG_NAMES:
                continue
            else:
                recipe.append((aname, kwarg_only, "v", v))
                op_args[aname] = _python_value(v)
                mlir_text.attribute(op_args[aname])  # raises if it cannot be expressed
        if name in sizes.SIZE_ARGS:
            self._symbolize_sizes(name, operands, op_args, recipe, tensors, site)
        return operands, op_args, written

    def _symbolize_sizes(self, name: str, operands: list[ValueRef], op_args: dict[str, Any],
                         recipe: list[tuple], tensors: list[torch.Tensor], site: Site) -> None:
        """Size arguments recorded with symbolic entries (sizes.py); the host
        call recipe gets the same form (resolved when it runs). Values an
        entry refers to that are not operands become trailing operands."""
        for aname in sizes.DROPPED_ARGS.get(name, ()):
            op_args.pop(aname, None)
        where = relax.ENGINE if self.in_engine else site
        extra: list[ValueRef] = []
        for aname in sizes.SIZE_ARGS[name]:
            v = op_args.get(aname)
            if v is None:
                continue
            dynamic = self.dynamic_sizes.get((where, name, aname), ())
            s = sizes.symbolize(name, v, tensors, dynamic, self._dim_lookup if dynamic else None, extra)
            if s == v:
                continue
            op_args[aname] = s
            for j, (rname, kwarg_only, kind, _) in enumerate(recipe):
                if rname == aname and kind == "v":
                    recipe[j] = (rname, kwarg_only, kind, s)
        if extra:
            operands.extend(extra)
            op_args[sizes.SHAPE_OPERANDS] = len(extra)

    def _true_count(self, mask: torch.Tensor) -> Optional[int]:
        """The number of true elements of a (materialized) boolean mask: a
        data-dependent size (counts 0 and 1 stay specialized)."""
        real = mask._terra_real if isinstance(mask, Placeholder) else mask
        if real is None or isinstance(real, Placeholder):
            return None
        with self.pause():
            n = int(real.count_nonzero())
        return n if n > 1 else None

    def _dynamic_dims(self, name: str, operands: list[ValueRef], op_args: dict[str, Any],
                      outs: list[torch.Tensor]) -> list[set]:
        """Which dims of each result follow the operands' data-dependent
        dims: the op's shape function is run on meta tensors whose dynamic
        dims are set to sentinel sizes (and so are the size-argument entries
        recorded as those dims, sizes.py), and the result dims that come out
        as sentinels are dynamic."""
        sentinels: dict[int, int] = {}  # data-dependent size -> its sentinel
        for r in operands:
            for d in self._taint.get(r, ()):
                n = self._real_shapes[r][d]
                sentinels.setdefault(n, _SENTINEL + 2 * len(sentinels))
        func, args, kwargs = self._last_call

        def entry(form: Any, v: Any) -> Any:
            if isinstance(form, sizes.SymDim) and form.operand < len(operands):
                ref = operands[form.operand]
                if form.dim in self._taint.get(ref, ()):
                    return sentinels[self._real_shapes[ref][form.dim]]
            return v

        def meta(x: Any) -> Any:
            if not isinstance(x, torch.Tensor):
                return x
            ref = self.producers.get(self.key(x))
            dims = self._taint.get(ref, ()) if ref is not None else ()
            shape = [sentinels[n] if d in dims else n for d, n in enumerate(x.shape)]
            return torch.empty(shape, dtype=x.dtype, device="meta")

        def perturb(x: Any, form: Any = None) -> Any:
            if isinstance(x, torch.Tensor):
                return meta(x)
            if isinstance(form, list) and isinstance(x, (list, tuple)) and len(form) == len(x):
                return type(x)(entry(f, v) for f, v in zip(form, x))
            if form is not None:
                return entry(form, x)
            if isinstance(x, (list, tuple)):  # (a Tensor[] or Tensor?[] argument: one level)
                return type(x)(meta(v) for v in x)
            return x
        forms = {a: op_args[a] for a in sizes.SIZE_ARGS.get(name, ()) if a in op_args}

        def probe_arg(aname: str, x: Any) -> Any:
            # A device argument goes to meta too: `new_zeros(sizes, device=
            # cpu)` (index's backward) would otherwise fill a real tensor of
            # sentinel sizes (215 ms per probe in Faster R-CNN).
            if aname == "device" and x is not None:
                return _META
            return perturb(x, forms.get(aname))
        pos, kw = list(args), dict(kwargs)
        for i, aname, kwarg_only, _, _ in op_info(func).args:
            if i < len(pos) and not kwarg_only:
                pos[i] = probe_arg(aname, pos[i])
            elif aname in kw:
                kw[aname] = probe_arg(aname, kw[aname])
        from .coexec import infer_meta  # noqa: PLC0415 - coexec builds on this module
        try:
            with self.pause():
                # The co-executor's inference: cached, and with rules for
                # the ops torch 1.13 has no meta kernel for (convolution and
                # loss backward ops: ~10 ms per failing probe).
                meta = infer_meta(func, tuple(pos), kw)
            metas = list(_flat_tensors(meta))
            if len(metas) == len(outs):
                marks = set(sentinels.values())
                return [{d for d, n in enumerate(m.shape) if n in marks} for m in metas]
        except Exception:  # noqa: BLE001 - no meta kernel or a size arg it rejects
            pass
        # No shape function to probe: a result shaped exactly like a tainted
        # operand has its dynamic dims (elementwise ops); others get none (a
        # static dim that then changes fails a graph guard: a fallback,
        # never a wrong value; a dim tainted by coincidence would instead
        # spread dynamic sizes through the graph).
        shaped = {}
        for r in operands:
            if r in self._taint:
                shaped.setdefault(self._real_shapes[r], set(self._taint[r]))
        return [set(shaped.get(tuple(t.shape), ())) for t in outs]

    def _dim_lookup(self, v: int, position: int) -> Optional[tuple[ValueRef, int]]:
        """A value of the trace with a dim of size `v`, and that dim: among
        fed values and data-dependent results (where changing sizes come
        from) first, then among all values, the latest with `v` as dim
        `position` (the entry's own position), else the latest with `v` as
        any dim. An index of the trace's dims, extended as it is asked."""
        events = self.trace.events
        for i in range(self._dims_upto, len(events)):
            ev = events[i]
            if isinstance(ev, OpEvent):
                types = ev.results
                index = self._source_dims if ev.name in _SIZE_SOURCES else self._dims
            elif isinstance(ev, FeedEvent):
                types, index = [ev.type], self._source_dims
            elif isinstance(ev, StateEvent):
                types, index = [ev.type], self._dims
            else:
                continue
            for j, ty in enumerate(types):
                ref = ValueRef(i, j)
                shape = self._real_shapes.get(ref, ty.shape)  # dynamic dims: this iteration's size
                for d in reversed(range(len(shape))):  # the lowest dim wins
                    n = shape[d]
                    if n > 1:
                        index[n] = (ref, d)
                        index[(n, d)] = (ref, d)
        self._dims_upto = len(events)
        for index in (self._source_dims, self._dims):
            hit = index.get((v, position)) or index.get(v)
            if hit is not None:
                return hit
        return None

    def _record(self, name: str, operands: list[ValueRef], op_args: dict[str, Any],
                written: list[torch.Tensor], out: Any, site: Site, engine: bool, func: Any = None) -> None:
        outs = list(_flat_tensors(out))
        if not outs and written and func is not None and not op_info(func).ret_alias:
            # An in-place op that returns nothing (`_foreach_add_`): its
            # results are the updated values of the tensors it writes.
            outs = list(written)
        if name in UNMARKED_WRITES and outs:
            # Batch norm's running statistics, updated in place but not
            # returned, become extra results (the op's functional form: the
            # lowering computes the updated statistics as results 3 and 4).
            returned = {self.key(t) for t in outs}
            outs += [w for w in written if self.key(w) not in returned]
        if not outs:
            if name not in METADATA_OPS:
                self.problem(f"{name} returns no tensor; its Python result cannot come from the graph")
            return
        for t in outs:
            mlir_text.element_type(t.dtype)
        types = [TensorType.of(t) for t in outs]
        # A data-dependent size is a dynamic dim of every value it flows
        # into, from the first trace on: a static one would fail the graph's
        # shape guards at the first new count.
        dynamic: list = []
        if name == "aten.index.Tensor" and self._source is not None:
            count, position = self._source
            self._source = None
            dynamic = [{position} if position < len(t.shape) and t.shape[position] == count else set()
                       for t in outs]
        elif self._taint and any(r in self._taint for r in operands):
            dynamic = self._dynamic_dims(name, operands, op_args, outs)
        if any(dynamic):
            types = [TensorType(ty.dtype, tuple(-1 if d in dims else n for d, n in enumerate(ty.shape)))
                     for ty, dims in zip(types, dynamic)]
        self._record_from = len(self.trace.events)  # the events this op appends, for tapes
        rw = relax.rewrite(self.trace, name, operands, op_args, types, site, self.relaxed, engine,
                           self.speculate)
        synthetic: list[Any] = []
        if rw is not None:
            # A relaxed scalar: its feed, then the op's tensor form.
            feed = self._append(rw.feed)
            synthetic.append(rw.feed)
            self._note_feed(feed, rw.feed_value, rw.arg)
            made: list[int] = []
            for op_name, inputs, args, result_types in rw.ops:
                refs = [ValueRef(feed) if i == relax.FEED else ValueRef(made[i]) if isinstance(i, int) else i
                        for i in inputs]
                event = OpEvent(op_name, refs, args, result_types, site, None)
                made.append(self._append(event))
                synthetic.append(event)
            index = made[-1]
        else:
            event = OpEvent(name, operands, op_args, types, site,
                            (func, getattr(self, "_last_recipe", None)) if func is not None else None)
            index = self._append(event)
        out_keys = set()
        for j, t in enumerate(outs):
            self._bind(t, ValueRef(index, j))
            out_keys.add(self.key(t))
            if j < len(dynamic) and dynamic[j]:
                self._taint[ValueRef(index, j)] = frozenset(dynamic[j])
                self._real_shapes[ValueRef(index, j)] = tuple(t.shape)
        if (name in _SCATTER_OF or name in _INVERSE_VIEW) and outs and self._last_call is not None \
                and self._last_call[1]:
            self._note_view(name, op_args, self._last_call[1][0], outs[0])
        scatters: list[OpEvent] = []
        for w in written:
            if self.key(w) not in out_keys:
                self.problem(f"{name} writes an argument in place without returning it "
                             f"(shape {list(w.shape)}); the update is not expressible yet")
            chain = self._view_chain(w)
            self._written(w)
            if chain:
                scatters += self._functionalize(w, chain, site)
        records = (synthetic or [event]) + scatters
        if engine and self._forced is not None:
            # Catching up on a tape: the node's post hook has already run;
            # the sites come from the iteration the tape was made from.
            for record, known in zip(records, self._forced.engine_sites):
                self._set_site(record, known)
        elif engine:
            for record in records:
                self.backward.engine_op(record, site)
        elif self._forced is not None and self._forced.nodes is not None:
            self.backward.forward_outputs(outs, site, self._forced.nodes)
        else:
            self.backward.forward_outputs(outs, site)

    # -- writes through views ---------------------------------------------------
    def _note_view(self, name: str, op_args: dict, parent: Any, view: Any) -> None:
        """Remembers that `view` is `name`(`parent`, args), an op of
        _SCATTER_OF or _INVERSE_VIEW. A view with its parent's key (a slice
        of all of it) is its parent here."""
        if not isinstance(parent, torch.Tensor) or not isinstance(view, torch.Tensor):
            return
        if any(not (v is None or type(v) is int or (type(v) is list and all(type(x) is int for x in v)))
               for v in op_args.values()):
            return  # a size the graph computes (a dynamic dim): not written back
        if name == "aten.as_strided" and (parent.storage_offset() != 0 or not parent.is_contiguous()):
            return  # (as_strided addresses the storage: a dense tensor's elements)
        k = self.key(view)
        if k == self.key(parent) or self.base(view) != self.base(parent):  # (a reshape may copy)
            return
        # A view of a view that is the original again (`w.t().t()`) is not a
        # view of it: that would make a cycle.
        up, depth = self.key(parent), 0
        while up in self.view_parent and depth < 32:
            up, depth = self.key(self.view_parent[up][0]), depth + 1
            if up == k:
                return
        self.view_parent[k] = (parent, name, dict(op_args))

    def _view_chain(self, t: torch.Tensor) -> Optional[list]:
        """The views `t` was made by (`view_parent`), up to a tensor that is
        no such view, with the value each viewed tensor has now: [(parent, view
        op, args, parent's value)], innermost first; None if a value is not
        known (a view written before and not derived again) or a value has
        a data-dependent size."""
        chain = []
        k = self.key(t)
        while k in self.view_parent and len(chain) < 32:
            parent, name, args = self.view_parent[k]
            pk = self.key(parent)
            ref = self.producers.get(pk)
            if ref is None or pk in self.stale or ref in self._taint:
                return None
            chain.append((parent, name, args, ref))
            k = pk
        return chain or None

    def _functionalize(self, t: torch.Tensor, chain: list, site: Site) -> list:
        """An in-place write into view `t` (recorded as an op making `t`'s new
        value) also makes new values of the tensors it views, from `t` up to
        the tensor that is no view: the old value with the view's part
        replaced (`slice_scatter`, `select_scatter`, `as_strided_scatter`),
        or the view's value rearranged back (_INVERSE_VIEW). Other
        views of that memory are stale (`_written`) and are derived again
        from the new values when read (`_rederive`). This is how functional
        IRs express a write through a view (torch's functionalization).
        Returns the events it appended (an engine op's get its sites)."""
        value = self.producers.get(self.key(t))
        events: list[OpEvent] = []
        if value is None:
            return events
        for parent, name, args, old in chain:
            if name in _SCATTER_OF:  # the view is part of its parent
                event = OpEvent(_SCATTER_OF[name], [old, value], dict(args), [TensorType.of(parent)], site,
                                _synthetic_call(_SCATTER_OF[name], args, 2))
            else:  # the view is all of its parent, rearranged
                op, inverse = _INVERSE_VIEW[name](args, parent)
                event = OpEvent(op, [value], inverse, [TensorType.of(parent)], site,
                                _synthetic_call(op, inverse, 1))
            value = ValueRef(self._append(event))
            events.append(event)
            self._bind(parent, value)
        return events

    def _rederive(self, t: torch.Tensor, site: Site) -> Optional[ValueRef]:
        """A stale view (its memory was written through another view) in
        `view_parent`, of a tensor whose value is known: the view of that
        value, recorded again. None if it cannot be derived."""
        entry = self.view_parent.get(self.key(t))
        if entry is None or self.in_engine:
            return None  # (inside the engine an event's site comes from its node)
        parent, name, args = entry
        pk = self.key(parent)
        if pk in self.stale and self._rederive(parent, site) is None:
            return None
        ref = self.producers.get(pk)
        if ref is None or ref in self._taint:
            return None
        event = OpEvent(name, [ref], dict(args), [TensorType.of(t)], site, _synthetic_call(name, args, 1))
        value = ValueRef(self._append(event))
        self._bind(t, value)
        return value

    # -- materializations ------------------------------------------------------
    def materialize(self, t: torch.Tensor, kind: str, call: Callable[[torch.Tensor], Any],
                    site: Optional[Site] = None) -> Any:
        """Python reads `t`: a `terra.fetch` of its value if the trace computed
        it, else a note of where the host finds it; then the real read,
        `call(t)`."""
        try:
            if site is None:
                self.backward.resolve()
                raw: list = []
                site, _ = capture(sys._getframe(2), self.stop, raw)
                self.loop_context = self.loop_counter.context(raw)
                self._site_info = (site, True, self.loop_context)
            self.backward.flush()
            self.in_engine = False
            k = self.key(t)
            ref = self.producers.get(k)
            if ref is not None and not isinstance(self.trace.events[ref.event], (FeedEvent, StateEvent)):
                fetch = FetchEvent(ref, TensorType.of(t), site, kind)
                self._append(fetch)
                entry = Materialization(kind, fetch=self.fetch_count - 1)
            elif ref is not None:
                ev = self.trace.events[ref.event]
                entry = Materialization(kind, host=ev.source if isinstance(ev, FeedEvent) else StateSource(ev.name))
            elif k in self.state_by_key:
                entry = Materialization(kind, host=StateSource(self.state_by_key[k]))
            elif k in self.arg_paths:
                entry = Materialization(kind, host=ArgSource(self.arg_paths[k]))
            else:
                with self.pause():
                    entry = Materialization(kind, host=ConstSource(t.detach().clone()))
        except Exception as exc:
            self.problem(f"cannot record a materialization ({kind}): {exc!r}")
            entry = None
        with self.pause():
            result = call(t)
        if entry is not None:
            self.trace.materializations.append(entry)
            self.trace.materialized.append(result)
        return result

    def record_return(self, result: Any) -> None:
        """The step returns `result`: its tensors computed by the trace
        become fetches (kind "return"), so the graph publishes them."""
        self.backward.resolve()
        self.backward.flush()
        self.loop_context = ()
        for i, t in enumerate(_flat_tensors_deep(result)):
            ref = self.producers.get(self.key(t))
            if ref is not None and isinstance(self.trace.events[ref.event], OpEvent):
                site = Site((Frame("<return>", "return", 0, i),))
                self._append(FetchEvent(ref, TensorType.of(t), site, "return"))

    # -- end of the call -------------------------------------------------------
    def finish(self) -> Trace:
        """Closes the trace: state written during the call becomes end fetches."""
        self.backward.resolve()
        self.backward.close()
        self.loop_context = ()
        commit_site_of = lambda name: Site((Frame("<state>", name, 0, 0),))  # noqa: E731
        self.final_slots = self.registry.slots()
        for slot in self.final_slots:
            t = slot.get()
            name = slot.name
            if t is None:
                if name in self.initial:
                    self.trace.dropped_state.append(name)
                continue
            k = self.key(t)
            if k in self.stale:
                self.problem(f"the final value of {name} was written through another view")
                continue
            ref = self.producers.get(k)
            if ref is None:
                if self.initial.get(name) != k:
                    self.problem(f"{name} now holds a tensor no recorded op produced")
                continue
            if ref == self.state_reads.get(name):
                continue  # read, never written
            if not isinstance(self.trace.events[ref.event], OpEvent):
                self.problem(f"{name} now holds a fed or other state's tensor; not committed")
                continue
            self._append(FetchEvent(ref, TensorType.of(t), commit_site_of(name), "commit", name))
            self.written_feeds.pop(self.base(t), None)
        for shape, held, path in self.written_feeds.values():
            if path is not None:
                self._commit_argument(path)
            elif held is not None:
                self.trace.adopt.append(held)
            else:
                self.problem(f"writes in place into a tensor from outside the step (shape {shape}) that is "
                             "not persistent state; the write would not be committed")
        self._record_escapes()
        self.keepalive.clear()
        return self.trace

    def _commit_argument(self, path: tuple) -> None:
        """The step wrote its tensor argument at `path` in place (`x.sub_(m)`
        on the batch): the argument's final value becomes an end fetch of
        kind "arg", which the co-executor copies into the call's argument
        after the run, as eager leaves it."""
        arg = _at_path(self._call, path)
        where = "/".join(str(p) for p in path)
        if not isinstance(arg, torch.Tensor) or arg._base is not None:
            self.problem(f"writes in place into the step's argument {where}, a view of another tensor; "
                         "the write would not be committed")
            return
        k = self.key(arg)
        ref = self.producers.get(k)
        if k in self.stale or ref is None or not isinstance(self.trace.events[ref.event], OpEvent):
            self.problem(f"writes in place into the step's argument {where} (shape {list(arg.shape)}) through a view of "
                         "it; the write would not be committed")
            return
        site = Site((Frame("<argument>", where, 0, 0),))
        self._append(FetchEvent(ref, TensorType.of(arg), site, "arg", arg=path))

    def _record_escapes(self) -> None:
        """Values the traced step computed that are still alive after it
        (the program kept them: `history.append(loss)`, a cache in a
        module) and that no return or commit fetches become fetches of kind
        "escape": the merged graph publishes them, and a co-executed step
        gives the placeholders it kept their values (CoExecutor.
        _publish_escapes)."""
        candidates, self._escape_candidates = self._escape_candidates, None
        if not candidates:
            return
        # The last op's arguments and written tensors are the recorder's
        # references, not the program's.
        self._last_call = None
        self._written_now = []
        fetched = {f.value for f in self.trace.fetches}
        n = 0
        for w in candidates:
            t = w()
            if t is None:
                continue
            ref = self.producers.get(self.key(t))
            if ref is None or ref in fetched or not isinstance(self.trace.events[ref.event], OpEvent):
                continue
            fetched.add(ref)
            self._append(FetchEvent(ref, TensorType.of(t), Site((Frame("<escape>", "escape", 0, n),)),
                                    "escape"))
            n += 1


def _python_value(v: Any) -> Any:
    """An argument as a plain Python value for the `args` dictionary."""
    if isinstance(v, (bool, int, float, str, torch.dtype)):
        return v
    if isinstance(v, (list, tuple)):  # torch.Size included
        return [_python_value(x) for x in v]
    for kind in (int, float, bool):
        sym = getattr(torch, "Sym" + kind.__name__.capitalize(), None)
        if sym is not None and isinstance(v, sym):
            return kind(v)
    raise TraceProblem(f"argument of type {type(v).__name__} is not expressible")


_COMPOSITE: dict[Any, bool] = {}


def _composite(func: Any) -> bool:
    """Whether torch composes `func` of other ops (CompositeImplicitAutograd)."""
    hit = _COMPOSITE.get(func)
    if hit is None:
        hit = _COMPOSITE[func] = hasattr(func, "decompose") and torch._C._dispatch_has_kernel_for_dispatch_key(
            func.name(), "CompositeImplicitAutograd")
    return hit


def _region(t: torch.Tensor) -> tuple:
    """The memory a view covers: (storage offset, sizes, strides, dtype)."""
    return (t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)


def regions_overlap(a: tuple, b: tuple) -> bool:
    """Whether two views of one memory (`_region`s) may share an element;
    exact for views with the same strides in a nested layout (the chunks,
    slices and rows of one tensor), True when it cannot tell."""
    (oa, sa, ta, da), (ob, sb, tb, db) = a, b
    if 0 in sa or 0 in sb:
        return False
    if da != db:
        return True
    ends = [(o + sum((n - 1) * x for n, x in zip(sz, st) if x < 0), o + sum((n - 1) * x for n, x in zip(sz, st) if x > 0))
            for o, sz, st in ((oa, sa, ta), (ob, sb, tb))]
    if ends[0][1] < ends[1][0] or ends[1][1] < ends[0][0]:
        return False  # apart (rows 0-1 and rows 2-3)
    if len(sa) != len(sb):
        return True
    dims = []  # (stride, size in a, size in b) of the dims that matter
    for na, nb, xa, xb in zip(sa, sb, ta, tb):
        if na == 1 and nb == 1:
            continue
        if xa != xb or xa <= 0:
            return True
        dims.append((xa, na, nb))
    dims.sort(reverse=True)
    delta = ob - oa
    for i, (stride, na, nb) in enumerate(dims):
        # The lower dims reach less than half a stride: the shift along
        # this dim is the nearest multiple.
        span = sum((max(m, n) - 1) * x for x, m, n in dims[i + 1:])
        if stride <= 2 * span:
            return True
        # A shared element is a's index i and b's j with sum((i - j) *
        # stride) == delta: i - j along this dim is the nearest multiple.
        shift = (2 * delta + stride) // (2 * stride)
        if not -(nb - 1) <= shift <= na - 1:
            return False
        delta -= shift * stride
    return delta == 0


def written_args(func: Any, args: tuple, kwargs: dict) -> list[torch.Tensor]:
    """The tensors a call writes in place (its schema's, and UNMARKED_WRITES)."""
    info = op_info(func)
    unmarked = UNMARKED_WRITES.get(info.name, ())
    return [v for (_, aname, _, _, writes), v in passed_args(info.args, args, kwargs)
            if isinstance(v, torch.Tensor) and (writes or aname in unmarked)]


def passed_args(arg_info: Any, args: tuple, kwargs: dict) -> Iterator[tuple]:
    """(schema entry, value) of each argument a call passes, in schema
    order (`arg_info`: OpInfo.args)."""
    nargs = len(args)
    for info in arg_info:
        i, aname, kwarg_only = info[:3]
        if i < nargs and not kwarg_only:
            yield info, args[i]
        elif aname in kwargs:
            yield info, kwargs[aname]


def _flat_tensors(out: Any) -> Iterator[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        yield out
    elif isinstance(out, (list, tuple)):
        for x in out:
            yield from _flat_tensors(x)


def _flat_tensors_deep(obj: Any) -> Iterator[torch.Tensor]:
    """Tensors in nested tuples, lists and dict values, in order."""
    for _, t in _tensors_in(obj, ()):
        yield t


# View ops whose writes are written back into the tensor they view
# (_Recorder._functionalize), and the op that does it.
_SCATTER_OF = {"aten.slice.Tensor": "aten.slice_scatter", "aten.select.int": "aten.select_scatter",
               "aten.as_strided": "aten.as_strided_scatter", "aten.diagonal": "aten.diagonal_scatter"}


def _view_back(args: dict, parent: torch.Tensor) -> tuple:
    return "aten.view", {"size": list(parent.shape)}


def _inverse_permute(args: dict, parent: torch.Tensor) -> tuple:
    dims = [d % max(parent.dim(), 1) for d in args.get("dims", [])]
    return "aten.permute", {"dims": sorted(range(len(dims)), key=dims.__getitem__)}


# View ops whose view holds all of the viewed tensor's elements: a write
# through one gives the viewed tensor the view's new value rearranged back
# (_Recorder._functionalize): (op, args) from the view's args and the tensor.
_INVERSE_VIEW = {**{n: _view_back for n in ("aten.view", "aten._unsafe_view", "aten.reshape", "aten._reshape_alias",
                                           "aten.unsqueeze", "aten.squeeze", "aten.squeeze.dim",
                                           "aten.flatten.using_ints", "aten.unflatten.int")},
                 "aten.t": lambda args, parent: ("aten.t", {}),
                 "aten.transpose.int": lambda args, parent: ("aten.transpose.int", dict(args)),
                 "aten.permute": _inverse_permute}


def _synthetic_call(name: str, args: dict, tensors: int) -> tuple:
    """The host call (OpEvent.call) of an op the recorder adds itself (for a
    graph that leaves it to the host): its overload and a recipe taking
    `tensors` operands, then `args`, positionally while they follow the
    schema's order (as recorded recipes do), by keyword after a gap (an
    argument left at its default)."""
    parts = name.split(".")
    func = getattr(getattr(torch.ops.aten, parts[1]), parts[2] if len(parts) > 2 else "default")
    schema = [a[1] for a in op_info(func).args]
    recipe = [(aname, False, "t", None) for aname in schema[:tensors]]
    keyword = False
    for i, (k, v) in enumerate(args.items()):
        keyword = keyword or tensors + i >= len(schema) or schema[tensors + i] != k
        recipe.append((k, keyword, "v", v))
    return func, recipe


def _at_path(call: tuple, path: tuple) -> Any:
    """What sits at an ArgSource `path` ("args" or "kwargs", then indices
    and keys) in a call's (args, kwargs)."""
    obj: Any = call[("args", "kwargs").index(path[0])]
    for p in path[1:]:
        obj = obj[p]
    return obj


def _tensors_in(obj: Any, path: tuple) -> Iterator[tuple[tuple, torch.Tensor]]:
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif isinstance(obj, (list, tuple)):
        for i, x in enumerate(obj):
            yield from _tensors_in(x, path + (i,))
    elif isinstance(obj, dict):
        for k, x in obj.items():
            yield from _tensors_in(x, path + (k,))


# -- materialization hooks on torch.Tensor ---------------------------------------
_ACTIVE: Optional[_Recorder] = None
_SAVED: dict[str, Any] = {}
_WRAPPERS: dict[str, tuple] = {}  # method -> (the method wrapped, its wrapper)


def _install_hooks() -> None:
    """Puts the materialization wrappers on torch.Tensor for one step. The
    wrappers are made once per method and kept (making them every step
    cost ~80 µs); one is remade if the method it wraps was replaced since
    (another library patching torch.Tensor)."""
    for method, kind in MATERIALIZERS.items():
        orig = getattr(torch.Tensor, method)
        _SAVED[method] = torch.Tensor.__dict__.get(method, _MISSING)
        made = _WRAPPERS.get(method)
        if made is None or made[0] is not orig:
            made = _WRAPPERS[method] = (orig, _materializer(orig, kind))
        setattr(torch.Tensor, method, made[1])


def _materializer(orig: Any, kind: str) -> Callable:
    """The wrapper of torch.Tensor method `orig`, a read of kind `kind`."""
    def wrapper(self: torch.Tensor, *a: Any, _orig: Any = orig, _kind: str = kind,
                _native: bool = not isinstance(orig, types.FunctionType), **k: Any) -> Any:
        rec = _ACTIVE
        if rec is None or rec.paused or rec.thread != threading.get_ident():
            return _orig(self, *a, **k)
        if _kind == "repr" or _kind == "format":
            _orig = functools.partial(_as_printed, self, _orig, _kind)
        read = rec._native_read
        if read is not None and _native:  # a C method: the native replay may answer it
            r = read[0](self, _kind, _orig, a, k)
            if r is not read[1]:
                return r
        resume = rec.loop_counter.suspend()
        try:
            return rec.materialize(self, _kind, lambda v: _orig(v, *a, **k))
        finally:
            if resume:
                rec.loop_counter.resume()

    functools.update_wrapper(wrapper, orig)
    return wrapper


def _as_printed(t: torch.Tensor, orig: Any, kind: str, value: torch.Tensor, *a: Any, **k: Any) -> str:
    """`orig` (torch.Tensor's `__repr__` or `__format__`) applied to the
    value the host read for `t`, as eager prints `t`: the value read is a
    tensor without autograd history, so `t`'s own suffix
    (`grad_fn=<NllLossBackward0>`, `requires_grad=True`) is added where
    torch's printing puts it (after the dtype and other suffixes)."""
    if value is t or not isinstance(value, torch.Tensor):
        return orig(value, *a, **k)
    if kind == "format":
        # A 0-dim tensor formats its item; another one, with no format
        # spec, prints as its repr (object.__format__ -> str -> repr).
        if value.dim() == 0 or (a and a[0]) or k:
            return orig(value, *a, **k)
        text = _WRAPPERS["__repr__"][0](value)
    else:
        text = orig(value, *a, **k)
    if value.grad_fn is not None or value.requires_grad or not text.endswith(")"):
        return text
    grad_fn = t.grad_fn
    if grad_fn is not None:
        name = type(grad_fn).__name__
        if name == "CppFunction":
            name = grad_fn.name().rsplit("::", 1)[-1]
        suffix = f"grad_fn=<{name}>"
    elif t.requires_grad:
        suffix = "requires_grad=True"
    else:
        return text
    return torch._tensor_str._add_suffixes(text[:-1], [suffix], len("tensor("), False)


def _remove_hooks() -> None:
    for method, saved in _SAVED.items():
        if saved is _MISSING:
            delattr(torch.Tensor, method)
        else:
            setattr(torch.Tensor, method, saved)
    _SAVED.clear()


_MISSING = object()


class StepTracer:
    """Wraps a step function: each call runs it eagerly, as it is, and
    records its trace (`traces`).

        tracer = StepTracer(step, modules=[model], optimizers=[opt])
        loss = tracer(x, y)             # runs step(x, y), records traces[0]
        text = tracer.module_text()     # MLIR for terra-opt
    """

    def __init__(self, fn: Callable[..., Any], modules: Sequence[torch.nn.Module] = (),
                 optimizers: Sequence[torch.optim.Optimizer] = ()):
        self.fn = fn
        self.registry = StateRegistry(modules, optimizers)
        self.traces: list[Trace] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        global _ACTIVE
        if _ACTIVE is not None:
            raise RuntimeError("a step is already being traced in this process")
        recorder = _Recorder(self.registry, args, kwargs, sys._getframe())
        _ACTIVE = recorder
        _install_hooks()
        try:
            with recorder, recorder.loop_counter:
                result = self.fn(*args, **kwargs)
        finally:
            _remove_hooks()
            _ACTIVE = None
            try:
                trace = recorder.finish()
            except Exception as exc:  # never mask the step's own outcome
                recorder.backward.close()
                trace = recorder.trace
                trace.problems.append(f"tracer error at the end of the step: {exc!r}")
        self.traces.append(trace)
        return result

    def module_text(self, indices: Optional[Sequence[int]] = None) -> str:
        """MLIR module with the traces (all, or those at `indices`)."""
        chosen = range(len(self.traces)) if indices is None else indices
        return module_text([self.traces[i] for i in chosen], [f"iter{i}" for i in chosen])

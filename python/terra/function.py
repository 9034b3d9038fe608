"""`@terra.function`: co-execute an unmodified PyTorch step function.

    @terra.function
    def train_step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        return loss

One call is one iteration. The phases (spec section 1):

1. Tracing. Calls run eagerly under the tracer; each trace is merged into
   the TraceGraph in C++. Tracing ends when a trace is already covered
   (at least `min_traces` traces); the graph is generated and compiled.
   Compilation runs on a background thread (`compile_in_background`, on
   by default): calls meanwhile run eagerly, untraced, so the program
   never waits for the compiler; the first call after it finished
   co-executes. `fn.wait_compiled()` waits for it.
2. Co-execution. Calls run the step on placeholders while the compiled
   graph runs on its own thread (coexec.py). After each validated
   iteration the user's parameters, gradients, optimizer state and buffers
   hold exactly what eager would have produced.
3. Deviation. An iteration that leaves the graph goes eager from the
   deviating op; its trace is merged and the graph regenerated. After
   `max_regenerations` regenerations the function runs eagerly for good,
   with a warning saying why, unless deviations have grown rare (at most
   one co-executed iteration in four), as when a program's paths are drawn
   at random and are all met after a while: then up to 4 x
   max_regenerations.

Shapes: a dim that changes is relaxed to a dynamic one after one deviation
(the graph stays shape-specialized until then). With `dynamic_batch=True`,
the leading dim of every fed tensor (a batch) and every dim that follows it
are dynamic from the first trace, so a smaller last batch costs no
deviation, at some cost in graph speed (docs/frontend.md).

Persistent state is found without code changes: modules and optimizers
the function refers to (globals, closure cells, `self` of a method, and
attributes of objects it refers to) unless given explicitly.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import types
import warnings
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

import torch
from torch.utils._pytree import tree_map

from . import backward, loops, native, relax, sizes, tracing
from .coexec import CoExecutor, StateUnreadable, op_key
from .runio import tensor_spec, to_torch
from .placeholder import Placeholder, set_device as set_placeholder_device
from .sites import user_line
from .state import StateRegistry
from .trace import OpEvent, StateEvent, Trace, module_text, moves_loops
from .toolchain import build_dir


def _log_enabled() -> bool:
    return os.environ.get("TERRA_LOG", "") not in ("", "0")


# State tensor types `state_values` takes as they are (a placeholder or a
# missing slot gets a stand-in: state_value).
_PLAIN_STATE = frozenset({torch.Tensor, torch.nn.Parameter})


class _MergeFailure(Exception):
    """A trace the TraceGraph cannot take (the message says why)."""


@dataclass
class Fallback:
    """One iteration that left the graph."""

    iteration: int
    reason: str
    site: str


@dataclass
class Stats:
    tracing_iterations: int = 0
    coexec_iterations: int = 0
    eager_iterations: int = 0
    fallbacks: list[Fallback] = field(default_factory=list)
    regenerations: int = 0
    compile_time_s: float = 0.0
    host_exec_s: float = 0.0
    host_stall_s: float = 0.0
    graph_exec_s: float = 0.0
    graph_stall_s: float = 0.0
    # Co-executed iterations replayed from a tape to their end (tape.py).
    replayed_iterations: int = 0
    # State values the graph wrote into the state's memory itself
    # (-terra-commit-in-place), not copied by the host after the run.
    commits_in_place: int = 0
    steps: list[dict] = field(default_factory=list)

    def as_dict(self, fn: "TerraFunction") -> dict:
        return {
            "phase": fn.phase,
            "tracing_iterations": self.tracing_iterations,
            "coexec_iterations": self.coexec_iterations,
            "eager_iterations": self.eager_iterations,
            "fallbacks": len(self.fallbacks),
            "fallback_log": [vars(f) for f in self.fallbacks],
            "regenerations": self.regenerations,
            "compile_time_s": self.compile_time_s,
            "host_exec_s": self.host_exec_s,
            "host_stall_s": self.host_stall_s,
            "graph_exec_s": self.graph_exec_s,
            "graph_stall_s": self.graph_stall_s,
            "replayed_iterations": self.replayed_iterations,
            "commits_in_place": self.commits_in_place,
            "host_ops": list(fn.host_op_names),
            "graph_loops": sorted(user_line(site) for site in fn.dynamic_loops),
            "relaxed_scalars": sorted(f"{name}.{arg} at {user_line(site)}" for site, name, arg in fn.relaxed),
            "relaxed_sizes": sorted(f"{name}.{arg}{sorted(entries)} at "
                                    f"{'every backward op' if site == relax.ENGINE else user_line(site)}"
                                    for (site, name, arg), entries in fn.dynamic_sizes.items()),
            "eager_reason": fn.eager_reason,
            "steps": list(self.steps),
        }


# Regenerations past max_regenerations (TerraFunction._converging): up to
# this many times max_regenerations, while at most one co-executed
# iteration in this many deviated.
_CONVERGING_CAP = 4
_CONVERGING_RATE = 4
# Calls recorded while a graph compiles (TerraFunction._merge_pending).
_PENDING_MAX = 8


class TerraFunction:
    """The object `@terra.function` returns (see the module docstring)."""

    def __init__(self, fn: Callable[..., Any], *, device: str = "cpu", max_regenerations: int = 8,
                 serialized: bool = False, min_traces: int = 2, max_traces: int = 16,
                 dynamic_batch: bool = False,
                 modules: Optional[Sequence[torch.nn.Module]] = None,
                 optimizers: Optional[Sequence[torch.optim.Optimizer]] = None,
                 cache_dir: Optional[str] = None, max_duplication: int = 64,
                 compile_in_background: Optional[bool] = None):
        self.device = _check_device(device)
        # The backend the graph is compiled for: the device's, or with
        # TERRA_CPU_GRAPHS=gpu-loops (tests) the GPU pipeline's kernels run as
        # loops on the CPU, with the run exchanging values the way a CUDA
        # graph's does (by pointer and DLPack): device="cuda"'s paths, on
        # the CPU.
        self.graph_device = self.device
        if self.device == "cpu" and os.environ.get("TERRA_CPU_GRAPHS", "") == "gpu-loops":
            self.graph_device = "gpu-loops"
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.serialized = serialized
        self.max_regenerations = max_regenerations
        self.min_traces = max(2, min_traces)
        self.dynamic_batch = dynamic_batch
        self.max_traces = max_traces
        self.max_duplication = max_duplication
        if compile_in_background is None:
            compile_in_background = os.environ.get("TERRA_BACKGROUND_COMPILE", "1") != "0"
        self.compile_in_background = compile_in_background
        # The compilation running on a background thread, if any.
        self._compiling: Optional[_BackgroundCompile] = None
        # Traces recorded while the graph compiles in the background (merged
        # when it is done, _merge_pending); None: no compilation runs.
        self._pending: Optional[list[Trace]] = None
        self.cache_dir = cache_dir if cache_dir is not None else str(build_dir() / "terra-cache")
        self._explicit = (modules, optimizers)
        self.registry: Optional[StateRegistry] = None
        self.phase = "tracing"
        self.eager_reason = ""
        self.stats = Stats()
        self.session: Any = None
        self.traces: list[Trace] = []
        # Scalar arguments fed instead of fixed (relax.py).
        self.relaxed: set = set()
        # (site, or relax.ENGINE for backward ops, op name, arg) -> indices of
        # the size-list entries learnt to change between iterations (sizes.py)
        self.dynamic_sizes: dict = {}
        # Site of a fed tensor -> its dims known to change (from traces a
        # relaxation dropped); the recorder feeds them as dynamic.
        self.dynamic_feeds: dict = {}
        # Program loops (loops.py): trip counts seen per loop, the loops
        # that are graph loops (their trip count varied), and loops that
        # stay unrolled because graph loops could not express them.
        # Per program loop, the sequence of trip counts its runs took in
        # each trace (loops.trip_counts); sequences that differ run by run
        # make it a graph loop (_trips_vary).
        self.loop_trips: dict[Any, set[tuple[int, ...]]] = {}
        self.dynamic_loops: set = set()
        self.blocked_loops: set = set()
        # Compiled state, used by CoExecutor.
        self.keys: dict[tuple, int] = {}
        self.host_calls: dict[tuple, Any] = {}
        self.state_types: dict[str, Any] = {}
        self.graph: Any = None
        self.cursor: Any = None
        self.unrolled: set[int] = set()
        self.state_names: list[str] = []
        # The state's specs as the last co-executed step crossed them
        # (runio.tensor_specs returns those that still stand again).
        self.state_specs_seen: Optional[list] = None
        self.host_op_names: list[str] = []
        self.host_executor: Optional[Callable] = None
        self.stages: dict[str, str] = {}
        self._dummies: dict[str, torch.Tensor] = {}
        self._node_shapes: dict[tuple, list[int]] = {}
        self.tapes: dict = {}
        self.host_dynamic: dict = {}
        # Tape keys (argument shapes) whose replays left their tape inside a
        # loop: they count loop iterations from the step's start (replay.
        # TapeRecorder._leave_fast).
        self.loop_hook_keys: set = set()
        # The last co-executed step's CoExecutor, kept alive until the next
        # replayed step waits for its run to end (see _coexec).
        self._retired: Any = None

    # -- the call ------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.registry is None:
            registry = _discover_state(self.fn, args, *self._explicit)
            _check_state_device(registry, self.device)
            self.registry = registry
        if self.phase != "eager":
            foreign = self._foreign_device(args, kwargs)
            if foreign is not None:
                # The graph cannot read it: this call runs eagerly, untraced.
                return self._eager_call(foreign, "<arguments>", args, kwargs)
        if self.phase == "compiling":
            if self._compiling.done():
                self._install(self._compiling.result())  # (which may compile again)
            if self.phase == "compiling":
                return self._eager_while_compiling(args, kwargs)
        if self.phase == "coexec":
            with _gc_paused():
                return self._coexec(args, kwargs)
        if self.phase == "tracing":
            with _gc_paused():
                return self._trace(args, kwargs)
        self.stats.eager_iterations += 1
        return self.fn(*args, **kwargs)

    @property
    def readable_devices(self) -> tuple:
        """Device types of tensors the graph can be fed: the host's, and for
        a CUDA graph CUDA's."""
        return ("cpu", "cuda") if self.graph_device == "cuda" else ("cpu",)

    def _foreign_device(self, args: tuple, kwargs: dict) -> Optional[str]:
        """Why the graph cannot read a tensor argument of this call (on a
        device other than its own, or the host's that a CUDA graph copies
        in), or None."""
        for _, t in tracing._tensors_in((args, kwargs), ()):
            if t.device.type not in self.readable_devices:
                return f"a tensor argument is on {t.device} and the graph runs on {self.device}"
        return None

    def _log(self, text: str) -> None:
        if _log_enabled():
            print(f"[terra] {self.__qualname__}: {text}", file=sys.stderr, flush=True)

    def _go_eager(self, reason: str) -> None:
        self._retired = self._pending = None
        self.phase = "eager"
        self.eager_reason = reason
        warnings.warn(f"terra.function {self.__qualname__} runs eagerly from now on: {reason}",
                      RuntimeWarning, stacklevel=3)
        self._log(f"-> eager ({reason})")

    def differentiated_after(self, coexec: bool) -> None:
        """The program ran a backward pass after a step, through a tensor
        the step returned (backward._check_returned). A traced step's
        tensor has its eager history (the pass is right), but a co-executed
        step's values have none: the function runs eagerly from now on; a
        co-executed step's tensor cannot be differentiated, which is an
        error saying so."""
        reason = ("the program differentiates a tensor the step returned after the step, and a "
                  "co-executed step returns values without autograd history")
        if self.phase != "eager":
            self._go_eager(reason)
        if coexec:
            raise RuntimeError(f"terra.function {self.__qualname__}: {reason}: this tensor came from a "
                               "co-executed step, so it has no autograd history; the function runs eagerly "
                               "from its next call (differentiate inside the step, or return the value "
                               "detached if it is not differentiated)")

    def _trace(self, args: tuple, kwargs: dict) -> Any:
        result, trace = self._recorded_call(args, kwargs, "tracing")
        self._after_trace(trace, tracing_phase=True)
        return result

    def _recorded_call(self, args: tuple, kwargs: dict, phase: str) -> tuple:
        """Runs the step eagerly under the recorder: (its result, its trace)."""
        self._retired = None
        self.stats.tracing_iterations += 1
        start = time.perf_counter()
        recorder = tracing._Recorder(self.registry, args, kwargs, sys._getframe())
        recorder.relaxed = self.relaxed
        recorder.dynamic_sizes = self.dynamic_sizes
        recorder.dynamic_feeds = self.dynamic_feeds
        recorder.dynamic_batch = self.dynamic_batch
        recorder.speculate = True
        try:
            result = _run_step(recorder, self.fn, args, kwargs)
        finally:
            recorder.release()
        history = [t for t in tracing._flat_tensors_deep(result) if t.grad_fn is not None]
        if history:
            backward.watch_returned(self, history, coexec=False)
        elapsed = time.perf_counter() - start
        self.stats.host_exec_s += elapsed
        self.stats.steps.append({"phase": phase, "host_exec_s": elapsed, "traced": True})
        return result, recorder.trace

    def _after_trace(self, trace: Trace, tracing_phase: bool) -> None:
        """Merges a completed trace; compiles when tracing is done or the
        graph changed after a deviation."""
        if self.phase == "eager":
            return
        changed = self._absorb(trace)
        if changed is None:
            return
        if tracing_phase:
            self._log(f"traced iteration {len(self.traces)} (graph {'changed' if changed else 'covered'})")
            if changed and len(self.traces) >= self.max_traces:
                self._go_eager(f"{len(self.traces)} traces and the graph still changes")
                return
            if changed or len(self.traces) < self.min_traces:
                return
            self._compile()
            return
        # After a deviation the graph is regenerated even when the TraceGraph's
        # structure did not change: merging may have relaxed a dimension to
        # a dynamic one or added a fetch point.
        if changed or self.stats.fallbacks:
            if self.stats.regenerations >= self.max_regenerations and not self._converging():
                self._go_eager(f"the graph was regenerated {self.stats.regenerations} times "
                               f"(max_regenerations); last deviation: {self.stats.fallbacks[-1].reason}")
                return
            self._regenerate("")

    def _absorb(self, trace: Trace) -> Optional[bool]:
        """Takes a completed trace in: whether it changed the TraceGraph, or
        None if it ended the phase (the function is eager from now on, or a
        relaxation dropped the traces and tracing starts again)."""
        if trace.problems:
            self._go_eager("the step cannot be compiled: " + "; ".join(trace.problems))
            return None
        if trace.adopt and self._adopt(trace.adopt):
            return None
        if self._relax(trace):
            return None
        return self._merge(trace)

    def _adopt(self, tensors: list) -> bool:
        """Tensors the program holds outside its modules and optimizers and
        the step writes in place (an average of the weights, a running
        metric) become persistent state, and tracing starts again: the
        traces so far fed them as constants. Returns True if it did; a
        tensor on another device than the graph's stays a reason to run
        eagerly."""
        elsewhere = [t for t in tensors if t.device.type != self.device]
        if elsewhere:
            self._go_eager(f"the step writes in place into a tensor on {elsewhere[0].device} from outside "
                           f"the step (shape {list(elsewhere[0].shape)}); the graph runs on {self.device}")
            return True
        names = self.registry.adopt(tensors)
        if not names:
            return False
        self._log(f"tensors the step writes in place become persistent state: {', '.join(names)}; "
                  "tracing again")
        self._restart_tracing()
        return True

    def _restart_tracing(self) -> None:
        """Drops the traces and the graph: the next calls trace again."""
        self.session, self.traces, self.graph = None, [], None
        self.keys.clear()
        self.host_calls.clear()
        self.state_types.clear()
        self.phase = "tracing"

    def _regenerate(self, why: str) -> None:
        self.stats.regenerations += 1
        self._log(f"regenerating the graph ({self.stats.regenerations}){why}")
        self._compile()

    def _merge_pending(self) -> None:
        """Merges the traces recorded while the graph compiled; if one
        changed the TraceGraph (a path the program took meanwhile that the
        new graph lacks, a size that varies), regenerates at once instead of
        waiting for that path's deviation. A program whose paths are drawn
        at random (SDPoint's nine) meets most of them while its graphs
        compile instead of paying a deviation and a compile for each."""
        pending, self._pending = self._pending or [], None
        changed = False
        for trace in pending:
            merged = self._absorb(trace)
            if merged is None:
                return
            changed |= merged
        if not changed:
            return
        if self.stats.regenerations >= self.max_regenerations and not self._converging():
            return  # (the next deviation decides, as without the pending traces)
        self._regenerate(": paths met while the last one compiled")

    def _converging(self) -> bool:
        """Whether regenerating past `max_regenerations` is still worth it:
        deviations have grown rare (at most one co-executed iteration in
        four deviated so far), as in a program whose paths are drawn at
        random and are all met after a while (SDPoint's nine paths: eight
        regenerations in its first ~40 steps, then none), and fewer than
        4 x max_regenerations regenerations were made. A program that
        deviates at every other step stops at `max_regenerations`."""
        deviated = len(self.stats.fallbacks)
        return (self.stats.regenerations < _CONVERGING_CAP * self.max_regenerations
                and deviated * _CONVERGING_RATE <= self.stats.coexec_iterations)

    def _relax(self, trace: Trace) -> bool:
        """Relaxes scalar arguments that changed since the last trace (see
        relax.py). The traces so far recorded them as constants, so they
        are dropped and tracing starts again. Returns True if it did."""
        if not self.traces:
            return False
        # Against every trace so far: an op on a branch the previous call did
        # not take still has its earlier values.
        new = set().union(*(relax.changed_scalars(t, trace) for t in self.traces)) - self.relaxed
        entries = {(where, name, arg, i) for t in self.traces for where, name, arg, i in sizes.changed_sizes(t, trace)
                   if i not in self.dynamic_sizes.get((where, name, arg), ())}
        if not new and not entries:
            return False
        self.relaxed |= new
        # Tracing starts again: fed dims seen to change so far stay dynamic
        # in the new traces (they may all see one size and specialize it).
        for t in self.traces:
            for site, d in relax.changed_feed_dims(t, trace) | relax.changed_feed_dims(self.traces[0], t):
                self.dynamic_feeds[site] = self.dynamic_feeds.get(site, frozenset()) | {d}
        for where, name, arg, i in entries:
            self.dynamic_sizes[(where, name, arg)] = self.dynamic_sizes.get((where, name, arg), frozenset()) | {i}
        if new:
            self._log(f"relaxing changing scalars to feeds: {relax.describe(new)}; tracing again")
        if entries:
            self._log("relaxing changing size arguments: " + ", ".join(
                sorted({f"{name}.{arg}[{i}]" for _, name, arg, i in entries})) + "; tracing again")
        self._restart_tracing()
        return True

    def _merge(self, trace: Trace) -> Optional[bool]:
        """Merges `trace` into the TraceGraph; returns whether the graph
        changed, or None after giving up (eager from now on)."""
        for site, counts in loops.trip_counts(ev.loops for ev in trace.events if moves_loops(ev)).items():
            self.loop_trips.setdefault(site, set()).add(counts)
        dynamic = {site for site, seqs in self.loop_trips.items()
                   if _trips_vary(seqs) and site not in self.blocked_loops}
        if dynamic != self.dynamic_loops:
            # A loop's trip count varied: it becomes a loop of the graph
            # (terra.loop_* markers) in every trace, so the TraceGraph is
            # built again from all traces.
            self._log(f"{len(dynamic)} program loop(s) with varying trip counts become graph loops")
            self.dynamic_loops = dynamic
            return self._rebuild(trace)
        try:
            r = self._add(trace, len(self.traces))
        except _MergeFailure as failure:
            return self._unroll_or_give_up(trace, str(failure))
        self.traces.append(trace)
        return bool(r["changed"])

    def _rebuild(self, trace: Trace) -> Optional[bool]:
        """A new TraceGraph from all traces so far and `trace`."""
        self.session = None
        self.keys.clear()
        try:
            for i, t in enumerate(self.traces + [trace]):
                self._add(t, i)
        except _MergeFailure as failure:
            return self._unroll_or_give_up(trace, str(failure))
        self.traces.append(trace)
        return True

    def _unroll_or_give_up(self, trace: Trace, failure: str) -> Optional[bool]:
        """A trace could not be merged: with graph loops, falls back to
        unrolling them (the graph as without loop markers); without, runs
        eagerly from now on."""
        if not self.dynamic_loops:
            self._go_eager(failure)
            return None
        self._log(f"graph loops cannot express the traces ({failure}); unrolling them")
        self.blocked_loops |= self.dynamic_loops
        self.dynamic_loops = set()
        return self._rebuild(trace)

    def _add(self, trace: Trace, index: int) -> dict:
        """Adds one trace to the session and learns its event keys; raises
        _MergeFailure if it cannot be merged."""
        if self.session is None:
            self.session = native.load().Session()
        text = module_text([trace], [f"iter{index}"], self.dynamic_loops)
        r = self.session.add_trace(text)
        if r["error"]:
            raise _MergeFailure(f"merging the trace failed: {r['error']}")
        if not r["coverable"]:
            raise _MergeFailure("the step's data flow cannot be expressed as one graph")
        layout = trace.layout(self.dynamic_loops)
        keys = r["keys"]
        assert len(keys) == len(layout), "trace events and ops out of step"
        for slot, k in zip(layout, keys):
            if k < 0:
                continue
            if isinstance(slot, tuple):
                if slot[0] == "begin":
                    self.keys[("loop", slot[1])] = k
                continue
            ev = trace.events[slot]
            self.keys[op_key(ev)] = k
            if isinstance(ev, OpEvent) and ev.call is not None:
                self.host_calls[tuple(self.session.key_name_and_args(k))] = ev.call
            elif isinstance(ev, StateEvent):
                self.state_types[ev.name] = ev.type
        return r

    def _compile(self, keep_stages: bool = False) -> None:
        """Compiles the TraceGraph; calls while it compiles in the background
        are recorded (up to _PENDING_MAX) and merged when it is done."""
        self._log(f"compiling ({self.session.num_nodes} TraceGraph nodes"
                  f"{', in the background' if self.compile_in_background else ''})")
        self.graph = self.cursor = None
        job = _BackgroundCompile(self.session, self.cache_dir, self.max_duplication, keep_stages,
                                 self.graph_device)
        if self.compile_in_background and not keep_stages:
            self._compiling = job
            self._pending = []
            self.phase = "compiling"
            job.start()
            return
        job.run()
        self._install(job.result())

    def wait_compiled(self) -> None:
        """Waits for compilations running in the background (if any; the
        traces recorded meanwhile may start another) and installs the
        graph; the next call co-executes."""
        while self.phase == "compiling":
            self._install(self._compiling.result(wait=True))

    def _eager_while_compiling(self, args: tuple, kwargs: dict) -> Any:
        """A call while the graph compiles: the step runs eagerly, as it is,
        recorded for the first _PENDING_MAX calls (the TraceGraph is the
        compiler's until it is done: the traces wait, _merge_pending)."""
        if self._pending is not None and len(self._pending) < _PENDING_MAX:
            with _host_threads(1):
                result, trace = self._recorded_call(args, kwargs, "compiling")
            self._pending.append(trace)
            return result
        start = time.perf_counter()
        self.stats.eager_iterations += 1
        try:
            with _host_threads(1):
                return self.fn(*args, **kwargs)
        finally:
            elapsed = time.perf_counter() - start
            self.stats.host_exec_s += elapsed
            self.stats.steps.append({"phase": "compiling", "host_exec_s": elapsed})

    def _install(self, outcome: tuple) -> None:
        """Makes a finished compilation's graph the one calls co-execute."""
        self._compiling = None
        graph, stages, error, elapsed = outcome
        self.stats.compile_time_s += elapsed
        if error is not None:
            self._go_eager(f"compiling the graph failed:\n{error}")
            return
        # An op the graph leaves to the host must have a way to run there:
        # an op the front end made itself (a relaxed scalar's tensor form,
        # relax.py) has none and must be lowered. Said now, not as a graph
        # failure at every step.
        missing = sorted({name for name, args in graph.host_ops if (name, args) not in self.host_calls})
        if missing:
            self._go_eager("compiling the graph failed: the graph leaves " + ", ".join(missing) +
                           " to the host, which has no implementation recorded for that form"
                           " (an op rewritten to take a relaxed scalar has no lowering)")
            return
        keep_stages = stages is not None
        self.graph = graph
        self.stages = dict(stages) if keep_stages else self.stages
        self.cursor = self.session.cursor()
        self.tapes = {}  # argument shapes -> the last validated iteration's tape (tape.py)
        self.host_dynamic = {}  # argument shapes -> host tensor number -> dims its tapes relax
        self._node_shapes = {}
        self.unrolled = set(self.session.unrolled_loops)
        self.state_names = list(graph.state_names)
        self.host_op_names = [name for name, _ in graph.host_ops]
        self.host_executor = _host_executor(self) if graph.host_ops else None
        self.phase = "coexec"
        self._log(f"-> co-execution (compiled in {elapsed:.2f} s"
                  f"{', cached' if graph.loaded_from_cache else ''}"
                  f"{', host ops: ' + ', '.join(self.host_op_names) if self.host_op_names else ''})")
        if self._pending is not None:
            self._merge_pending()

    def node_shape(self, node: int, result: int) -> list[int]:
        """The compiled graph's shape of a node's result (-1: a dynamic dim)."""
        shape = self._node_shapes.get((node, result))
        if shape is None:
            shape = self._node_shapes[(node, result)] = list(self.session.node_shape(node, result))
        return shape

    def shape_fits(self, node: int, shape: Any) -> bool:
        """A fed tensor of `shape` fits the compiled graph's feed `node`."""
        want = self.node_shape(node, 0)
        return len(want) == len(shape) and all(w < 0 or w == d for w, d in zip(want, shape))

    def state_values(self, tensors: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        """`state_value` of every state the graph reads, in order: when
        every slot holds a plain tensor (the common case), one lookup each
        at C speed instead of a Python call each (570 states: YOLOv3)."""
        values = list(map(tensors.get, self.state_names))
        if set(map(type, values)) <= _PLAIN_STATE:
            return values
        return [self.state_value(name, tensors) for name in self.state_names]

    def state_value(self, name: str, tensors: dict[str, torch.Tensor]) -> torch.Tensor:
        """The tensor the graph reads as state `name` (a placeholder of the
        traced type when the program holds none: the graph then never
        reads it on the path validation allows)."""
        t = tensors.get(name)
        if t is None or isinstance(t, Placeholder):
            t = self._dummies.get(name)
            if t is None:
                ty = self.state_types[name]
                t = self._dummies[name] = torch.zeros(ty.shape, dtype=ty.dtype)
        return t

    def _host_exec(self, op_id: int, arrays: list) -> list:
        """Runs an op the graph has no lowering for (on the runner thread)."""
        name, args = self.graph.host_ops[op_id]
        call = self.host_calls.get((name, args))
        if call is None:
            raise RuntimeError(f"no host implementation recorded for {name} {args}")
        func, recipe = call
        # Inputs are views of the graph's buffers: an op that writes in
        # place works on copies (the graph's values are immutable), and a
        # result that aliases an input is copied (the graph may reuse that
        # buffer while the result is still in use).
        tensors = [to_torch(a) for a in arrays]
        written_args = {aname for _, aname, _, _, writes in tracing.op_info(func).args if writes}
        if written_args:
            tensors = [t.clone() for t in tensors]
        inputs = {_storage_ptr(t) for t in tensors}
        operand_tensors = list(tensors)  # symbolic sizes refer to these
        pos: list = []
        kw: dict = {}
        written: list = []
        for arg_name, kwarg_only, kind, value in recipe:
            if kind == "t":
                v = tensors.pop(0)
            elif kind == "tl":
                v, tensors = tensors[:value], tensors[value:]
            else:
                v = sizes.resolve(value, operand_tensors)
            if arg_name in written_args and kind in ("t", "tl"):
                written += [v] if kind == "t" else v
            if kwarg_only:
                kw[arg_name] = v
            else:
                pos.append(v)
        with torch.no_grad():
            if name in _HOST_VIEW_OPS:
                # The recorded strides describe the traced tensor's layout,
                # not this buffer's: a view op means its value, a reshape.
                out = pos[0].reshape(pos[1])
            else:
                out = func(*pos, **kw)
        if out is None or (isinstance(out, (tuple, list)) and not out):
            # An in-place op that returns nothing (torch 2.x's
            # `_foreach_add_.Tensor`): its results are the tensors it wrote,
            # as the tracer recorded them (Tracer._record).
            out = written
        outs = [out] if isinstance(out, torch.Tensor) else [t for t in out if isinstance(t, torch.Tensor)]
        specs = []
        for t in outs:
            t = t.contiguous()
            if _storage_ptr(t) in inputs:
                t = t.clone()
            specs.append(tensor_spec(t))
        return specs

    def _eager_call(self, reason: str, site: str, args: tuple, kwargs: dict) -> Any:
        """One call run eagerly and untraced, counted as a fallback."""
        it = self.stats.tracing_iterations + self.stats.coexec_iterations + self.stats.eager_iterations
        self.stats.fallbacks.append(Fallback(it, reason, site))
        self.stats.eager_iterations += 1
        self._log(f"eager call: {reason}")
        return self.fn(*args, **kwargs)

    def _coexec(self, args: tuple, kwargs: dict) -> Any:
        start = time.perf_counter()
        set_placeholder_device(self.device)
        backward.install()
        try:
            ex = CoExecutor(self, self.registry, args, kwargs, sys._getframe(), self.serialized)
        except StateUnreadable as exc:
            return self._eager_call(str(exc), "<state>", args, kwargs)
        # Freeing a step's records (its placeholders, entries, recorder)
        # costs the host ~0.5-1 ms of deallocation. The step's CoExecutor is
        # handed to the next one, which drops it while it waits for its own
        # run's tail (CoExecutor.retired, replay._wait_run), when the host
        # has nothing else to do; a step that does not get there frees it
        # when it returns.
        ex.retired, self._retired = self._retired, None
        # A replay runs no torch compute on the host but its random numbers
        # (serial kernels) and copies nothing (Run.fetch_into): torch keeps
        # its threads unless the iteration leaves its tape (CoExecutor.
        # _leave_fast), since setting them back costs up to ~6 ms.
        with _host_threads(1, now=not ex.fast) as eager_threads, _gil_handoff(self.host_executor is not None):
            ex.eager_threads = eager_threads
            try:
                return self._coexec_with(ex, start, args, kwargs)
            finally:
                ex.release()
                ex.retired = None
                # The run's buffers go now, freed by the runner thread off
                # the host's path (Run.retire; one that has not ended is
                # cancelled as it is dropped); only Python records wait.
                if ex.run is not None:
                    ex.run.retire()
                ex.run = None
                # The function holds its last co-executor (`_retired`): one
                # that held the function back would make a cycle, and a
                # function the program drops (its compiled graph, its
                # runner thread) would wait for the cyclic collector.
                ex.compiled = None
                self._retired = ex

    def _coexec_with(self, ex: CoExecutor, start: float, args: tuple, kwargs: dict) -> Any:
        it = self.stats.tracing_iterations + self.stats.coexec_iterations + self.stats.eager_iterations
        ex.relaxed = self.relaxed
        ex.dynamic_sizes = self.dynamic_sizes
        ex.speculate = True
        try:
            result = _run_step(ex, self.fn, args, kwargs)
        except BaseException as exc:
            # Eager would have run the ops before the exception: replay them
            # so state is exactly as eager leaves it, then re-raise.
            ex._deviate("the step raised an exception")
            self._failed_iteration(ex, it, f"the step raised {type(exc).__name__}", "<step>")
            raise
        try:
            trace = ex.end(result)
        except Exception as exc:
            # An op the graph ran failed (e.g. an index out of range): its
            # replay raised the eager error; state was not committed.
            site = user_line(ex.graph_error[2] if ex.graph_error else None)
            self._failed_iteration(ex, it, f"the graph raised {type(exc).__name__}", site)
            raise
        wall = time.perf_counter() - start
        status = ex.run_result or ("cancelled", "", 0.0, 0.0, 0.0)
        _, _, g_exec, g_stall, h_stall = status
        h_stall += ex.end_wait_s
        in_place = ex.run.in_place_commits() if ex.run is not None and status[0] == "ok" else 0
        self.stats.commits_in_place += in_place
        step = {"phase": "coexec", "host_exec_s": max(wall - h_stall, 0.0), "host_stall_s": h_stall,
                "commits_in_place": in_place,
                "graph_exec_s": g_exec, "graph_stall_s": g_stall,
                "graph_reads": ex.graph_reads, "host_reads": ex.host_reads,
                "replayed": ex.fast, "replayed_entries": ex.pos, "backward_macros": ex.backward_macros,
                "backward_validations": ex.backward_validations}
        self.stats.coexec_iterations += 1
        self.stats.replayed_iterations += ex.fast
        self.stats.host_exec_s += step["host_exec_s"]
        self.stats.host_stall_s += h_stall
        self.stats.graph_exec_s += g_exec
        self.stats.graph_stall_s += g_stall
        if ex.deviation is not None:
            reason, site = ex.deviation
            where = user_line(site)
            self.stats.fallbacks.append(Fallback(it, reason, where))
            step["fallback"] = f"{reason} at {where}"
            self._log(f"iteration {it}: fallback: {reason} at {where}")
            _normalize_state(self.registry)
            if not ex.unmerged:
                self._after_trace(trace, tracing_phase=False)
        self.stats.steps.append(step)
        lost: list = []
        out = _with_values(result, lost)
        if lost:
            backward.watch_returned(self, lost, coexec=True)
        return out


    def _failed_iteration(self, ex: CoExecutor, it: int, reason: str, site: str) -> None:
        """Book-keeping for an iteration that ends in an exception (after
        the replay): state holds values, the fallback is recorded."""
        ex.backward.close()
        _normalize_state(self.registry)
        self.stats.coexec_iterations += 1
        self.stats.fallbacks.append(Fallback(it, reason, site))


def _host_executor(fn: TerraFunction) -> Callable[[int, list], list]:
    """`fn._host_exec` for the runtime's host-op callbacks, through a weak
    reference: the bound method held by `fn` itself would be a cycle (a
    dropped function, its compiled graph and runner thread, would wait
    for the cyclic collector)."""
    ref = weakref.ref(fn)

    def execute(op_id: int, arrays: list) -> list:
        f = ref()
        if f is None:
            raise RuntimeError("terra: a host op of a dropped terra.function")
        return f._host_exec(op_id, arrays)
    return execute


def _check_device(device: Any) -> str:
    """`device` of `terra.function` as "cpu" or "cuda" (the graph's backend:
    the CPU pipeline, or the GPU pipeline with device memory, docs/gpu.md).
    "cuda" needs a CUDA device that torch sees; the program's parameters,
    optimizer state and inputs are then CUDA tensors, which the graph reads
    and the commit writes in place."""
    try:
        parsed = torch.device(device) if isinstance(device, (str, torch.device)) else None
    except RuntimeError:
        parsed = None
    if parsed is None or parsed.type not in ("cpu", "cuda"):
        raise ValueError(f"terra.function(device={device!r}): the device is 'cpu' or 'cuda'")
    name = parsed.type
    if name == "cuda" and parsed.index not in (None, 0):
        raise ValueError(f"terra.function(device={device!r}): graphs run on CUDA device 0 "
                         "(select another one with CUDA_VISIBLE_DEVICES)")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"terra.function(device={device!r}): torch sees no CUDA device here "
                           "(torch.cuda.is_available() is False); use device='cpu'")
    return name


def _check_state_device(registry: StateRegistry, device: str) -> None:
    """The graph reads and writes the program's persistent state in place on
    its device: state elsewhere is a clear error at the first call, not a
    failed copy at the first commit."""
    wrong = [f"{name} ({t.device})" for name, t in registry.tensors().items() if t.device.type != device]
    if wrong:
        more = f" and {len(wrong) - 3} more" if len(wrong) > 3 else ""
        raise ValueError(f"terra.function(device={device!r}): the program's parameters, buffers and "
                         f"optimizer state must be on {device}, but {', '.join(wrong[:3])}{more} are not "
                         f"(move the model with .to({device!r}) before the first step)")


class _BackgroundCompile:
    """One compilation of a session's graph, on a thread of its own or on
    the caller's. The native compiler releases the GIL, so Python keeps
    running the program; nothing touches the session until it is done
    (calls in the meantime run eagerly; the first few are recorded, and
    their traces merged once it is done)."""

    def __init__(self, session: Any, cache_dir: str, max_duplication: int, keep_stages: bool,
                 device: str = "cpu"):
        self._args = (cache_dir, max_duplication, keep_stages, device)
        self._session = session
        self._outcome: Optional[tuple] = None
        self._thread: Optional[threading.Thread] = None

    def start(self) -> None:
        # Not a daemon: the interpreter waits for the compiler before it
        # exits. Exiting under it would destroy LLVM's global state while
        # the thread still uses it (a crash at exit).
        self._thread = threading.Thread(target=self.run, name="terra-compile", daemon=False)
        self._thread.start()

    def run(self) -> None:
        start = time.perf_counter()
        graph = stages = error = None
        try:
            graph, stages = self._session.compile(*self._args)
        except Exception as exc:  # reported by the caller's thread
            error = exc
        if not self._args[2]:
            stages = None
        self._outcome = (graph, stages, error, time.perf_counter() - start)

    def done(self) -> bool:
        return self._outcome is not None

    def result(self, wait: bool = False) -> tuple:
        if wait and self._thread is not None:
            self._thread.join()
        assert self._outcome is not None, "the compilation has not finished"
        return self._outcome


@contextlib.contextmanager
def _host_threads(n: int, now: bool = True) -> Iterator[int]:
    """torch's intra-op threads while a step co-executes. The host computes
    little then (random numbers, tiny host-evaluated ops, the recorder's
    meta results), but each of its parallel regions leaves torch's
    OpenMP workers spinning for a while afterwards, on the cores the graph
    runs on (measured: co-executed steps 25-40% slower). Yields the
    caller's setting, which comes back after the step, or at a deviation
    (the rest of the iteration runs eagerly: CoExecutor._deviate)."""
    before = torch.get_num_threads()
    if before == n:
        yield before
        return
    if now:  # else the co-executor sets it when it starts recording
        torch.set_num_threads(n)
    try:
        yield before
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


@contextlib.contextmanager
def _gil_handoff(host_ops: bool) -> Iterator[None]:
    """While a graph with host ops (ops the graph calls back into torch
    for, on its runner thread) co-executes: the interpreter hands the GIL
    to a waiting thread after 0.5 ms instead of 5 ms. The host thread runs
    Python all the time, so each callback otherwise waited up to 5 ms for
    the GIL (Faster R-CNN's grid sampling: ~10% of its step)."""
    if not host_ops:
        yield
        return
    before = sys.getswitchinterval()
    sys.setswitchinterval(min(before, _HOST_OP_SWITCH_INTERVAL))
    try:
        yield
    finally:
        sys.setswitchinterval(before)


_HOST_OP_SWITCH_INTERVAL = 0.0005


def _trips_vary(seqs: set[tuple[int, ...]]) -> bool:
    """Whether a loop's runs took different trip counts in different
    traces: two sequences (run order) that differ where both have a run. A
    trace with fewer runs (a branch that skips one) does not make a loop
    vary."""
    seqs = list(seqs)
    return any(x != y for i, a in enumerate(seqs) for b in seqs[i + 1:] for x, y in zip(a, b))


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector is paused while a step is traced or
    co-executed: the recorder allocates several small objects per op, and
    the collections they trigger walk everything the program holds (15% of
    a co-executed step). Cycles made during the step are collected by the
    next collection after it. (The step's records are not dropped early
    when a collection is due at the step's end: the next step frees them,
    in its waits for the graph where it has any, and those frees balance
    the collector's count against the step's own allocations; dropped at
    the end instead, a step's allocations alone put the count over the
    threshold at every end after the first, measured on DCGAN.)"""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _multi_tensor_safe(opt: torch.optim.Optimizer, group: dict) -> bool:
    """Whether torch 1.13's multi-tensor (`foreach`) update of `opt` gives
    exactly what its per-parameter update gives, user-visible effects
    included, for the parameters of `group`. On the CPU, `_foreach_` ops
    run the same per-tensor kernels, so values are bit for bit the same;
    but the multi-tensor Adam adds weight decay into `p.grad` in place and
    nesterov SGD without weight decay adds the momentum into it."""
    if group.get("foreach") is not None or group.get("differentiable") or group.get("capturable"):
        return False
    if not dense_cpu_real(group["params"]):
        return False
    kind = type(opt)
    if kind is torch.optim.SGD:
        return not (group.get("nesterov") and group.get("weight_decay", 0) == 0)
    if kind is torch.optim.Adam:
        return group.get("weight_decay", 0) == 0
    return kind is torch.optim.AdamW


def dense_cpu_real(params: list) -> bool:
    """Whether every parameter, and its `.grad` where it has one, is a
    dense CPU tensor of a real element type: read from their C++ side where
    the dispatch hook is built (TensorState.cpp; five Python attribute reads
    per parameter, every step, cost YOLOv3 ~140 us and Faster R-CNN ~45)."""
    native_check = native.optional_function("dense_cpu_real", dispatch=True)
    if native_check is not None and type(params) is list:
        answer = native_check(params)
        if answer is not None:
            return answer
    return all(p.layout is torch.strided and not p.is_complex() and p.device.type == "cpu" and
               (p.grad is None or p.grad.layout is torch.strided) for p in params)


@contextlib.contextmanager
def _multi_tensor_updates(optimizers: Sequence[torch.optim.Optimizer]) -> Iterator[None]:
    """While a step is traced or co-executed, optimizers that leave the
    choice of implementation to torch (`foreach=None`) use the multi-tensor
    one where it is exactly equivalent (`_multi_tensor_safe`): one
    `_foreach_` op per update over all parameters instead of one op per
    parameter, which is most of the host's ops in a training step. The
    setting is restored right after the step, so `state_dict()` and
    `param_groups` look as the user left them. torch 1.13 only: later
    versions choose differently and change the multi-tensor code."""
    changed: list[dict] = []
    if _TORCH_1_13:
        for opt in optimizers:
            groups = [g for g in opt.param_groups if _multi_tensor_safe(opt, g)]
            if groups and len(groups) == len(opt.param_groups) and opt.defaults.get("foreach") is None:
                changed.append(opt.defaults)
            changed += groups
    for d in changed:
        d["foreach"] = True
    try:
        yield
    finally:
        for d in changed:
            d["foreach"] = None


_TORCH_1_13 = torch.__version__.startswith("1.13")


def _run_step(recorder: Any, fn: Callable, args: tuple, kwargs: dict) -> Any:
    """Runs `fn` under `recorder` (a tracer or a co-executor) with the
    materialization hooks installed; records what it returns."""
    if tracing._ACTIVE is not None:
        raise RuntimeError("a terra.function step is already running in this process "
                           "(nested or concurrent steps are not supported)")
    tracing._ACTIVE = recorder
    tracing._install_hooks()
    try:
        with _multi_tensor_updates(recorder.registry.optimizers), recorder, recorder.loop_counter:
            result = fn(*args, **kwargs)
    except BaseException:
        if type(recorder) is tracing._Recorder:
            recorder.backward.close()
        raise
    finally:
        tracing._remove_hooks()
        tracing._ACTIVE = None
    if type(recorder) is tracing._Recorder:
        recorder.record_return(result)
        recorder.finish()
    return result


def _normalize_state(registry: StateRegistry) -> None:
    """After an eager finish: state that holds placeholders gets their values."""
    for slot in registry.slots():
        t = slot.get()
        if isinstance(t, Placeholder):
            slot.set(t.terra_real)




# -- finding the persistent state ------------------------------------------------------
def _discover_state(fn: Callable, args: tuple, modules: Optional[Sequence[torch.nn.Module]],
                    optimizers: Optional[Sequence[torch.optim.Optimizer]]) -> StateRegistry:
    found_m: list[torch.nn.Module] = list(modules or [])
    found_o: list[torch.optim.Optimizer] = list(optimizers or [])
    if modules is not None and optimizers is not None:
        return StateRegistry(found_m, found_o)
    finder = _StateFinder(found_m if modules is None else None, found_o if optimizers is None else None)
    finder.visit_function(fn, 0)
    for a in args:
        if isinstance(a, (torch.nn.Module, torch.optim.Optimizer)):
            finder.visit(a, 0)
    # Keep only top-level modules (submodules are named through them).
    subs = {id(s) for m in found_m for s in m.modules() if s is not m}
    found_m = [m for m in found_m if id(m) not in subs]
    return StateRegistry(found_m, found_o)


class _StateFinder:
    """The walk of `_discover_state`: modules and optimizers reachable from
    the step function (its globals, closure and bound object) and from
    what those hold, two levels deep. `modules` / `optimizers`: where to
    put what is found, None for a kind given explicitly."""

    def __init__(self, modules: Optional[list], optimizers: Optional[list]):
        self.modules, self.optimizers = modules, optimizers
        self.seen: set[int] = set()

    def visit(self, obj: Any, depth: int) -> None:
        if id(obj) in self.seen or depth > 2:
            return
        self.seen.add(id(obj))
        if isinstance(obj, torch.nn.Module):
            if self.modules is not None:
                self.modules.append(obj)
            return
        if isinstance(obj, torch.optim.Optimizer):
            if self.optimizers is not None:
                self.optimizers.append(obj)
            return
        if isinstance(obj, (types.ModuleType, type, int, float, str, bool, torch.Tensor)) or obj is None:
            return
        if isinstance(obj, (list, tuple)):
            for x in obj:
                self.visit(x, depth + 1)
            return
        if isinstance(obj, dict):
            for x in obj.values():
                self.visit(x, depth + 1)
            return
        if isinstance(obj, (types.FunctionType, types.MethodType)):
            self.visit_function(obj, depth + 1)
            return
        attrs = getattr(obj, "__dict__", None)
        if isinstance(attrs, dict):
            for x in attrs.values():
                self.visit(x, depth + 1)

    def visit_function(self, f: Any, depth: int) -> None:
        if isinstance(f, types.MethodType):
            self.visit(f.__self__, depth)
            f = f.__func__
        code = getattr(f, "__code__", None)
        if code is None:
            return
        names: set[str] = set()
        stack = [code]
        while stack:
            c = stack.pop()
            names.update(c.co_names)
            stack.extend(x for x in c.co_consts if isinstance(x, types.CodeType))
        g = getattr(f, "__globals__", {})
        for n in sorted(names):
            if n in g:
                self.visit(g[n], depth)
        for cell in getattr(f, "__closure__", None) or ():
            try:
                self.visit(cell.cell_contents, depth)
            except ValueError:
                pass


# -- public API ----------------------------------------------------------------------------
def function(fn: Optional[Callable] = None, **options: Any) -> Any:
    """`@terra.function` or `@terra.function(serialized=True, ...)`."""
    if fn is None:
        return lambda f: TerraFunction(f, **options)
    return TerraFunction(fn, **options)


def stats(fn: TerraFunction) -> dict:
    """What happened so far: phases, fallbacks (reason and site each),
    regenerations, compile time, host/graph exec and stall times (totals and
    per step)."""
    if not isinstance(fn, TerraFunction):
        raise TypeError("terra.stats expects a function decorated with @terra.function")
    return fn.stats.as_dict(fn)


# View ops whose arguments carry strides of the traced layout; on the host
# they run as reshapes of the value (the graph has value semantics).
_HOST_VIEW_OPS = frozenset({"aten._reshape_alias"})


def _storage_ptr(t: torch.Tensor) -> int:
    return tracing.storage_of(t).data_ptr()


def _with_values(result: Any, lost: Optional[list] = None) -> Any:
    """The step's result with each placeholder that has its value replaced
    by that value, so the caller gets ordinary tensors (lists, tuples,
    dicts and namedtuples are walked; other objects are returned as they
    are, and their placeholders read their values on use). The values
    whose placeholder had autograd history are appended to `lost`."""
    def swap(x: Any) -> Any:
        if isinstance(x, Placeholder) and x._terra_real is not None:
            if lost is not None and x.grad_fn is not None:
                lost.append(x._terra_real)
            return x._terra_real
        return x
    return tree_map(swap, result)


# How long terra.explain lets graphviz lay out the TraceGraph.
EXPLAIN_DOT_TIMEOUT_S = 30.0


def explain(fn: TerraFunction, directory: Optional[str] = None) -> dict[str, str]:
    """Writes the TraceGraph (DOT, and PNG when graphviz is installed) and
    the MLIR after each stage into `directory`; returns the paths."""
    if not isinstance(fn, TerraFunction):
        raise TypeError("terra.explain expects a function decorated with @terra.function")
    if fn.session is None:
        raise RuntimeError("terra.explain: the function has not been traced yet; call it first")
    fn.wait_compiled()  # the session is the compiler's until then
    out = Path(directory or tempfile.mkdtemp(prefix="terra-explain-"))
    out.mkdir(parents=True, exist_ok=True)
    paths: dict[str, str] = {}
    dot = out / "tracegraph.dot"
    dot.write_text(fn.session.trace_graph_dot())
    paths["tracegraph.dot"] = str(dot)
    if shutil.which("dot"):
        # Layout of a graph with thousands of nodes can take graphviz hours:
        # the PNG is skipped after a bounded wait (the DOT file is there).
        png = out / "tracegraph.png"
        try:
            subprocess.run(["dot", "-Tpng", str(dot), "-o", str(png)], check=False,
                           capture_output=True, timeout=EXPLAIN_DOT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            png.unlink(missing_ok=True)
        if png.exists():
            paths["tracegraph.png"] = str(png)
    (out / "traces.mlir").write_text(module_text(fn.traces))
    paths["traces.mlir"] = str(out / "traces.mlir")
    try:
        _, stages = fn.session.compile(fn.cache_dir, fn.max_duplication, True, fn.graph_device)
    except RuntimeError as exc:
        (out / "error.txt").write_text(str(exc))
        paths["error.txt"] = str(out / "error.txt")
        stages = {"trace_graph": fn.session.trace_graph_text()}
    for key, fname in (("trace_graph", "1-tracegraph.mlir"), ("graph", "2-graph.mlir"),
                       ("linalg", "3-linalg.mlir"), ("lowered", "4-llvm.mlir")):
        if stages.get(key):
            (out / fname).write_text(stages[key])
            paths[fname] = str(out / fname)
    return paths

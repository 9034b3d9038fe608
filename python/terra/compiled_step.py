"""A compiled-step runner for tests: trace, merge, then run the graph.

    step = CompiledStep(train_step, modules=[model], optimizers=[opt], workdir=tmp)
    for x, y in batches:
        loss, = step(x, y)        # the values the step materialized, in order

The first calls run the step eagerly under the tracer, until the latest
trace is covered by the TraceGraph of all traces so far (merging it
changed nothing: spec 1.3, at least two traces). Then the covered trace is
compiled (`terra-opt -terra-merge-traces -terra-assign-cases`) and every
later call runs that graph with `terra-run` instead of the step: its feeds
come from the call's tensor arguments, its state from the registered
tensors, and after the run the fetched final state is committed into those
tensors (spec 4.6 item 2, option b) and the materialized values returned.

This is a test vehicle for the compiled path, not the co-execution front
end (issue 4): later calls do not run the Python step at all, so they
assume the program repeats its last traced path exactly (no validation, no
case selects, no Python side effects, feeds only from the call arguments or
constants that did not change while tracing). It refuses, naming the
reason, what it cannot run faithfully: a trace with recording problems, a
feed Python computes anew each iteration, and ops without a lowering
(terra-run has no host executor for them).
"""
from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np
import torch

from . import toolchain
from .trace import (ArgSource, ConstSource, Materialization, OpEvent, StateSource, Trace,
                    ValueRef, module_text)
from .tracing import StepTracer


class NotCompilable(RuntimeError):
    """The traced program cannot be run from the graph faithfully."""


class MissingLowering(NotCompilable):
    """Ops of the graph that no lowering handles (they would need a host
    executor, which terra-run does not have)."""

    def __init__(self, ops: Sequence[str]):
        self.ops = list(ops)
        super().__init__("missing lowering: " + ", ".join(self.ops))


class CompiledStep:
    """Runs `fn` eagerly while tracing, then from its compiled graph.

    `workdir` holds the graph, the object cache and each compiled step's
    .npy files (default: a new temporary directory, kept for inspection).
    """

    def __init__(self, fn: Callable[..., Any], modules: Sequence[torch.nn.Module] = (),
                 optimizers: Sequence[torch.optim.Optimizer] = (), *, min_traces: int = 2,
                 max_traces: int = 4, workdir: Optional[Union[str, Path]] = None):
        self.tracer = StepTracer(fn, modules, optimizers)
        self.registry = self.tracer.registry
        self.min_traces = max(2, min_traces)
        self.max_traces = max_traces
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="terra-step-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.phase = "tracing"
        self.trace_graphs: list[str] = []  # TraceGraph of the first k traces, k = 1, 2, ...
        self.graph: Optional[str] = None
        self.steps_traced = 0
        self.steps_compiled = 0
        self._trace: Optional[Trace] = None
        self._feed_ids: list[int] = []
        self._fetch_ids: dict[ValueRef, int] = {}
        self._state_names: list[str] = []

    # -- phases ------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> list[Any]:
        """One step; returns what the step materialized (e.g. `[loss.item()]`)."""
        if self.phase == "compiled":
            return self._run(args, kwargs)
        self.tracer(*args, **kwargs)
        self.steps_traced += 1
        trace = self.tracer.traces[-1]
        self._after_trace()
        return list(trace.materialized)

    def _after_trace(self) -> None:
        traces = self.tracer.traces
        if traces[-1].problems:
            raise NotCompilable("the step ran eagerly, but its trace cannot be compiled:\n  "
                                + "\n  ".join(traces[-1].problems))
        if any(f.kind == "arg" for f in traces[-1].fetches):
            raise NotCompilable("the step writes its tensor arguments in place; this runner does not "
                                "commit into them (the co-executing front end does)")
        self.trace_graphs.append(toolchain.trace_graph(module_text(traces)))
        if len(traces) < self.min_traces:
            return
        if toolchain.same_graph_ignoring_count(self.trace_graphs[-2], self.trace_graphs[-1]):
            self._compile(traces[-1], traces[-2])
        elif len(traces) >= self.max_traces:
            raise NotCompilable(f"{len(traces)} traces and the latest still changes the TraceGraph")

    def _compile(self, trace: Trace, previous: Trace) -> None:
        """Compiles the covered trace's path into a graph and maps its
        feed, fetch and state points."""
        self._check_constant_feeds(trace, previous)
        graph = toolchain.terra_opt(module_text([trace], ["steady"]),
                                    ["-terra-merge-traces", "-terra-assign-cases"])
        missing = toolchain.host_ops(graph)
        if missing:
            raise MissingLowering(missing)
        feed_ids = sorted({int(i) for i in re.findall(r"terra\.feed (\d+)", graph)})
        if len(feed_ids) != len(trace.feeds):
            raise NotCompilable(f"the graph has {len(feed_ids)} feeds, the trace {len(trace.feeds)}")
        fetch_ids: dict[ValueRef, int] = {}
        for f in trace.fetches:
            if isinstance(trace.producer(f.value), OpEvent) and f.value not in fetch_ids:
                fetch_ids[f.value] = len(fetch_ids)
        graph_fetches = {int(i) for i in re.findall(r"terra\.fetch (\d+)", graph)}
        if graph_fetches != set(fetch_ids.values()):
            raise NotCompilable(f"fetch points differ: graph {sorted(graph_fetches)}, "
                                f"trace {sorted(fetch_ids.values())}")
        self.graph = graph
        (self.workdir / "graph.mlir").write_text(graph)
        self._trace = trace
        self._feed_ids = feed_ids
        self._fetch_ids = fetch_ids
        self._state_names = list(dict.fromkeys(re.findall(r'terra\.state "([^"]+)"', graph)))
        self.phase = "compiled"

    @staticmethod
    def _check_constant_feeds(trace: Trace, previous: Trace) -> None:
        """A feed that is neither a call argument nor constant while tracing is
        computed by Python each iteration: only co-execution can feed it."""
        prev = previous.feeds
        for k, feed in enumerate(trace.feeds):
            if not isinstance(feed.source, ConstSource):
                continue
            other = prev[k].source if k < len(prev) else None
            if not isinstance(other, ConstSource) or not torch.equal(other.value, feed.source.value):
                raise NotCompilable(f"feed {k} ({feed.type.mlir()}) is made by Python and changed between "
                                    "traced iterations; feeding it needs the co-execution front end")

    # -- compiled steps -------------------------------------------------------------
    def _run(self, args: tuple, kwargs: dict) -> list[Any]:
        trace = self._trace
        assert trace is not None and self.graph is not None
        step_dir = self.workdir / f"step{self.steps_traced + self.steps_compiled}"
        step_dir.mkdir(exist_ok=True)
        cmd = [str(self.workdir / "graph.mlir"), "--fetch-dir", str(step_dir),
               "--cache-dir", str(self.workdir / "cache")]
        for k, (feed, fid) in enumerate(zip(trace.feeds, self._feed_ids)):
            value = _host_value(feed.source, args, kwargs)
            if tuple(value.shape) != feed.type.shape or value.dtype != feed.type.dtype:
                raise NotCompilable(f"feed {k} is {value.dtype}{list(value.shape)} now, "
                                    f"{feed.type.mlir()} when traced; this runner does not retrace")
            path = step_dir / f"feed{k}.npy"
            np.save(path, _numpy(value))
            cmd += ["--feed", f"{fid}={path}"]
        state_now = {name: t for name, t in self.registry.tensors().items() if name in self._state_names}
        for i, name in enumerate(self._state_names):
            if name not in state_now:
                raise NotCompilable(f"the graph reads state {name}, which does not exist now")
            path = step_dir / f"state{i}.npy"
            np.save(path, _numpy(state_now[name]))
            cmd += ["--state", f"{name}={path}"]
        toolchain.run_tool("terra-run", cmd)
        fetched = {fid: np.load(step_dir / f"{fid}_1.npy") for fid in set(self._fetch_ids.values())}
        values = [self._materialized(m, fetched, args, kwargs) for m in trace.materializations]
        # Commit the iteration's state only now that the whole graph ran.
        for f in trace.fetches:
            if f.commit is not None:
                self.registry.slot(f.commit).set(torch.from_numpy(fetched[self._fetch_ids[f.value]].copy()))
        for name in trace.dropped_state:
            self.registry.slot(name).set(None)
        self.steps_compiled += 1
        return values

    def _materialized(self, m: Materialization, fetched: dict[int, np.ndarray],
                      args: tuple, kwargs: dict) -> Any:
        trace = self._trace
        assert trace is not None
        if m.fetch is not None:
            array = fetched[self._fetch_ids[trace.fetches[m.fetch].value]]
        else:
            assert m.host is not None
            array = _numpy(_host_value(m.host, args, kwargs, self.registry))
        return _as_python(array, m.kind)


def _host_value(source: Any, args: tuple, kwargs: dict, registry: Any = None) -> torch.Tensor:
    if isinstance(source, ArgSource):
        obj: Any = {"args": args, "kwargs": kwargs}
        for p in source.path:
            obj = obj[p]
        return obj
    if isinstance(source, ConstSource):
        return source.value
    if isinstance(source, StateSource):
        return registry.slot(source.name).get()
    raise TypeError(f"unknown value source {source!r}")


def _numpy(t: torch.Tensor) -> np.ndarray:
    # Not np.ascontiguousarray: it turns 0-d arrays into 1-d ones.
    return np.array(t.detach().cpu().numpy(), order="C", copy=True)


def _as_python(array: np.ndarray, kind: str) -> Any:
    """The fetched array as the Python value the materialization produced
    eagerly (`repr`/`format` reads return the array itself)."""
    if kind == "item":
        return array.item()
    if kind == "float":
        return float(array)
    if kind in ("int", "index"):
        return int(array)
    if kind == "bool":
        return bool(array)
    if kind == "tolist":
        return array.tolist()
    return array

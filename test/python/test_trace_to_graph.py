"""The tracer (python/terra) against the merge and case-assignment passes.

Each test runs a small PyTorch step eagerly under `terra.StepTracer`, checks
what the recorded `terra.trace` says (op names, args, provenance, sites,
state write-back), and feeds it to `terra-opt`. Eager results must be
unchanged by tracing. Needs terra-opt in TERRA_BUILD_DIR (default build/).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "python") not in sys.path:
    sys.path.insert(0, str(REPO / "python"))

import terra  # noqa: E402
from terra import toolchain  # noqa: E402
from terra.trace import ArgSource, ConstSource, OpEvent, StateEvent, StateSource  # noqa: E402


def mlp(seed: int = 0) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def make_step(model: torch.nn.Module, opt: torch.optim.Optimizer):
    def step(x: torch.Tensor, y: torch.Tensor) -> float:
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def batch(seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(3, 4, generator=g), torch.randn(3, 2, generator=g)


def traced_mlp(iterations: int = 2) -> tuple[terra.StepTracer, list[float]]:
    model, opt = mlp()
    tracer = terra.StepTracer(make_step(model, opt), [model], [opt])
    x, y = batch()
    losses = [tracer(x, y) for _ in range(iterations)]
    return tracer, losses


def trace_body(module: str, name: str) -> str:
    """The text of one terra.trace op, without its name."""
    m = re.search(rf"terra\.trace @{name} \{{\n(.*?)\n  \}}", module, re.S)
    assert m, module
    return m.group(1)


# ------------------------------------------------------------------ parsing


def test_trace_parses_and_round_trips_through_terra_opt() -> None:
    tracer, _ = traced_mlp(1)
    text = tracer.module_text()
    out = toolchain.terra_opt(text, [])
    assert "terra.trace @iter0" in out
    assert out.count("terra.op ") == len(tracer.traces[0].ops)
    # The sites survive: the step's own frame is in every forward op's location.
    assert __file__ in out


def test_tracing_does_not_change_eager_results() -> None:
    x, y = batch()
    model, opt = mlp()
    step = make_step(model, opt)
    eager = [step(x, y) for _ in range(3)]
    tmodel, topt = mlp()
    tracer = terra.StepTracer(make_step(tmodel, topt), [tmodel], [topt])
    traced = [tracer(x, y) for _ in range(3)]
    assert traced == eager
    for p, q in zip(model.parameters(), tmodel.parameters()):
        assert torch.equal(p, q) and torch.equal(p.grad, q.grad)


def test_op_names_follow_the_lowering_registry() -> None:
    tracer, _ = traced_mlp(1)
    names = tracer.traces[0].op_names()
    # The "default" overload is dropped; others are kept.
    for expected in ("aten.t", "aten.addmm", "aten.relu", "aten.mse_loss", "aten.mse_loss_backward",
                     "aten.mm", "aten.sum.dim_IntList", "aten.view", "aten.threshold_backward",
                     "aten.add_.Tensor"):
        assert expected in names, names
    assert not any(n.endswith(".default") for n in names)
    # Aliases and bookkeeping are not ops of the graph.
    assert "aten.detach" not in names and not any(n.startswith("profiler.") for n in names)
    assert terra.op_name(torch.ops.aten.addmm.default) == "aten.addmm"
    assert terra.op_name(torch.ops.aten.add.Tensor) == "aten.add.Tensor"


# ------------------------------------------------------------------ merging


def test_identical_iterations_merge_without_change() -> None:
    tracer, _ = traced_mlp(2)
    text = tracer.module_text()
    assert trace_body(text, "iter0") == trace_body(text, "iter1")
    one = toolchain.trace_graph(tracer.module_text([0]))
    two = toolchain.trace_graph(text)
    assert "traces 1" in one and "traces 2" in two
    assert one != two
    assert toolchain.same_graph_ignoring_count(one, two)  # the 2nd trace added nothing


def test_calls_from_different_places_are_the_same_program() -> None:
    """Frames of the step's caller are not part of sites."""
    model, opt = mlp()
    tracer = terra.StepTracer(make_step(model, opt), [model], [opt])
    x, y = batch()
    tracer(x, y)
    tracer(x, y)  # another line of this test
    text = tracer.module_text()
    assert trace_body(text, "iter0") == trace_body(text, "iter1")


def test_first_momentum_step_differs_and_the_third_is_covered() -> None:
    """SGD with momentum creates its buffers in the first step and reads them
    afterwards: the second trace grows the graph, the third does not."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    tracer = terra.StepTracer(make_step(model, opt), [model], [opt])
    x, y = batch()
    for _ in range(3):
        tracer(x, y)
    graphs = [toolchain.trace_graph(tracer.module_text(range(k))) for k in (1, 2, 3)]
    assert not toolchain.same_graph_ignoring_count(graphs[0], graphs[1])
    assert toolchain.same_graph_ignoring_count(graphs[1], graphs[2])
    first, third = tracer.traces[0], tracer.traces[2]
    assert not any(s.name.startswith("optim:") for s in first.states)
    assert {s.name for s in third.states if s.name.startswith("optim:")} == {
        "optim:weight:momentum_buffer", "optim:bias:momentum_buffer"}
    # Created in step 1, updated in place later: committed in both.
    for t in (first, third):
        assert "optim:weight:momentum_buffer" in t.commits.values()


# ------------------------------------------------------------------ provenance


def test_feeds_state_and_fetches_are_classified() -> None:
    tracer, losses = traced_mlp(1)
    trace = tracer.traces[0]
    # The batch arguments are the feeds, in the order the ops first read them.
    assert [f.source.path for f in trace.feeds] == [("args", 0), ("args", 1)]
    assert [f.type.shape for f in trace.feeds] == [(3, 4), (3, 2)]
    # Parameters are read as state, never fed.
    assert {s.name for s in trace.states} == {"param:0.weight", "param:0.bias", "param:2.weight",
                                             "param:2.bias"}
    # loss.item() is the first fetch, of the mse_loss result.
    loss_fetch = trace.fetches[0]
    assert loss_fetch.kind == "item" and loss_fetch.commit is None
    assert trace.producer(loss_fetch.value).name == "aten.mse_loss"
    assert trace.materialized == [losses[0]]
    assert trace.materializations[0].fetch == 0
    assert trace.problems == []


def test_inplace_state_updates_become_end_fetches() -> None:
    tracer, _ = traced_mlp(2)
    trace = tracer.traces[1]
    commits = trace.commits
    names = sorted(commits.values())
    assert names == sorted(f"{k}:{p}" for k in ("param", "grad")
                           for p in ("0.weight", "0.bias", "2.weight", "2.bias"))
    last_op = max(i for i, e in enumerate(trace.events) if isinstance(e, OpEvent))
    fetches = trace.fetches
    for pos, name in commits.items():
        f = fetches[pos]
        assert trace.events.index(f) > last_op  # written back at the end
        producer = trace.producer(f.value)
        if name.startswith("param:"):
            # The optimizer's in-place update is the state's final value.
            assert producer.name == "aten.add_.Tensor"
            state_read = trace.events[producer.inputs[0].event]
            assert isinstance(state_read, (StateEvent, OpEvent))
    # The TraceGraph marks the updates as fetch points.
    graph = toolchain.trace_graph(tracer.module_text())
    assert len(re.findall(r'op "aten\.add_\.Tensor".*fetch \[\d+\]', graph)) == 4


def test_in_place_update_rebinds_the_tensor() -> None:
    """After x.add_(), later reads of x see the add_'s result."""
    w = torch.nn.Parameter(torch.ones(3))
    holder = torch.nn.Module()
    holder.w = w

    def step(x: torch.Tensor) -> list:
        with torch.no_grad():
            w.add_(x)
            y = w * 2.0
        return y.tolist()

    tracer = terra.StepTracer(step, [holder])
    assert tracer(torch.ones(3)) == [4.0, 4.0, 4.0]
    trace = tracer.traces[0]
    add, mul = trace.ops
    assert add.name == "aten.add_.Tensor" and mul.name == "aten.mul.Tensor"
    assert trace.events[mul.inputs[0].event] is add
    assert mul.args == {"other": 2.0}  # a Python scalar in a Tensor position is an arg
    assert trace.commits == {1: "param:w"}
    assert trace.fetches[0].kind == "tolist"


def test_python_made_tensors_are_constant_feeds() -> None:
    def step(x: torch.Tensor) -> float:
        scale = torch.tensor(3.0)  # made by Python, not by a recorded op
        return float((x * scale).sum())

    tracer = terra.StepTracer(step)
    assert tracer(torch.ones(2)) == 6.0
    trace = tracer.traces[0]
    sources = [f.source for f in trace.feeds]
    assert isinstance(sources[0], ArgSource) and isinstance(sources[1], ConstSource)
    assert float(sources[1].value) == 3.0
    assert trace.fetches[0].kind == "float"


def test_materializations_are_fetches_and_not_recorded_ops() -> None:
    printed = []

    def step(x: torch.Tensor) -> None:
        y = x.relu()
        printed.append(repr(y))  # printing runs many torch ops internally
        if y.sum() > 0:  # __bool__
            printed.append(y.tolist())
        printed.append(repr(x))  # an input: the host has it, no fetch

    tracer = terra.StepTracer(step)
    tracer(torch.ones(2))
    trace = tracer.traces[0]
    assert trace.op_names() == ["aten.relu", "aten.sum", "aten.gt.Scalar"]
    assert [f.kind for f in trace.fetches] == ["repr", "bool", "tolist"]
    assert [m.kind for m in trace.materializations] == ["repr", "bool", "tolist", "repr"]
    assert isinstance(trace.materializations[-1].host, ArgSource)
    assert printed[1] == [1.0, 1.0]


def test_unchanged_state_read_by_python_is_a_host_value() -> None:
    model = torch.nn.Linear(2, 1)

    def step() -> float:
        return model.bias.item()

    tracer = terra.StepTracer(step, [model])
    tracer()
    m = tracer.traces[0].materializations[0]
    assert m.fetch is None and m.host == StateSource("param:bias")


def test_an_argument_written_in_place_is_an_end_fetch() -> None:
    def step(x: torch.Tensor) -> None:
        x.mul_(2)  # writes into an input: its final value is fetched

    tracer = terra.StepTracer(step)
    tracer(torch.randn(4, 3))
    trace = tracer.traces[0]
    assert not trace.problems
    assert [(f.kind, f.arg) for f in trace.fetches] == [("arg", ("args", 0))]

    def step_row(x: torch.Tensor) -> None:
        x[0].mul_(2)  # writes into a row: written back with select_scatter

    tracer = terra.StepTracer(step_row)
    tracer(torch.randn(4, 3))
    trace = tracer.traces[0]
    assert not trace.problems
    assert [e.name for e in trace.ops][-1] == "aten.select_scatter"
    assert [(f.kind, f.arg) for f in trace.fetches] == [("arg", ("args", 0))]

    def step_diagonal(x: torch.Tensor) -> None:
        x.diagonal().mul_(2)  # written back with diagonal_scatter

    tracer = terra.StepTracer(step_diagonal)
    tracer(torch.randn(4, 3))
    trace = tracer.traces[0]
    assert not trace.problems
    assert [e.name for e in trace.ops][-1] == "aten.diagonal_scatter"

    def step_view(x: torch.Tensor) -> None:
        x.unfold(0, 2, 2).mul_(2)  # through an unfolded view: not written back

    tracer = terra.StepTracer(step_view)
    tracer(torch.randn(4, 3))
    problems = "\n".join(tracer.traces[0].problems)
    assert "writes in place into the step's argument args/0 (shape [4, 3]) through a view of it" in problems


def test_batch_norm_running_stats_become_results_and_commits() -> None:
    # native_batch_norm updates running_mean/var in place without returning
    # them: the trace records its functional form (updated statistics as
    # results 3 and 4) and commits them at the end of the iteration; in
    # evaluation mode the statistics are only read.
    bn = torch.nn.BatchNorm1d(3)

    def step(x: torch.Tensor) -> torch.Tensor:
        return bn(x)

    tracer = terra.StepTracer(step, [bn])
    tracer(torch.randn(4, 3))
    trace = tracer.traces[0]
    assert not trace.problems
    (op,) = [o for o in trace.ops if o.name == "aten.native_batch_norm"]
    assert len(op.results) == 5 and op.results[3].shape == (3,) and op.results[4].shape == (3,)
    commits = {f.commit for f in trace.fetches if f.kind == "commit"}
    assert {"buffer:running_mean", "buffer:running_var", "buffer:num_batches_tracked"} <= commits
    bn.eval()
    tracer(torch.randn(4, 3))
    (op,) = [o for o in tracer.traces[1].ops if o.name == "aten.native_batch_norm"]
    assert len(op.results) == 3 and not tracer.traces[1].problems


# ------------------------------------------------------------------ sites and args


def test_sites_are_call_stacks_with_bytecode_offsets() -> None:
    def step(x: torch.Tensor) -> torch.Tensor:
        a = x.relu(); b = x.relu()  # noqa: E702  (one line, two sites)
        return a + b

    tracer = terra.StepTracer(step)
    tracer(torch.ones(2))
    relu_a, relu_b, add = tracer.traces[0].ops
    fa, fb = relu_a.site.frames[0], relu_b.site.frames[0]
    assert fa.function.endswith("step") and fa.file == __file__
    assert fa.line == fb.line and fa.offset != fb.offset
    assert relu_a.site.mlir().startswith('"test_sites_are_call_stacks_with_bytecode_offsets.<locals>.step"(')
    assert len(add.site.frames) == 1  # the caller's frames are not included


def test_backward_ops_get_sites_from_their_forward_op() -> None:
    tracer, _ = traced_mlp(1)
    trace = tracer.traces[0]
    tb = next(o for o in trace.ops if o.name == "aten.threshold_backward")
    relu = next(o for o in trace.ops if o.name == "aten.relu")
    inner = tb.site.frames[0]
    assert (inner.file, inner.function) == ("<autograd>", "ReluBackward0")
    assert tb.site.frames[1:] == relu.site.frames
    mse_b = next(o for o in trace.ops if o.name == "aten.mse_loss_backward")
    assert mse_b.site.frames[0].function == "MseLossBackward0"
    # Distinct backward ops of one node are numbered.
    addmm_b = [o.site.frames[0] for o in trace.ops if o.site.frames[0].function == "AddmmBackward0"]
    assert len(addmm_b) >= 5 and len({f.offset for f in addmm_b}) >= 5


def test_args_conventions() -> None:
    def step(x: torch.Tensor, w: torch.Tensor) -> None:
        F.conv2d(x, w)  # no bias: an absent optional tensor is `bias = unit`
        torch.ones_like(x, dtype=torch.float64)  # dtype as a string; layout/device dropped
        x.sum(dim=[1], keepdim=True)

    tracer = terra.StepTracer(step)
    tracer(torch.randn(1, 1, 4, 4), torch.randn(2, 1, 3, 3))
    conv, ones, total = tracer.traces[0].ops
    assert conv.name == "aten.convolution" and len(conv.inputs) == 2
    assert conv.args["bias"] is None and conv.args["stride"] == [1, 1] and conv.args["groups"] == 1
    assert ones.args == {"dtype": torch.float64}
    assert total.args == {"dim": [1], "keepdim": True}
    text = tracer.module_text()
    assert 'args {dtype = "f64"}' in text
    assert re.search(r'"aten.convolution"\(%v\d+, %v\d+\) args \{bias = unit, dilation = \[1 : i64, 1 : i64\]',
                     text)
    parsed = toolchain.terra_opt(text, [], debuginfo=False)
    assert re.search(r'"aten.convolution"\(%\d+, %\d+\) args \{bias, dilation = \[1, 1\]', parsed), parsed


# ------------------------------------------------------------------ branches


def test_data_dependent_branch_becomes_a_case_select() -> None:
    model, opt = mlp()

    def step(x: torch.Tensor, y: torch.Tensor) -> float:
        opt.zero_grad(set_to_none=True)
        out = model(x)
        if x.mean() > 0:  # decided by a value the host reads from the graph
            out = out * 2.0
        loss = F.mse_loss(out, y)
        loss.backward()
        opt.step()
        return loss.item()

    tracer = terra.StepTracer(step, [model], [opt])
    x, y = batch()
    x = x.abs()
    tracer(x, y)
    tracer(-x, y)
    assert ["aten.mul.Tensor" in t.op_names() for t in tracer.traces] == [True, False]
    assert all(t.fetches[0].kind == "bool" for t in tracer.traces)
    graph = toolchain.terra_opt(tracer.module_text(), ["-terra-merge-traces", "-terra-assign-cases"])
    assert re.search(r"terra\.case_select \d+ cases 2", graph), graph
    assert "scf.index_switch" in graph

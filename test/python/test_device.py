"""`terra.function(device=...)`: the device option, graphs compiled for the
GPU through the front end's session, and (on a machine with a CUDA device:
scripts/gpu-check.sh part 0) co-execution on device="cuda" against eager
CUDA PyTorch."""
from __future__ import annotations

import importlib
import re
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

import terra
from terra import native
from terra.replay import TapeRecorder
from coexec_helpers import batches, compare, images, sgd_program

CUDA = torch.cuda.is_available()
terra_function = importlib.import_module("terra.function")  # the module, not the decorator


def test_unknown_device_is_refused() -> None:
    for device in ("tpu", "cuda:1", 3):
        with pytest.raises(ValueError, match="terra.function\\(device="):
            terra.function(lambda: None, device=device)


@pytest.mark.skipif(CUDA, reason="checks the error without a CUDA device")
def test_cuda_without_a_device_says_so() -> None:
    with pytest.raises(RuntimeError, match="torch sees no CUDA device"):
        terra.function(lambda: None, device="cuda")


def _compile_for_cuda(session: object) -> tuple:
    """The session's graph through the GPU pipeline, keeping every stage;
    skips the test on a build without the CUDA runtime."""
    try:
        return session.compile("", 64, True, "cuda")
    except RuntimeError as exc:
        if "no CUDA runtime" in str(exc):
            pytest.skip(str(exc))
        raise


def test_session_compiles_the_merged_graph_for_the_gpu() -> None:
    """The front end's session lowers the graph it traced on the CPU through
    the GPU pipeline: kernels as PTX in a gpu.binary, GEMMs as cuBLAS calls,
    and the JIT links the host code against the CUDA runtime."""
    torch.manual_seed(0)
    step, model, opt = sgd_program()()
    fn = terra.function(step, cache_dir=None)
    for x, y in batches(3):
        fn(x, y)
    graph, stages = _compile_for_cuda(fn.session)
    assert graph.device == "cuda"
    lowered = stages["lowered"]
    assert "gpu.binary" in lowered
    assert re.search(r"call @_?\w*terra_cuda_\w+", lowered), "the GEMMs are not cuBLAS calls"
    with pytest.raises(RuntimeError, match="unknown device 'tpu'"):
        fn.session.compile("", 64, False, "tpu")


def test_a_session_whose_first_graph_is_for_the_gpu_compiles_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernels' translation to LLVM IR is registered with the session's
    context from the start: on a GPU machine the first graph a session
    compiles is a CUDA one (found on the H100: it failed with "missing
    LLVMTranslationDialectInterface registration for gpu.module", which a
    CPU graph compiled first in the same session had hidden)."""
    texts = []
    real_text = terra_function.module_text
    monkeypatch.setattr(terra_function, "module_text", lambda *a: texts.append(real_text(*a)) or texts[-1])
    torch.manual_seed(0)
    step, model, opt = sgd_program()()
    fn = terra.function(step, cache_dir=None)
    for x, y in batches(3):
        fn(x, y)
    assert texts
    session = native.load().Session()
    for text in texts:
        assert not session.add_trace(text)["error"]
    graph, stages = _compile_for_cuda(session)
    assert "gpu.binary" in stages["lowered"]


@pytest.mark.parametrize("graph_device", ["cpu", "gpu-loops", "cuda"])
def test_a_replayed_steps_commit_copies_directly_only_host_to_host(graph_device: str) -> None:
    """The end of a replayed step copies the graph's final state straight
    into the program's CPU tensors (one native memcpy each) only when the
    graph's values are in host memory. A CUDA graph's are on the device:
    its commits go through the slots' setters (Tensor.copy_), Adam's CPU
    `step` counters too (the H200 run of session 30: the direct copy, a
    device-to-device one into host memory, failed)."""
    recorder = SimpleNamespace(compiled=SimpleNamespace(graph_device=graph_device), state_specs={})
    commits = [("optim:0.weight:step", 3, 0), ("param:0.weight", 4, 0)]
    held = [torch.tensor(1.0), torch.zeros(2, 2)]
    direct, items, late = TapeRecorder._commit_plan(recorder, commits, held)
    if graph_device == "cuda":
        assert (direct, items, late) == ([], [], commits)
    else:
        assert [c for c, _ in direct] == commits and late == []
        assert [(point, inst) for point, inst, _ in items] == [(3, 0), (4, 0)]


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device (scripts/gpu-check.sh runs it there)")
def test_mlp_sgd_on_cuda_matches_eager() -> None:
    def on_cuda(make):
        def build():
            step, model, opt = make()
            model.cuda()
            return step, model, opt
        return build
    inputs = [(x.cuda(), y.cuda()) for x, y in batches(8)]
    stats = compare(on_cuda(sgd_program(momentum=0.9)), inputs, max_fallbacks=0, device="cuda")
    assert stats["coexec_iterations"] >= 4, stats


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device (scripts/gpu-check.sh runs it there)")
def test_adam_with_item_on_cuda_matches_eager() -> None:
    def build():
        step, model, opt = sgd_program(read_item=True, optimizer=torch.optim.Adam, lr=1e-2,
                                       loss=lambda m, x, y: F.mse_loss(m(x).sum(1), y.float()))()
        model.cuda()
        return step, model, opt
    inputs = [(x.cuda(), y.cuda()) for x, y in batches(8)]
    compare(build, inputs, max_fallbacks=0, device="cuda")


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device (scripts/gpu-check.sh runs it there)")
def test_dropout_and_noise_on_cuda_match_eager() -> None:
    # On CUDA, dropout is the fused native_dropout: its mask is drawn on
    # the host from the CUDA generator (dropout.py), and so is the noise
    # (a random op on a CUDA placeholder draws on its device).
    def loss(model, x, y):
        h = model[1](model[0](x + torch.rand(x.shape, device=x.device) * 0.1))
        return F.cross_entropy(model[3](model[2](h)), y)

    def build():
        step, model, opt = sgd_program(loss=loss, momentum=0.9, model_fn=lambda: torch.nn.Sequential(
            torch.nn.Linear(6, 16), torch.nn.Dropout(0.3), torch.nn.Tanh(), torch.nn.Linear(16, 3)))()
        model.cuda()
        return step, model, opt
    inputs = [(x.cuda(), y.cuda()) for x, y in batches(12)]
    stats = compare(build, inputs, max_fallbacks=0, device="cuda")
    assert stats["coexec_iterations"] >= 4, stats


def test_state_on_another_device_is_a_clear_error_at_the_first_call() -> None:
    model = torch.nn.Linear(4, 2, device="meta")

    @terra.function
    def step(x):
        return model(x).sum()

    with pytest.raises(ValueError, match=r"must be on cpu, but param:weight \(meta\)"):
        step(torch.randn(3, 4))


def _cnn_batchnorm() -> torch.nn.Module:
    return torch.nn.Sequential(torch.nn.Conv2d(2, 4, 3, padding=1), torch.nn.BatchNorm2d(4),
                               torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                               torch.nn.Linear(4 * 4 * 4, 3))


@pytest.mark.parametrize("program", ["mlp_sgd_momentum", "mlp_adam_item", "cnn_batchnorm"])
def test_gpu_loops_graphs_match_eager(program: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """device="cuda"'s paths on the CPU (TERRA_CPU_GRAPHS=gpu-loops): the
    graph is the GPU pipeline's kernels run as loops, and its runs exchange
    values the way a CUDA graph's do (inputs read in place by pointer,
    fetches handed over by DLPack, the commit's copies "on the device")."""
    monkeypatch.setenv("TERRA_CPU_GRAPHS", "gpu-loops")
    assert terra.function(lambda: None).graph_device == "gpu-loops"
    if program == "mlp_sgd_momentum":
        make, inputs = sgd_program(momentum=0.9), batches(6)
    elif program == "mlp_adam_item":
        make = sgd_program(read_item=True, optimizer=torch.optim.Adam, lr=1e-2)
        inputs = batches(6)
    else:
        make = sgd_program(read_item=True, model_fn=_cnn_batchnorm, lr=0.05, momentum=0.9)
        inputs = images(6)
    stats = compare(make, inputs, max_fallbacks=0)
    assert stats["coexec_iterations"] >= 3, stats


def test_tensors_the_graph_cannot_read_run_eagerly() -> None:
    """A tensor argument, or a fed tensor, on a device the graph cannot read
    (here meta, for a CPU graph) leaves the graph as eager would run it,
    never a pointer the graph would dereference."""
    w = torch.randn(4, 4)
    m = torch.randn(3, 4, device="meta")
    use_global = [False]

    def step(x):
        y = m if use_global[0] else x
        return (y @ w).sum()

    fn = terra.function(step, cache_dir=None, max_traces=2)
    for _ in range(3):
        fn(torch.randn(3, 4))
    assert terra.stats(fn)["coexec_iterations"] == 1
    # An argument: the call runs eagerly, untraced.
    out = fn(torch.randn(3, 4, device="meta"))
    assert out.device.type == "meta"
    # A fed global in a recorded iteration: the iteration deviates.
    use_global[0] = True
    out = fn(torch.randn(3, 4))
    assert out.device.type == "meta"
    reasons = [f["reason"] for f in terra.stats(fn)["fallback_log"]]
    assert reasons == ["a tensor argument is on meta and the graph runs on cpu",
                       "a fed tensor is on meta; the graph runs on cpu"], reasons
    use_global[0] = False
    x = torch.randn(3, 4)
    torch.testing.assert_close(fn(x), step(x), rtol=1e-4, atol=1e-5)


def test_state_moved_where_the_graph_cannot_read_it_is_a_clear_error() -> None:
    model = torch.nn.Linear(4, 2)

    def step(x):
        return model(x).sum()

    fn = terra.function(step, cache_dir=None)
    for _ in range(4):
        fn(torch.randn(3, 4))
    assert terra.stats(fn)["coexec_iterations"] >= 1
    model.to("meta")
    with pytest.raises(ValueError, match=r"state \d+: a tensor on meta cannot be read by a graph "
                                         r"that runs on cpu"):
        fn(torch.randn(3, 4))


def test_cuda_placeholders_carry_device_index_0() -> None:
    """Placeholders of a CUDA step are on cuda:0, never index-less "cuda":
    the autograd engine asserts a device index when a backward reaches one
    (torch 2.11 on an H100: "device_ready_queues_" INTERNAL ASSERT)."""
    from terra import placeholder
    try:
        placeholder.set_device("cuda")
        assert placeholder.DEVICE == torch.device("cuda", 0)
    finally:
        placeholder.set_device("cpu")
    assert placeholder.DEVICE == torch.device("cpu")


def test_a_convolutional_training_step_compiles_for_the_gpu_with_library_calls() -> None:
    """DCGAN's step (transposed and strided convolutions, batch norm, two
    optimizers), traced on the CPU, through the GPU pipeline: every
    convolution and its gradients is a cuDNN call, the GEMMs cuBLAS calls,
    all kernels one deduplicated module, and nothing is left to the host."""
    import sys
    from pathlib import Path
    repo = str(Path(__file__).resolve().parents[2])
    if repo not in sys.path:
        sys.path.insert(0, repo)
    from benchmarks.programs import PROGRAMS
    program = PROGRAMS["dcgan"].build("small")
    fn = terra.function(program.step, cache_dir=None)
    for i in range(3):
        fn(i)
    graph, stages = _compile_for_cuda(fn.session)
    lowered = stages["lowered"]
    assert not list(graph.host_ops), list(graph.host_ops)
    for routine in ("conv2d", "conv2d_grad_input", "conv2d_grad_weight"):
        assert f"call @terra_cuda_{routine}_f32(" in lowered, routine
    assert "call @terra_lib_" not in lowered
    assert len(re.findall(r"gpu\.binary @", lowered)) == 1
    kernels = set(re.findall(r"gpu\.launch_func\s+@terra_kernels::@(\w+)", lowered))
    launches = len(re.findall(r"gpu\.launch_func\s", lowered))
    assert kernels and len(kernels) < launches, (len(kernels), launches)

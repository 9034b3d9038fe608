"""The tape replay's dispatch-key hook (python/src/DispatchHook.cpp).

While a co-executor replays, a C++ fallback on torch's `Fake` dispatch key
hands each op to the native replay before torch's Python fallback would.
These tests check that the hook is built for the torch in use, that it
passes an op's arguments exactly as torch's Python fallback passes them to
`__torch_dispatch__` (a tape entry matches them by value and type), that
errors reach the program, that it is off outside co-executed steps, and
that steps replayed through it compute what the Python path computes."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

import terra
from terra import native
from terra.native import NativeModuleMissing, load

try:
    load()
except NativeModuleMissing as exc:  # pragma: no cover - the build makes it
    pytest.skip(str(exc), allow_module_level=True)

from coexec_helpers import batches, compare, mlp, sgd_program  # noqa: E402

HEADERS = Path(torch.__file__).parent / "include" / "torch" / "csrc" / "autograd" / "python_variable.h"


def _hook():
    hook = native.load_dispatch()
    if hook is None:
        if HEADERS.exists():
            pytest.fail("torch's C++ headers are installed but the dispatch hook was not "
                        "built or not loaded for this torch")
        pytest.skip("no torch C++ headers (libtorch-dev): the hook is not built")
    return hook


def test_the_hook_is_built_and_loaded_for_this_torch() -> None:
    hook = _hook()
    assert set(hook.counts()) == {"hits", "misses", "ran_here"}
    assert hook.enable(False) is False  # off on this thread outside co-executed steps


_MISS = object()


def _overload(name: str, overload: str):
    namespace, op = name.split("::", 1)
    return getattr(getattr(getattr(torch.ops, namespace), op), overload)


def _shape(v):
    if isinstance(v, torch.Tensor):
        return ("tensor", tuple(v.shape), v.dtype)
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(_shape(x) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple(sorted((k, _shape(x)) for k, x in v.items())))
    return (type(v).__name__, v)


def _calls():
    torch.manual_seed(0)
    x = torch.randn(4, 6)
    img = torch.randn(2, 3, 5, 5)
    w = torch.randn(4, 3, 3, 3)
    idx = torch.tensor([0, 2])
    return [
        lambda: torch.mul(x, 2.5),
        lambda: x.add(x, alpha=2),
        lambda: x.sum(dim=1, keepdim=True),
        lambda: x.to(torch.float64),
        lambda: torch.zeros(3, dtype=torch.int64),
        lambda: torch.full((2,), 3),
        lambda: img.contiguous(memory_format=torch.channels_last),
        lambda: torch.cat([x, x], 1),
        lambda: F.softmax(x, -1),
        lambda: x.view(-1),
        lambda: torch.clamp(x, min=0.1),
        lambda: torch.where(x > 0, x, 0.0),
        lambda: x.index_select(0, idx),
        lambda: F.conv2d(img, w, padding=1, stride=2),
        lambda: x.new_empty((2,)),
        lambda: F.dropout(x, 0.0, training=False),
        lambda: x.mean(),
        lambda: torch.arange(5, dtype=torch.float32),
        lambda: x.masked_fill(x > 0, -1.0),
        lambda: torch.nn.functional.layer_norm(x, (6,)),
    ]


class _Seen(TorchDispatchMode):
    def __init__(self, log):
        super().__init__()
        self.log = log

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        self.log.append((func, _shape(args), _shape(kwargs)))
        return func(*args, **kwargs)


def test_arguments_reach_the_handler_as_torch_passes_them_to_torch_dispatch() -> None:
    hook = _hook()
    for i, call in enumerate(_calls()):
        by_torch: list = []
        with _Seen(by_torch):
            call()
        by_hook: list = []

        def handler(func, args, kwargs):
            by_hook.append((func, _shape(args), _shape(kwargs)))
            return _MISS
        hook.arm(handler, _MISS, _overload)
        was = hook.enable(True)
        try:
            call()
        finally:
            hook.enable(was)
            hook.disarm()
        assert by_hook == by_torch, f"call {i}"


def test_a_handler_result_is_the_ops_result_and_its_errors_reach_the_program() -> None:
    hook = _hook()
    x = torch.ones(3)
    made = torch.full((3,), 7.0)

    def handler(func, args, kwargs):
        if func is torch.ops.aten.mul.Tensor:
            return made
        if func is torch.ops.aten.sub.Tensor:
            raise ValueError("the handler refused sub")
        return _MISS
    hook.arm(handler, _MISS, _overload)
    was = hook.enable(True)
    try:
        assert torch.equal(x * 2, made)
        assert torch.equal(x + 1, torch.full((3,), 2.0))  # missed: torch ran it
        with pytest.raises(ValueError, match="the handler refused sub"):
            x - 1
        y = torch.ones(2, requires_grad=True)
        z = y * 3  # autograd ran above the hook: the result has its node
        assert z.grad_fn is not None and type(z.grad_fn).__name__ == "MulBackward0"
    finally:
        hook.enable(was)
        hook.disarm()
    assert torch.equal(x * 2, torch.full((3,), 2.0))


def test_replayed_steps_go_through_the_hook_and_match_eager() -> None:
    hook = _hook()
    before = hook.counts()["hits"]
    stats = compare(sgd_program(momentum=0.9), batches(8), max_fallbacks=0)
    assert stats["replayed_iterations"] >= 4
    assert hook.counts()["hits"] > before
    assert hook.enable(False) is False  # the step turned it off again


def test_the_hook_and_the_python_path_compute_the_same_steps(monkeypatch) -> None:
    _hook()
    from benchmarks.programs import PROGRAMS

    def run():
        program = PROGRAMS["dcgan"].build("small")
        fn = terra.function(program.step, cache_dir=None)
        losses = [float(fn(i)) for i in range(10)]
        return losses, program.param_snapshot(), terra.stats(fn)
    losses_h, params_h, stats_h = run()
    monkeypatch.setattr(native, "load_dispatch", lambda: None)
    losses_p, params_p, stats_p = run()
    assert stats_h["fallbacks"] == stats_p["fallbacks"] == 0
    assert stats_h["replayed_iterations"] == stats_p["replayed_iterations"] > 0
    assert losses_h == losses_p
    for name, value in params_p.items():
        assert torch.equal(params_h[name], value), name


def test_the_state_pointer_index_is_the_python_one() -> None:
    # state_name_of's index of the state tensors' memory: views share an
    # entry, empty tensors have none, a subclass leaves it to Python.
    hook = _hook()
    a = torch.zeros(4)
    p = torch.nn.Parameter(torch.ones(3))
    tensors = [a, a.view(2, 2), torch.zeros(0), p, a[1:]]
    names = ["a", "view", "empty", "p", "tail"]
    expected: dict = {}
    for name, t in zip(names, tensors):
        if t.numel():
            expected.setdefault(t.data_ptr(), []).append(name)
    assert hook.pointer_index(names, tensors) == expected

    class Sub(torch.Tensor):
        pass
    assert hook.pointer_index(["s"], [torch.zeros(2).as_subclass(Sub)]) is None
    with pytest.raises(ValueError):
        hook.pointer_index(["a", "b"], [a])


_RUN = object()


def test_a_handler_can_have_the_hook_run_an_op_past_the_python_key() -> None:
    # `run`: the hook runs the op itself and hands its results to `ran`;
    # `here` is false for an op with a tensor that needs the Python key (a
    # subclass such as a placeholder), whose op then goes on to that key.
    hook = _hook()
    x = torch.ones(3)
    asked, results = [], []

    class Wrap(torch.Tensor):  # a subclass with a Python dispatch (as a placeholder)
        @staticmethod
        def __new__(cls, elem):
            r = torch.Tensor._make_wrapper_subclass(cls, elem.size(), dtype=elem.dtype)
            r.elem = elem
            return r

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            def unwrap(t):
                return t.elem if isinstance(t, Wrap) else t
            out = func(*map(unwrap, args), **{k: unwrap(v) for k, v in (kwargs or {}).items()})
            return Wrap(out) if isinstance(out, torch.Tensor) else out
    sub = Wrap(torch.ones(2))

    def handler(func, args, kwargs, here):
        asked.append((func, here))
        return _RUN if here and func is torch.ops.aten.mul.Tensor else _MISS

    def ran(out):
        results.append(out)
    hook.arm(handler, _MISS, _overload, _RUN, ran)
    was = hook.enable(True)
    before = hook.counts()["ran_here"]
    try:
        y = torch.ones(2, requires_grad=True)
        z = y * 3  # run here, below autograd: the result has its node
        r = x * 2
        s = sub * 2  # not here: torch's Python key ran it
    finally:
        hook.enable(was)
        hook.disarm()
    assert torch.equal(r, torch.full((3,), 2.0)) and torch.equal(z.detach(), torch.full((2,), 3.0))
    assert type(z.grad_fn).__name__ == "MulBackward0"
    assert type(s) is Wrap and torch.equal(s.elem, torch.full((2,), 2.0))
    assert hook.counts()["ran_here"] - before == 2
    assert [h for f, h in asked if f is torch.ops.aten.mul.Tensor] == [True, True, False]
    # ran got the very tensors the program got
    assert len(results) == 2 and results[1] is r


def test_profiler_ops_and_pass_entries_run_in_the_hook_while_replaying() -> None:
    # zero_grad and the optimizer's step each open a record_function: its
    # handle (torch.zeros(1), a "pass" entry of the tape) and
    # profiler::_record_function_enter (not an aten op: the co-executor
    # runs it as it is) are run by the hook, not through torch's Python
    # key; the steps still match eager.
    hook = _hook()
    counts = native.load().replay_counts
    before, ran = counts(), hook.counts()["ran_here"]
    stats = compare(sgd_program(momentum=0.9), batches(10), max_fallbacks=0)
    after = counts()
    replayed = stats["replayed_iterations"]
    assert replayed >= 4
    assert after["passes_here"] - before["passes_here"] >= 2 * replayed
    assert after["profiler_here"] - before["profiler_here"] >= 2 * replayed
    assert hook.counts()["ran_here"] - ran >= 4 * replayed

"""Sites (python/terra/sites.py): which frames identify where an op ran."""
import dis
import os
import sys

from terra.sites import capture


def _through(relpath: str, f):
    """Calls `f` from a function whose code claims to live in `relpath`."""
    ns: dict = {}
    exec(compile("def wrapper(f):\n    return f()\n", os.path.join("/site", *relpath.split("/")), "exec"), ns)
    return ns["wrapper"](f)


def test_torch_plumbing_frames_are_not_part_of_a_site():
    """torch 2.x wraps a mode's __torch_dispatch__ in torch._disable_dynamo
    (torch/_compile.py, torch/_dynamo/eval_frame.py): those frames must not
    be in a site (found on torch 2.11, where they gave the co-executor's ops
    other sites than the tracer's); a torch frame of the program's own
    computation (a module's forward) is."""
    here = lambda: capture(sys._getframe(), None)[0]  # noqa: E731
    for plumbing in ("torch/_compile.py", "torch/_dynamo/eval_frame.py", "torch/utils/_python_dispatch.py"):
        site = _through(plumbing, here)
        assert not any(f.file.endswith(plumbing.split("/")[-1]) for f in site.frames), plumbing
    site = _through("torch/nn/modules/linear.py", here)
    assert any(f.file.endswith("linear.py") for f in site.frames), site.frames


def test_a_call_keeps_its_site_however_the_interpreter_runs_it():
    """CPython 3.11 leaves a caller's `f_lasti` at its CALL, inside the
    CALL's inline caches (a Python callee), or at the PRECALL before it (a
    C call specialized after a few runs). The same call must keep one site
    across iterations: `sorted` with a key specializes (found through the
    autograd engine's entry, whose offset changed once terra wrapped the
    engine in Python: an op's feed in the backward then deviated)."""
    sites = []

    def key(x):
        sites.append(capture(sys._getframe(1), None)[0])
        return x

    def python_callee(x):
        sites.append(capture(sys._getframe(1), None)[0])
        return x

    def builtin_call():
        return sorted([1], key=key)

    def python_call():
        return python_callee(1)

    for _ in range(30):
        builtin_call()
    assert len(set(sites)) == 1
    sites.clear()
    for _ in range(30):
        python_call()
    assert len(set(sites)) == 1
    code = python_call.__code__
    call = next(i.offset for i in dis.get_instructions(code) if i.opname == "CALL")
    assert sites[0].frames[0].offset == call


def test_the_node_of_a_view_written_under_no_grad_is_none():
    """torch raises on reading `grad_fn` of a view made under no_grad whose
    memory was written in place since (a parameter's row scaled in place):
    the recorder reads nodes of every op's results, so it must not raise
    (it ended tracing with a "tracer error" for a correct program)."""
    import torch
    from terra.sites import grad_fn_of

    w = torch.nn.Parameter(torch.randn(3, 3))
    with torch.no_grad():
        v = w[0]
        v.mul_(0.5)
    assert grad_fn_of(v) is None
    assert grad_fn_of(w * 2) is not None

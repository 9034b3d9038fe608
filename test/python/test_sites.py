"""Sites (python/terra/sites.py): which frames identify where an op ran."""
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

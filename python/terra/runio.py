"""How tensors cross between the Python host and a graph run (the native
runtime's channels): no copies either way."""
from __future__ import annotations

from typing import Any

import torch

from . import mlir_text


def tensor_spec(t: torch.Tensor) -> tuple:
    """How a tensor crosses to the runtime: no copy, kept alive by `t`."""
    return (t.data_ptr(), mlir_text.element_type(t.dtype), list(t.shape), list(t.stride()), t)


def from_fetch(run: Any, fid: int, inst: int) -> torch.Tensor:
    """Instance `inst` of fetch point `fid` of a run, as a tensor viewing the
    runtime's buffer."""
    arr = run.fetch(fid, inst)
    if arr is None:
        raise RuntimeError("the graph run that computed this value did not publish it")
    return torch.from_numpy(arr)

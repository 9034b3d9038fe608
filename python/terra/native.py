"""Loads `_terra_native`, the pybind11 module CMake builds into
<build>/python (TERRA_BUILD_DIR, default <repo>/build): the compiler
Session, the validator Cursor and graph runs."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from .toolchain import build_dir

_module: ModuleType | None = None


class NativeModuleMissing(ImportError):
    """The native module has not been built."""


def load() -> ModuleType:
    global _module
    if _module is not None:
        return _module
    if "_terra_native" in sys.modules:
        _module = sys.modules["_terra_native"]
        return _module
    folder = build_dir() / "python"
    module = _import_built(folder, "_terra_native")
    if module is None:
        raise NativeModuleMissing(f"the native module _terra_native is not built in {folder}; run "
                                  f"`bash scripts/build.sh` (or set TERRA_BUILD_DIR to a build that has it)")
    sys.modules["_terra_native"] = module
    _module = module
    module.set_graph_threads(graph_threads())
    spin = wait_spin_us()
    if spin is not None:
        module.set_wait_spin_us(spin)
    cache = host_cache_mb()
    if cache is not None:
        module.set_host_cache_mb(cache)
    return module


def load_optional() -> ModuleType | None:
    """The native module, or None where it is not built (callers that
    have a Python path of their own)."""
    try:
        return load()
    except NativeModuleMissing:
        return None


_functions: dict = {}  # (name, dispatch) -> optional_function's answer


def optional_function(name: str, dispatch: bool = False) -> Any:
    """Function `name` of the native module (of the dispatch hook with
    `dispatch`), or None where it is not built: for callers with a Python
    path of their own. Looked up once."""
    key = (name, dispatch)
    if key not in _functions:
        module = load_dispatch() if dispatch else load_optional()
        _functions[key] = getattr(module, name, None)
    return _functions[key]


_dispatch: ModuleType | None | bool = False  # False: not looked for yet


def load_dispatch() -> ModuleType | None:
    """`_terra_dispatch` (python/src/DispatchHook.cpp), the tape replay's
    dispatch-key hook and the state tensors' readers (TensorState.cpp), or
    None: not built (no torch C++ headers), built for another torch (its C++ ABI is the building torch's: the version it
    was built for is written beside it, and it is imported only under
    that one), or turned off with TERRA_DISPATCH_HOOK=0."""
    global _dispatch
    if _dispatch is not False:
        return _dispatch  # type: ignore[return-value]
    _dispatch = None
    if os.environ.get("TERRA_DISPATCH_HOOK", "1") == "0":
        return None
    import torch  # noqa: PLC0415
    folder = build_dir() / "python"
    try:
        built_for = (folder / "_terra_dispatch.torch-version").read_text().strip()
    except OSError:
        return None
    if built_for != torch.__version__:
        return None
    _dispatch = _import_built(folder, "_terra_dispatch")
    return _dispatch


def _import_built(folder: Path, name: str) -> ModuleType | None:
    """Imports extension module `name` built into `folder`, or None."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = folder / f"{name}{suffix}"
        if path.exists():
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    return None


def graph_threads() -> int:
    """Threads a graph's library calls may use: TERRA_GRAPH_THREADS, else
    one fewer than torch's intra-op threads. Co-execution runs the graph
    while the Python host thread runs the program; BLAS threads that
    spin-wait between calls on the host's core starve it (measured: a
    commit's copies took 20x longer on 2 cores)."""
    value = os.environ.get("TERRA_GRAPH_THREADS")
    if value:
        try:
            n = int(value)
        except ValueError:
            raise ValueError(f"TERRA_GRAPH_THREADS must be a positive integer, not {value!r}") from None
        if n < 1:
            raise ValueError(f"TERRA_GRAPH_THREADS must be a positive integer, not {value!r}")
        return n
    import torch  # noqa: PLC0415 - only the front end needs it
    return max(1, torch.get_num_threads() - 1)


def wait_spin_us() -> float | None:
    """TERRA_WAIT_SPIN_US: how long host and graph waits spin before they
    block (the runtime's default when unset; 0 blocks at once)."""
    return _nonnegative_env("TERRA_WAIT_SPIN_US", "microseconds")


def host_cache_mb() -> float | None:
    """TERRA_HOST_CACHE_MB: how many MiB of freed graph buffers the caching
    host allocator keeps for reuse (the runtime's default, 4096, when
    unset; 0 gives every buffer back to the system at once)."""
    return _nonnegative_env("TERRA_HOST_CACHE_MB", "MiB")


def _nonnegative_env(name: str, unit: str) -> float | None:
    """Environment variable `name` as a number >= 0, or None when unset."""
    value = os.environ.get(name)
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        number = float("nan")
    if not number >= 0:  # also NaN and words
        raise ValueError(f"{name} must be a number of {unit} >= 0, not {value!r}")
    return number

"""Loads `_terra_native`, the pybind11 module CMake builds into
<build>/python (TERRA_BUILD_DIR, default <repo>/build): the compiler
Session, the validator Cursor and graph runs."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from types import ModuleType

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
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = folder / f"_terra_native{suffix}"
        if path.exists():
            spec = importlib.util.spec_from_file_location("_terra_native", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            sys.modules["_terra_native"] = module
            _module = module
            return module
    raise NativeModuleMissing(f"the native module _terra_native is not built in {folder}; run "
                              f"`bash scripts/build.sh` (or set TERRA_BUILD_DIR to a build that has it)")

"""Registry of the ten Terra benchmark programs (``PROGRAMS = {name: module}``).

Each module exposes ``build(size="small", device="cpu", seed=0) -> Program``.
Order follows the Terra paper's evaluation table. ``PROGRAMS`` is built on
first access (PEP 562) so ``python -m benchmarks.programs.NAME`` does not
import the module twice.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Dict

from ._common import SIZES, Program

NAMES = ("resnet50", "bert_qa", "yolov3", "dcgan", "gpt2", "bert_cls", "dropblock", "sdpoint",
         "faster_rcnn", "music_transformer")

_registry: Dict[str, ModuleType] = {}


def __getattr__(attr: str) -> Dict[str, ModuleType]:
    if attr != "PROGRAMS":
        raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")
    if not _registry:
        _registry.update((n, importlib.import_module(f"{__name__}.{n}")) for n in NAMES)
    return _registry


__all__ = ["NAMES", "PROGRAMS", "Program", "SIZES"]

"""Terra-MLIR's Python front end.

`@terra.function` co-executes an unmodified PyTorch step function with a
compiled graph (function.py, coexec.py); `terra.stats` and `terra.explain`
report what it did. Underneath: the tracer that records a step as
`terra.trace` MLIR (tracing.py, docs/tracing.md), and the native module
(`_terra_native`, built by CMake) that merges traces, validates ops and
runs graphs. `CompiledStep` is an older test vehicle that runs graphs
through the command-line tools.
"""
from .compiled_step import CompiledStep, MissingLowering, NotCompilable
from .function import TerraFunction, explain, function, stats
from .placeholder import Placeholder, ValueUnavailable
from .state import StateRegistry, StateSlot
from .trace import Trace, module_text
from .tracing import StepTracer, op_name

__all__ = ["CompiledStep", "MissingLowering", "NotCompilable", "Placeholder", "StateRegistry", "StateSlot",
           "StepTracer", "TerraFunction", "Trace", "ValueUnavailable", "explain", "function", "module_text",
           "op_name", "stats"]

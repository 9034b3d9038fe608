"""Terra-MLIR's Python side: the tracer that records a PyTorch step function
as `terra.trace` MLIR, and a compiled-step runner used by the tests to run
the generated graph with `terra-run` (docs/tracing.md).

The co-execution front end (`terra.function`, issue 4) is not here yet.
"""
from .compiled_step import CompiledStep, MissingLowering, NotCompilable
from .state import StateRegistry, StateSlot
from .trace import Trace, module_text
from .tracing import StepTracer, op_name

__all__ = ["CompiledStep", "MissingLowering", "NotCompilable", "StateRegistry", "StateSlot", "StepTracer", "Trace", "module_text", "op_name"]

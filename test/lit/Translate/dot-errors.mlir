// --terra-to-dot renders merged TraceGraphs only.
// RUN: not terra-translate --terra-to-dot %s 2>&1 | FileCheck %s

// CHECK: dot-errors.mlir:[[@LINE+1]]:1: error: found no terra.trace_graph to render; build one with 'terra-opt -terra-merge-traces'
module {
  terra.trace @iter0 {
  }
}

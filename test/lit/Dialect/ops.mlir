// RUN: terra-opt %s -split-input-file | terra-opt -split-input-file | FileCheck %s
// RUN: terra-opt %s -split-input-file -mlir-print-op-generic | terra-opt -split-input-file | FileCheck %s
// RUN: terra-opt %s -split-input-file -mlir-print-debuginfo | terra-opt -split-input-file -mlir-print-debuginfo | FileCheck %s --check-prefix=DBG

// Round trip of every op of the terra dialect, in its custom form and through
// the generic form.

//===----------------------------------------------------------------------===//
// Stage 1: terra.trace
//===----------------------------------------------------------------------===//

// CHECK-LABEL: terra.trace @trace_ops {
// CHECK-NEXT:    %[[W:.*]] = terra.state "model.weight" : tensor<4x4xf32>
// CHECK-NEXT:    %[[X:.*]] = terra.feed : tensor<2x4xf32>
// CHECK-NEXT:    %[[S:.*]] = terra.feed : tensor<f32>
// CHECK-NEXT:    %[[MM:.*]] = terra.op "aten.mm"(%[[X]], %[[W]]) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    %[[ADD:.*]] = terra.op "aten.add"(%[[MM]], %[[S]]) args {alpha = 1 : i64} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
// CHECK-NEXT:    %[[MAX:.*]]:2 = terra.op "aten.max.dim"(%[[ADD]]) args {dim = 1 : i64, keepdim = false} : (tensor<2x4xf32>) -> (tensor<2xf32>, tensor<2xi64>)
// CHECK-NEXT:    %[[Z:.*]] = terra.op "aten.zeros"() args {size = [2, 4]} : () -> tensor<2x4xf32>
// CHECK-NEXT:    terra.op "aten.add_"(%[[Z]], %[[ADD]]) : (tensor<2x4xf32>, tensor<2x4xf32>) -> ()
// CHECK-NEXT:    terra.op "c10d.barrier"() : () -> ()
// CHECK-NEXT:    terra.fetch %[[MAX]]#0 : tensor<2xf32>
// CHECK-NEXT:    terra.loop_begin
// CHECK-NEXT:    terra.state "model.bias" : tensor<4xf32>
// CHECK-NEXT:    terra.loop_iter
// CHECK-NEXT:    %[[A:.*]] = terra.op "aten.relu"(%[[ADD]]) : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    terra.loop_begin
// CHECK-NEXT:    terra.loop_end
// CHECK-NEXT:    terra.loop_iter
// CHECK-NEXT:    %[[B:.*]] = terra.op "aten.relu"(%[[A]]) : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    terra.loop_begin
// CHECK-NEXT:    terra.loop_iter
// CHECK-NEXT:    %[[C:.*]] = terra.op "aten.neg"(%[[B]]) : (tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    terra.loop_end
// CHECK-NEXT:    terra.loop_end
// CHECK-NEXT:    terra.fetch %[[C]] : tensor<2x4xf32>
// CHECK-NEXT:  }
terra.trace @trace_ops {
  %w = terra.state "model.weight" : tensor<4x4xf32>
  %x = terra.feed : tensor<2x4xf32>
  %s = terra.feed : tensor<f32>
  %mm = terra.op "aten.mm"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %add = terra.op "aten.add"(%mm, %s) args {alpha = 1 : i64} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %max:2 = terra.op "aten.max.dim"(%add) args {dim = 1 : i64, keepdim = false} : (tensor<2x4xf32>) -> (tensor<2xf32>, tensor<2xi64>)
  %z = terra.op "aten.zeros"() args {size = [2, 4]} : () -> tensor<2x4xf32>
  terra.op "aten.add_"(%z, %add) : (tensor<2x4xf32>, tensor<2x4xf32>) -> ()
  terra.op "c10d.barrier"() : () -> ()
  terra.fetch %max#0 : tensor<2xf32>
  // A loop with two iterations; the first holds a zero-trip loop, the
  // second a nested loop with one iteration. State reads may precede the
  // first iteration.
  terra.loop_begin
  %bias = terra.state "model.bias" : tensor<4xf32>
  terra.loop_iter
  %a = terra.op "aten.relu"(%add) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  terra.loop_begin
  terra.loop_end
  terra.loop_iter
  %b = terra.op "aten.relu"(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  terra.loop_begin
  terra.loop_iter
  %c = terra.op "aten.neg"(%b) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  terra.loop_end
  terra.loop_end
  terra.fetch %c : tensor<2x4xf32>
}

// -----

// Feed and fetch points with explicit ids, and attributes on the trace.

// CHECK-LABEL: terra.trace @trace_point_ids attributes {iteration = 3 : i64} {
// CHECK-NEXT:    %[[X:.*]] = terra.feed 7 : tensor<4xf32>
// CHECK-NEXT:    %[[Y:.*]] = terra.feed 3 attributes {note = "lr"} : tensor<f64>
// CHECK-NEXT:    %[[R:.*]] = terra.op "aten.mul"(%[[X]], %[[Y]]) : (tensor<4xf32>, tensor<f64>) -> tensor<4xf32>
// CHECK-NEXT:    terra.fetch 0 %[[R]] : tensor<4xf32>
// CHECK-NEXT:    terra.fetch 2 %[[X]] attributes {reason = "print"} : tensor<4xf32>
// CHECK-NEXT:    terra.fetch %[[Y]] : tensor<f64>
// CHECK-NEXT:  }
terra.trace @trace_point_ids attributes {iteration = 3 : i64} {
  %x = terra.feed 7 : tensor<4xf32>
  %y = terra.feed 3 attributes {note = "lr"} : tensor<f64>
  %r = terra.op "aten.mul"(%x, %y) : (tensor<4xf32>, tensor<f64>) -> tensor<4xf32>
  terra.fetch 0 %r : tensor<4xf32>
  terra.fetch 2 %x attributes {reason = "print"} : tensor<4xf32>
  terra.fetch %y : tensor<f64>
}

// -----

// An empty trace.

// CHECK-LABEL: terra.trace @trace_empty {
// CHECK-NEXT:  }
terra.trace @trace_empty {
}

// -----

//===----------------------------------------------------------------------===//
// Stage 2: terra.trace_graph
//===----------------------------------------------------------------------===//

// Nodes of every kind: multi-source slots, aged sources, args, fetch lists,
// a state node outside the execution order, zero-input and zero-result op
// nodes, and loop nodes nested two deep whose bodies read values from the
// enclosing levels.

// CHECK-LABEL: terra.trace_graph @tg traces 2 attributes {origin = "merge"} {
// CHECK-NEXT:    terra.node 0 start succ [2]
// CHECK-NEXT:    terra.node 1 end
// CHECK-NEXT:    terra.node 2 feed -> (tensor<4xf32>) succ [3]
// CHECK-NEXT:    terra.node 3 op "aten.neg"(2:0) -> (tensor<4xf32>) succ [4, 6]
// CHECK-NEXT:    terra.node 4 op "aten.split"(2:0) args {dim = 0 : i64, sections = 2 : i64} -> (tensor<2xf32>, tensor<2xf32>) succ [5] fetch [-1, 0]
// CHECK-NEXT:    terra.node 5 op "aten.cat"(3:0 | 4:0, 4:1 | 5:0:2) -> (tensor<4xf32>) succ [7] fetch [1]
// CHECK-NEXT:    terra.node 6 op "c10d.barrier"() succ [7]
// CHECK-NEXT:    terra.node 12 state "model.weight" -> (tensor<4xf32>)
// CHECK-NEXT:    terra.loop_node 7 trips [2, 1] succ [1] {
// CHECK-NEXT:      terra.node 8 start succ [10]
// CHECK-NEXT:      terra.node 9 end
// CHECK-NEXT:      terra.node 10 op "aten.mul"(5:0 | 10:0:1, 12:0) -> (tensor<4xf32>) succ [11]
// CHECK-NEXT:      terra.loop_node 11 trips [3] succ [9] {
// CHECK-NEXT:        terra.node 13 start succ [15]
// CHECK-NEXT:        terra.node 14 end
// CHECK-NEXT:        terra.node 15 op "aten.sin"(10:0 | 15:0, 2:0:3) -> (tensor<4xf32>) succ [14]
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// CHECK-NEXT:  }
terra.trace_graph @tg traces 2 attributes {origin = "merge"} {
  terra.node 0 start succ [2]
  terra.node 1 end
  terra.node 2 feed -> (tensor<4xf32>) succ [3]
  terra.node 3 op "aten.neg"(2:0) -> (tensor<4xf32>) succ [4, 6]
  terra.node 4 op "aten.split"(2:0) args {dim = 0 : i64, sections = 2 : i64} -> (tensor<2xf32>, tensor<2xf32>) succ [5] fetch [-1, 0]
  terra.node 5 op "aten.cat"(3:0 | 4:0, 4:1 | 5:0:2) -> (tensor<4xf32>) succ [7] fetch [1]
  terra.node 6 op "c10d.barrier"() succ [7]
  terra.node 12 state "model.weight" -> (tensor<4xf32>)
  terra.loop_node 7 trips [2, 1] succ [1] {
    terra.node 8 start succ [10]
    terra.node 9 end
    terra.node 10 op "aten.mul"(5:0 | 10:0:1, 12:0) -> (tensor<4xf32>) succ [11]
    terra.loop_node 11 trips [3] succ [9] {
      terra.node 13 start succ [15]
      terra.node 14 end
      terra.node 15 op "aten.sin"(10:0 | 15:0, 2:0:3) -> (tensor<4xf32>) succ [14]
    }
  }
}

// -----

// The smallest TraceGraph; an explicit age of 0 and an all -1 fetch list
// are the defaults and are not printed; a zero-trip loop; discardable
// attributes on a node.

// CHECK-LABEL: terra.trace_graph @tg_small traces 1 {
// CHECK-NEXT:    terra.node 0 start succ [2]
// CHECK-NEXT:    terra.node 1 end
// CHECK-NEXT:    terra.node 2 op "aten.ones"() -> (tensor<f32>) succ [3] {hint = "cold"}
// CHECK-NEXT:    terra.node 3 op "aten.exp"(2:0) -> (tensor<f32>) succ [4]
// CHECK-NEXT:    terra.loop_node 4 trips [0] succ [1] {
// CHECK-NEXT:      terra.node 5 start succ [6]
// CHECK-NEXT:      terra.node 6 end
// CHECK-NEXT:    }
// CHECK-NEXT:  }
terra.trace_graph @tg_small traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  terra.node 2 op "aten.ones"() -> (tensor<f32>) succ [3] {hint = "cold"}
  terra.node 3 op "aten.exp"(2:0:0) -> (tensor<f32>) succ [4] fetch [-1]
  terra.loop_node 4 trips [0] succ [1] {
    terra.node 5 start succ [6]
    terra.node 6 end
  }
}

// -----

//===----------------------------------------------------------------------===//
// Stage 3: terra.graph
//===----------------------------------------------------------------------===//

// CHECK-LABEL: terra.graph @graph attributes {unrolled_loops = [array<i64: 3, 2>, array<i64: 9, 0>]} {
// CHECK-NEXT:    %[[X:.*]] = terra.feed 0 : tensor<4xf32>
// CHECK-NEXT:    %[[W:.*]] = terra.state "model.weight" : tensor<4xf32>
// CHECK-NEXT:    %[[SEL:.*]] = terra.case_select 1 cases 3
// CHECK-NEXT:    %[[SW:.*]] = scf.index_switch %[[SEL]] -> tensor<4xf32>
// CHECK-NEXT:    case 0 {
// CHECK-NEXT:      %[[NEG:.*]] = terra.op "aten.neg"(%[[X]]) : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:      scf.yield %[[NEG]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    case 1 {
// CHECK-NEXT:      %[[F:.*]] = terra.feed 1 : tensor<4xf32>
// CHECK-NEXT:      scf.yield %[[F]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    default {
// CHECK-NEXT:      %[[U:.*]] = terra.undef : tensor<4xf32>
// CHECK-NEXT:      scf.yield %[[U]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    terra.fetch 0 %[[SW]] : tensor<4xf32>
// CHECK-NEXT:    %[[WH:.*]] = scf.while (%[[ARG:.*]] = %[[SW]]) : (tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:      %[[COND:.*]] = terra.loop_cond 4
// CHECK-NEXT:      scf.condition(%[[COND]]) %[[ARG]] : tensor<4xf32>
// CHECK-NEXT:    } do {
// CHECK-NEXT:    ^bb0(%[[B:.*]]: tensor<4xf32>):
// CHECK-NEXT:      %[[MUL:.*]] = terra.op "aten.mul"(%[[B]], %[[W]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:      scf.yield %[[MUL]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    terra.fetch 1 %[[WH]] : tensor<4xf32>
// CHECK-NEXT:    %[[U2:.*]] = terra.undef : tensor<2x2xi64>
// CHECK-NEXT:    terra.fetch 2 %[[U2]] : tensor<2x2xi64>
// CHECK-NEXT:  }
terra.graph @graph attributes {unrolled_loops = [array<i64: 3, 2>, array<i64: 9, 0>]} {
  %x = terra.feed 0 : tensor<4xf32>
  %w = terra.state "model.weight" : tensor<4xf32>
  %sel = terra.case_select 1 cases 3
  %r = scf.index_switch %sel -> tensor<4xf32>
  case 0 {
    %a = terra.op "aten.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    scf.yield %a : tensor<4xf32>
  }
  case 1 {
    %f = terra.feed 1 : tensor<4xf32>
    scf.yield %f : tensor<4xf32>
  }
  default {
    %u = terra.undef : tensor<4xf32>
    scf.yield %u : tensor<4xf32>
  }
  terra.fetch 0 %r : tensor<4xf32>
  %l = scf.while (%arg = %r) : (tensor<4xf32>) -> tensor<4xf32> {
    %cond = terra.loop_cond 4
    scf.condition(%cond) %arg : tensor<4xf32>
  } do {
  ^bb0(%b: tensor<4xf32>):
    %y = terra.op "aten.mul"(%b, %w) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    scf.yield %y : tensor<4xf32>
  }
  terra.fetch 1 %l : tensor<4xf32>
  %u2 = terra.undef : tensor<2x2xi64>
  terra.fetch 2 %u2 : tensor<2x2xi64>
}

// -----

// A graph with no unrolled loops and an empty unrolled_loops list.

// CHECK-LABEL: terra.graph @graph_plain {
// CHECK-NEXT:    %[[C:.*]] = terra.case_select 0 cases 2 {origin = "node 3"}
// CHECK-NEXT:  }
// CHECK-LABEL: terra.graph @graph_no_unrolled attributes {unrolled_loops = []} {
// CHECK-NEXT:  }
terra.graph @graph_plain {
  %c = terra.case_select 0 cases 2 {origin = "node 3"}
}
terra.graph @graph_no_unrolled attributes {unrolled_loops = []} {
}

// -----

//===----------------------------------------------------------------------===//
// Sites (op locations) survive the round trip.
//===----------------------------------------------------------------------===//

// CHECK-LABEL: terra.trace @sites {
// CHECK-NOT:     loc(
// CHECK:       terra.trace_graph @sites_tg traces 1 {

// DBG-LABEL: terra.trace @sites {
// DBG-NEXT:    terra.feed : tensor<4xf32> loc(#[[FEED:loc[0-9]+]])
// DBG-NEXT:    terra.op "aten.relu"(%{{.*}}) : (tensor<4xf32>) -> tensor<4xf32> loc(#[[RELU:loc[0-9]+]])
// DBG-NEXT:    terra.loop_begin loc(#[[LOOP:loc[0-9]+]])
// DBG-NEXT:    terra.loop_end loc(#{{loc[0-9]+}})
// DBG-NEXT:  } loc(#{{loc[0-9]+}})
// DBG-NEXT:  terra.trace_graph @sites_tg traces 1 {
// DBG-NEXT:    terra.node 0 start succ [2] loc(#{{loc[0-9]+}})
// DBG-NEXT:    terra.node 1 end loc(#{{loc[0-9]+}})
// DBG-NEXT:    terra.node 2 op "aten.relu"() -> (tensor<4xf32>) succ [1] loc(#[[RELU]])
// DBG-NEXT:  } loc(#{{loc[0-9]+}})
// DBG-DAG:   #[[FEED]] = loc("train.py:step":11:2)
// DBG-DAG:   #[[STEP:loc[0-9]+]] = loc("train.py:step":12:40)
// DBG-DAG:   #[[MAIN:loc[0-9]+]] = loc("train.py:<module>":30:8)
// DBG-DAG:   #[[FOR:loc[0-9]+]] = loc("train.py:step":14:66)
// DBG-DAG:   #[[RELU]] = loc(callsite(#[[STEP]] at #[[MAIN]]))
// DBG-DAG:   #[[LOOP]] = loc(callsite(#[[FOR]] at #[[MAIN]]))
#step = loc("train.py:step":12:40)
#main = loc("train.py:<module>":30:8)
#relu = loc(callsite(#step at #main))
#loop = loc(callsite("train.py:step":14:66 at #main))
terra.trace @sites {
  %x = terra.feed : tensor<4xf32> loc("train.py:step":11:2)
  %y = terra.op "aten.relu"(%x) : (tensor<4xf32>) -> tensor<4xf32> loc(#relu)
  terra.loop_begin loc(#loop)
  terra.loop_end
}
terra.trace_graph @sites_tg traces 1 {
  terra.node 0 start succ [2]
  terra.node 1 end
  terra.node 2 op "aten.relu"() -> (tensor<4xf32>) succ [1] loc(#relu)
}

// -----

// A feed with attributes but no id, and a node name that needs escaping.
// CHECK-LABEL: terra.trace @feed_attrs_no_id
// CHECK-NEXT:    terra.feed attributes {note = "x"} : tensor<f32>
terra.trace @feed_attrs_no_id {
  %x = terra.feed attributes {note = "x"} : tensor<f32>
}

// -----

// Symbolic sizes: dims of an operand, one of them a shape operand.
// CHECK-LABEL: terra.trace @symbolic_sizes
// CHECK:         terra.op "aten.view"(%{{.*}}, %{{.*}}) args {size = [#terra.dim<0, 0>, #terra.dim<1, 1>, -1{{.*}}], terra.shape_operands = 1 : i64}
terra.trace @symbolic_sizes {
  %x = terra.feed : tensor<24x16xf32>
  %s = terra.feed : tensor<4x6xi64>
  %v = terra.op "aten.view"(%x, %s) args {size = [#terra.dim<0, 0>, #terra.dim<1, 1>, -1], terra.shape_operands = 1} : (tensor<24x16xf32>, tensor<4x6xi64>) -> tensor<24x6x?xf32>
}

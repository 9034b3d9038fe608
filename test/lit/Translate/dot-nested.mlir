// --terra-to-dot on hand-written TraceGraphs: nested loop clusters, a state
// node, a value read one execution back (age), args as a tooltip, and one
// digraph per terra.trace_graph.
// RUN: terra-translate --terra-to-dot %s | FileCheck %s

// CHECK-LABEL: digraph "nested" {
// CHECK-NEXT:    label="@nested (1 trace)";
// CHECK:         n2 [label="2: state\nfc.weight\n-> tensor<8x4xf32>", shape=cylinder];
// CHECK-NEXT:    subgraph cluster_3 {
// CHECK-NEXT:      label="3: loop, trips [2]";
// CHECK-NEXT:      style=rounded;
// CHECK-NEXT:      n4 [label="4: start", shape=oval];
// CHECK-NEXT:      n5 [label="5: end", shape=oval];
// CHECK-NEXT:      subgraph cluster_6 {
// CHECK-NEXT:        label="6: loop, trips [3, 1]";
// CHECK-NEXT:        style=rounded;
// CHECK-NEXT:        n7 [label="7: start", shape=oval];
// CHECK-NEXT:        n8 [label="8: end", shape=oval];
// CHECK-NEXT:        n9 [label="9: op\naten.mul\n-> tensor<8x4xf32>", shape=box, tooltip="{alpha = 2 : i64, mode = \"fast\"}"];
// CHECK-NEXT:      }
// CHECK-NEXT:    }
// A loop node as source and target: its body's end and start, clipped at
// the cluster. Loop 6 is both inside loop 3 and its only node.
// CHECK-NEXT:    n0 -> n4 [lhead=cluster_3];
// CHECK-NEXT:    n5 -> n1 [ltail=cluster_3];
// CHECK-NEXT:    n4 -> n7 [lhead=cluster_6];
// CHECK-NEXT:    n8 -> n5 [ltail=cluster_6];
// CHECK-NEXT:    n7 -> n9;
// CHECK-NEXT:    n9 -> n8;
// CHECK-NEXT:    n2 -> n9 [style=dashed, color=blue, fontcolor=blue, constraint=false, label="r0->in0"];
// CHECK-NEXT:    n9 -> n9 [style=dashed, color=blue, fontcolor=blue, constraint=false, label="r0->in1 (age 1)"];
// CHECK-NEXT:  }
// CHECK-EMPTY:
// CHECK-NEXT:  digraph "empty" {
// CHECK:         n0 -> n1;
// CHECK-NEXT:  }

module {
  terra.trace_graph @nested traces 1 {
    terra.node 0 start succ [3]
    terra.node 1 end
    terra.node 2 state "fc.weight" -> (tensor<8x4xf32>)
    terra.loop_node 3 trips [2] succ [1] {
      terra.node 4 start succ [6]
      terra.node 5 end
      terra.loop_node 6 trips [3, 1] succ [5] {
        terra.node 7 start succ [9]
        terra.node 8 end
        terra.node 9 op "aten.mul"(2:0, 9:0:1) args {alpha = 2 : i64, mode = "fast"} -> (tensor<8x4xf32>) succ [8]
      }
    }
  }
  terra.trace_graph @empty traces 1 {
    terra.node 0 start succ [1]
    terra.node 1 end
  }
}

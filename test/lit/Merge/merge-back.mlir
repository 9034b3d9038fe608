// Merge-back after a divergence (spec sections 2.3 and 2.5): the branch
// grown for the second trace rejoins at D instead of duplicating it, and a
// third trace that skips both arms adds a direct edge (an empty case).
// RUN: terra-opt %s -terra-merge-traces | FileCheck %s

#a = loc("mb.py":1:2)
#b = loc("mb.py":2:4)
#c = loc("mb.py":3:6)
#d = loc("mb.py":4:8)

// CHECK-LABEL: terra.trace_graph @merged traces 3 {
// CHECK-NEXT:    terra.node 0 start succ [2]
// CHECK-NEXT:    terra.node 1 end
// CHECK-NEXT:    terra.node 2 op "toy.a"() -> (tensor<2xf32>) succ [3, 5, 4]
// CHECK-NEXT:    terra.node 3 op "toy.b"(2:0) -> (tensor<2xf32>) succ [4]
// CHECK-NEXT:    terra.node 4 op "toy.d"(3:0 | 5:0 | 2:0) -> (tensor<2xf32>) succ [1]
// CHECK-NEXT:    terra.node 5 op "toy.c"(2:0) -> (tensor<2xf32>) succ [4]
// CHECK-NEXT:  }
module {
  terra.trace @t0 {
    %a = terra.op "toy.a"() : () -> tensor<2xf32> loc(#a)
    %b = terra.op "toy.b"(%a) : (tensor<2xf32>) -> tensor<2xf32> loc(#b)
    %d = terra.op "toy.d"(%b) : (tensor<2xf32>) -> tensor<2xf32> loc(#d)
  }
  terra.trace @t1 {
    %a = terra.op "toy.a"() : () -> tensor<2xf32> loc(#a)
    %c = terra.op "toy.c"(%a) : (tensor<2xf32>) -> tensor<2xf32> loc(#c)
    %d = terra.op "toy.d"(%c) : (tensor<2xf32>) -> tensor<2xf32> loc(#d)
  }
  terra.trace @t2 {
    %a = terra.op "toy.a"() : () -> tensor<2xf32> loc(#a)
    %d = terra.op "toy.d"(%a) : (tensor<2xf32>) -> tensor<2xf32> loc(#d)
  }
}

// Extending a provenance set must not change what an earlier trace reads.
// Trace 1 runs op1 and then op3(op0); adding op1 to op3's slot would make
// the graph route op1 there, so trace 2 gets its own op3 node instead.
// RUN: terra-opt %s -terra-merge-traces | FileCheck %s

#op0 = loc("strict.py":1:2)
#op1 = loc("strict.py":2:4)
#op3 = loc("strict.py":3:6)

// CHECK-LABEL: terra.trace_graph @merged traces 2 {
// CHECK:         terra.node 3 op "toy.op1"(2:0) -> (tensor<2xf32>) succ [4, 5]
// CHECK-NEXT:    terra.node 4 op "toy.op3"(2:0) -> (tensor<2xf32>) succ [1]
// CHECK-NEXT:    terra.node 5 op "toy.op3"(3:0) -> (tensor<2xf32>) succ [1]
module {
  terra.trace @t0 {
    %x0 = terra.op "toy.op0"() : () -> tensor<2xf32> loc(#op0)
    %x1 = terra.op "toy.op1"(%x0) : (tensor<2xf32>) -> tensor<2xf32> loc(#op1)
    %x3 = terra.op "toy.op3"(%x0) : (tensor<2xf32>) -> tensor<2xf32> loc(#op3)
  }
  terra.trace @t1 {
    %x0 = terra.op "toy.op0"() : () -> tensor<2xf32> loc(#op0)
    %x1 = terra.op "toy.op1"(%x0) : (tensor<2xf32>) -> tensor<2xf32> loc(#op1)
    %x3 = terra.op "toy.op3"(%x1) : (tensor<2xf32>) -> tensor<2xf32> loc(#op3)
  }
}

// The provenance trap (spec section 9, T6): `y = a if flag else b; op(y)`.
// Both traces run a, b, op at the same sites, but op reads different
// producers on the same path, so the traces must not share op's node: the
// graph gets two op nodes under b, told apart by provenance at run time.
// RUN: terra-opt %s -terra-merge-traces | FileCheck %s

#a = loc("trap.py":1:2)
#b = loc("trap.py":2:4)
#op = loc("trap.py":4:8)

// CHECK-LABEL: terra.trace_graph @merged traces 2 {
// CHECK:         terra.node 3 op "toy.b"() -> (tensor<2xf32>) succ [4, 5]
// CHECK-NEXT:    terra.node 4 op "toy.op"(2:0) -> (tensor<2xf32>) succ [1]
// CHECK-NEXT:    terra.node 5 op "toy.op"(3:0) -> (tensor<2xf32>) succ [1]
module {
  terra.trace @flag_true {
    %a = terra.op "toy.a"() : () -> tensor<2xf32> loc(#a)
    %b = terra.op "toy.b"() : () -> tensor<2xf32> loc(#b)
    %y = terra.op "toy.op"(%a) : (tensor<2xf32>) -> tensor<2xf32> loc(#op)
  }
  terra.trace @flag_false {
    %a = terra.op "toy.a"() : () -> tensor<2xf32> loc(#a)
    %b = terra.op "toy.b"() : () -> tensor<2xf32> loc(#b)
    %y = terra.op "toy.op"(%b) : (tensor<2xf32>) -> tensor<2xf32> loc(#op)
  }
}

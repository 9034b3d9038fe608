// The provenance trap (spec section 9, T6): the two op nodes under b read
// different producers and become the two cases of a switch; the runtime
// picks the case from the producer of the value the program passes.
// RUN: terra-opt %s -terra-merge-traces -terra-assign-cases | FileCheck %s

// CHECK-LABEL: terra.graph @merged {
// CHECK-NEXT:    %[[A:.*]] = terra.op "toy.a"()
// CHECK-NEXT:    %[[B:.*]] = terra.op "toy.b"()
// CHECK-NEXT:    %[[SEL:.*]] = terra.case_select 3 cases 2
// CHECK-NEXT:    scf.index_switch %[[SEL]]
// CHECK-NEXT:    case 0 {
// CHECK-NEXT:      terra.op "toy.op"(%[[A]])
// CHECK:         case 1 {
// CHECK-NEXT:      terra.op "toy.op"(%[[B]])
#a = loc("trap.py":1:2)
#b = loc("trap.py":2:4)
#op = loc("trap.py":4:8)
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

// Nested loops with a branch inside the inner body (spec section 9, T11):
// an scf.while inside an scf.while, with the optional op as an
// scf.index_switch of the inner body. Both loops run different trip counts
// across the traces, so neither is unrolled.
// RUN: terra-opt %s -terra-merge-traces -terra-assign-cases | FileCheck %s

// CHECK-LABEL: terra.graph @merged {
// CHECK:         scf.while
// CHECK:           terra.loop_cond 3
// CHECK:         } do {
// CHECK:           scf.while
// CHECK:             terra.loop_cond 6
// CHECK:           } do {
// CHECK:             %[[OP:.*]] = terra.op "toy.op"
// CHECK-NEXT:        %[[SEL:.*]] = terra.case_select 9 cases 2
// CHECK-NEXT:        %[[SW:.*]] = scf.index_switch %[[SEL]] -> tensor<2xf32>
// CHECK-NEXT:        case 0 {
// CHECK-NEXT:          %[[OPT:.*]] = terra.op "toy.opt"(%[[OP]])
// CHECK-NEXT:          scf.yield %[[OPT]]
// CHECK-NEXT:        }
// CHECK-NEXT:        case 1 {
// CHECK-NEXT:          scf.yield %[[OP]]
// CHECK-NEXT:        }
// CHECK:             scf.yield %[[SW]], %[[OP]]
#pre = loc("nested.py":1:2)
#outer = loc("nested.py":2:4)
#inner = loc("nested.py":3:6)
#op = loc("nested.py":4:8)
#opt = loc("nested.py":5:10)
module {
  terra.trace @t0 {
    %x = terra.op "toy.pre"() : () -> tensor<2xf32> loc(#pre)
    terra.loop_begin loc(#outer)
    terra.loop_iter
    terra.loop_begin loc(#inner)
    terra.loop_iter
    %a = terra.op "toy.op"(%x) : (tensor<2xf32>) -> tensor<2xf32> loc(#op)
    %b = terra.op "toy.opt"(%a) : (tensor<2xf32>) -> tensor<2xf32> loc(#opt)
    terra.loop_iter
    %c = terra.op "toy.op"(%b) : (tensor<2xf32>) -> tensor<2xf32> loc(#op)
    terra.loop_end
    terra.loop_iter
    terra.loop_begin loc(#inner)
    terra.loop_iter
    %d = terra.op "toy.op"(%c) : (tensor<2xf32>) -> tensor<2xf32> loc(#op)
    terra.loop_end
    terra.loop_end
  }
  terra.trace @t1 {
    %x = terra.op "toy.pre"() : () -> tensor<2xf32> loc(#pre)
    terra.loop_begin loc(#outer)
    terra.loop_iter
    terra.loop_begin loc(#inner)
    terra.loop_iter
    %a = terra.op "toy.op"(%x) : (tensor<2xf32>) -> tensor<2xf32> loc(#op)
    terra.loop_end
    terra.loop_end
  }
}

// A value read one execution after it was produced (`diff(x_new, x_old)`
// in a loop): the slot's source is aged (6:0:1) and case assignment keeps a
// shift register of step's outputs as loop-carried values.
// RUN: terra-opt %s -terra-merge-traces | FileCheck %s --check-prefix=TG
// RUN: terra-opt %s -terra-merge-traces -terra-assign-cases | FileCheck %s

// TG: terra.node 7 op "toy.diff"(6:0, 6:0:1)

// CHECK-LABEL: terra.graph @merged {
// CHECK:         scf.while (%[[ARG0:.*]] = %{{.*}}, %[[ARG1:.*]] = %{{.*}}, %[[ARG2:.*]] = %{{.*}})
// CHECK:         } do {
// CHECK-NEXT:    ^bb0(%[[X:.*]]: tensor<2xf32>, %[[CUR:.*]]: tensor<2xf32>, %[[OLD:.*]]: tensor<2xf32>):
// CHECK-NEXT:      %[[S:.*]] = terra.op "toy.step"(%[[X]])
// CHECK:             terra.op "toy.diff"(%[[S]], %[[CUR]])
// CHECK:           scf.yield %[[S]], %[[S]], %[[CUR]]
#x = loc("age.py":1:2)
#loop = loc("age.py":2:4)
#step = loc("age.py":3:6)
#diff = loc("age.py":4:8)
module {
  terra.trace @t0 {
    %x = terra.op "toy.x"() : () -> tensor<2xf32> loc(#x)
    terra.loop_begin loc(#loop)
    terra.loop_iter
    %a = terra.op "toy.step"(%x) : (tensor<2xf32>) -> tensor<2xf32> loc(#step)
    terra.loop_iter
    %b = terra.op "toy.step"(%a) : (tensor<2xf32>) -> tensor<2xf32> loc(#step)
    %d1 = terra.op "toy.diff"(%b, %a) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32> loc(#diff)
    terra.loop_iter
    %c = terra.op "toy.step"(%b) : (tensor<2xf32>) -> tensor<2xf32> loc(#step)
    %d2 = terra.op "toy.diff"(%c, %b) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32> loc(#diff)
    terra.loop_end
  }
  terra.trace @t1 {
    %x = terra.op "toy.x"() : () -> tensor<2xf32> loc(#x)
    terra.loop_begin loc(#loop)
    terra.loop_iter
    %a = terra.op "toy.step"(%x) : (tensor<2xf32>) -> tensor<2xf32> loc(#step)
    terra.loop_iter
    %b = terra.op "toy.step"(%a) : (tensor<2xf32>) -> tensor<2xf32> loc(#step)
    %d1 = terra.op "toy.diff"(%b, %a) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32> loc(#diff)
    terra.loop_end
  }
}

// Values that join after a switch with different static shapes: the
// variable's type is the join (the differing dim dynamic), and each case
// casts its more static value to it, so the switch verifies.
// RUN: terra-opt %s -terra-merge-traces -terra-assign-cases | FileCheck %s

// CHECK-LABEL: terra.graph @merged {
// CHECK:         %[[SW:.*]] = scf.index_switch %{{.*}} -> tensor<2x?xf32>
// CHECK-NEXT:    case 0 {
// CHECK-NEXT:      %[[A:.*]] = terra.op "toy.narrow"
// CHECK-NEXT:      %[[CA:.*]] = tensor.cast %[[A]] : tensor<2x3xf32> to tensor<2x?xf32>
// CHECK-NEXT:      scf.yield %[[CA]] : tensor<2x?xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    case 1 {
// CHECK-NEXT:      %[[B:.*]] = terra.op "toy.wide"
// CHECK-NEXT:      %[[CB:.*]] = tensor.cast %[[B]] : tensor<2x5xf32> to tensor<2x?xf32>
// CHECK-NEXT:      scf.yield %[[CB]] : tensor<2x?xf32>
// CHECK-NEXT:    }
// CHECK:         terra.op "toy.post"(%[[SW]]) : (tensor<2x?xf32>)
#pre = loc("j.py":1:2)
#narrow = loc("j.py":2:4)
#wide = loc("j.py":3:4)
#post = loc("j.py":4:8)
module {
  terra.trace @t0 {
    %x = terra.op "toy.pre"() : () -> tensor<2xf32> loc(#pre)
    %a = terra.op "toy.narrow"(%x) : (tensor<2xf32>) -> tensor<2x3xf32> loc(#narrow)
    %y = terra.op "toy.post"(%a) : (tensor<2x3xf32>) -> tensor<2xf32> loc(#post)
  }
  terra.trace @t1 {
    %x = terra.op "toy.pre"() : () -> tensor<2xf32> loc(#pre)
    %b = terra.op "toy.wide"(%x) : (tensor<2xf32>) -> tensor<2x5xf32> loc(#wide)
    %y = terra.op "toy.post"(%b) : (tensor<2x5xf32>) -> tensor<2xf32> loc(#post)
  }
}

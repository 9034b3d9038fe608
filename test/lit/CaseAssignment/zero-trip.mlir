// Zero-trip loops: a loop only ever left without an iteration is unrolled
// zero times (its count is still validated); a loop seen with 0 and with 2
// iterations becomes an scf.while whose first loop condition is false.
// RUN: terra-opt %s -split-input-file -terra-merge-traces -terra-assign-cases | FileCheck %s

// CHECK-LABEL: terra.graph @merged attributes {unrolled_loops = [array<i64: 3, 0>]} {
// CHECK-NEXT:    %[[X:.*]] = terra.op "toy.pre"()
// CHECK-NEXT:    terra.op "toy.post"(%[[X]])
// CHECK-NEXT:  }
#pre = loc("z.py":1:2)
#loop = loc("z.py":2:4)
#post = loc("z.py":4:8)
module {
  terra.trace @t0 {
    %x = terra.op "toy.pre"() : () -> tensor<2xf32> loc(#pre)
    terra.loop_begin loc(#loop)
    terra.loop_end
    %y = terra.op "toy.post"(%x) : (tensor<2xf32>) -> tensor<2xf32> loc(#post)
  }
}

// -----


#pre = loc("loops.py":1:2)
#loop = loc("loops.py":2:4)
#body = loc("loops.py":3:6)
#post = loc("loops.py":4:8)

// CHECK-LABEL: terra.graph @merged {
// CHECK-NEXT:    %[[X:.*]] = terra.op "toy.pre"()
// CHECK-NEXT:    %[[R:.*]] = scf.while (%[[V:.*]] = %[[X]]) : (tensor<2xf32>) -> tensor<2xf32> {
// CHECK-NEXT:      %[[C:.*]] = terra.loop_cond 3
// CHECK-NEXT:      scf.condition(%[[C]]) %[[V]]
// CHECK-NEXT:    } do {
// CHECK-NEXT:    ^bb0(%[[B:.*]]: tensor<2xf32>):
// CHECK-NEXT:      %[[Y:.*]] = terra.op "toy.body"(%[[B]])
// CHECK-NEXT:      scf.yield %[[Y]]
// CHECK-NEXT:    }
// CHECK-NEXT:    terra.op "toy.post"(%[[R]])
module {
  terra.trace @t0 {
    %x = terra.op "toy.pre"() : () -> tensor<2xf32> loc(#pre)
    terra.loop_begin loc(#loop)
    terra.loop_end
    %y = terra.op "toy.post"(%x) : (tensor<2xf32>) -> tensor<2xf32> loc(#post)
  }
  terra.trace @t1 {
    %x = terra.op "toy.pre"() : () -> tensor<2xf32> loc(#pre)
    terra.loop_begin loc(#loop)
    terra.loop_iter
    %a = terra.op "toy.body"(%x) : (tensor<2xf32>) -> tensor<2xf32> loc(#body)
    terra.loop_iter
    %b = terra.op "toy.body"(%a) : (tensor<2xf32>) -> tensor<2xf32> loc(#body)
    terra.loop_end
    %y = terra.op "toy.post"(%b) : (tensor<2xf32>) -> tensor<2xf32> loc(#post)
  }
}


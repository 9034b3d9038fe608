// A loop whose trip count was the same in every trace is unrolled, and the
// graph records [loop id, trip count] so the runtime validates the count.
// Persistent state becomes a terra.state op; a fetch inside the unrolled
// loop is published once per iteration.
// RUN: terra-opt %s -split-input-file -terra-merge-traces -terra-assign-cases | FileCheck %s

// CHECK-LABEL: terra.graph @merged attributes {unrolled_loops = [array<i64: 4, 2>]} {
// CHECK-NEXT:    %[[W:.*]] = terra.state "fc.weight" : tensor<2xf32>
// CHECK-NEXT:    %[[X:.*]] = terra.op "toy.pre"(%[[W]])
// CHECK-NEXT:    %[[A:.*]] = terra.op "toy.body"(%[[X]])
// CHECK-NEXT:    terra.fetch 0 %[[A]]
// CHECK-NEXT:    %[[B:.*]] = terra.op "toy.body"(%[[A]])
// CHECK-NEXT:    terra.fetch 0 %[[B]]
// CHECK-NEXT:  }
// CHECK-NOT:   scf.while
#pre = loc("u.py":1:2)
#loop = loc("u.py":2:4)
#body = loc("u.py":3:6)
module {
  terra.trace @t0 {
    %w = terra.state "fc.weight" : tensor<2xf32> loc(#pre)
    %x = terra.op "toy.pre"(%w) : (tensor<2xf32>) -> tensor<2xf32> loc(#pre)
    terra.loop_begin loc(#loop)
    terra.loop_iter
    %a = terra.op "toy.body"(%x) : (tensor<2xf32>) -> tensor<2xf32> loc(#body)
    terra.loop_iter
    %b = terra.op "toy.body"(%a) : (tensor<2xf32>) -> tensor<2xf32> loc(#body)
    terra.loop_end
    terra.fetch %b : tensor<2xf32>
  }
}

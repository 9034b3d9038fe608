// Loop nodes (spec section 2.6): each program loop gets one node keyed by
// the loop's site, its body is merged per iteration, and the distinct trip
// counts are recorded. Loops nest, and a loop may run zero times.
// RUN: terra-opt %s -split-input-file -terra-merge-traces | FileCheck %s

#pre = loc("loops.py":1:2)
#loop = loc("loops.py":2:4)
#body = loc("loops.py":3:6)

// A constant trip count: one recorded count.
// CHECK-LABEL: terra.trace_graph @merged traces 2 {
// CHECK:         terra.loop_node 3 trips [3] succ [1] {
// CHECK-NEXT:      terra.node 4 start succ [6]
// CHECK-NEXT:      terra.node 5 end
// CHECK-NEXT:      terra.node 6 op "toy.body"(2:0 | 6:0) -> (tensor<2xf32>) succ [5]
// CHECK-NEXT:    }
module {
  terra.trace @t0 {
    %x = terra.op "toy.pre"() : () -> tensor<2xf32> loc(#pre)
    terra.loop_begin loc(#loop)
    terra.loop_iter
    %a = terra.op "toy.body"(%x) : (tensor<2xf32>) -> tensor<2xf32> loc(#body)
    terra.loop_iter
    %b = terra.op "toy.body"(%a) : (tensor<2xf32>) -> tensor<2xf32> loc(#body)
    terra.loop_iter
    %c = terra.op "toy.body"(%b) : (tensor<2xf32>) -> tensor<2xf32> loc(#body)
    terra.loop_end
  }
  terra.trace @t1 {
    %x = terra.op "toy.pre"() : () -> tensor<2xf32> loc(#pre)
    terra.loop_begin loc(#loop)
    terra.loop_iter
    %a = terra.op "toy.body"(%x) : (tensor<2xf32>) -> tensor<2xf32> loc(#body)
    terra.loop_iter
    %b = terra.op "toy.body"(%a) : (tensor<2xf32>) -> tensor<2xf32> loc(#body)
    terra.loop_iter
    %c = terra.op "toy.body"(%b) : (tensor<2xf32>) -> tensor<2xf32> loc(#body)
    terra.loop_end
  }
}

// -----

#pre = loc("loops.py":1:2)
#loop = loc("loops.py":2:4)
#body = loc("loops.py":3:6)
#post = loc("loops.py":4:8)

// A zero-trip loop: entered and left without an iteration. The body's
// start gets a direct edge to its end, and 0 is a recorded trip count.
// CHECK-LABEL: terra.trace_graph @merged traces 2 {
// CHECK:         terra.loop_node 3 trips [0, 2] succ [6] {
// CHECK-NEXT:      terra.node 4 start succ [7]
// CHECK-NEXT:      terra.node 5 end
// CHECK-NEXT:      terra.node 7 op "toy.body"(2:0 | 7:0) -> (tensor<2xf32>) succ [5]
// CHECK-NEXT:    }
// CHECK-NEXT:    terra.node 6 op "toy.post"(2:0 | 7:0) -> (tensor<2xf32>) succ [1]
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

// -----

#pre = loc("nested.py":1:2)
#outer = loc("nested.py":2:4)
#inner = loc("nested.py":3:6)
#op = loc("nested.py":4:8)
#opt = loc("nested.py":5:10)

// Nested loops with a branch inside the inner body (spec section 9, T11):
// the optional op of the inner body is a divergence of the inner level.
// CHECK-LABEL: terra.trace_graph @merged traces 1 {
// CHECK:         terra.loop_node 3 trips [2] succ [1] {
// CHECK-NEXT:      terra.node 4 start succ [6]
// CHECK-NEXT:      terra.node 5 end
// CHECK-NEXT:      terra.loop_node 6 trips [2, 1] succ [5] {
// CHECK-NEXT:        terra.node 7 start succ [9]
// CHECK-NEXT:        terra.node 8 end
// CHECK-NEXT:        terra.node 9 op "toy.op"(2:0 | 10:0 | 9:0) -> (tensor<2xf32>) succ [10, 8]
// CHECK-NEXT:        terra.node 10 op "toy.opt"(9:0) -> (tensor<2xf32>) succ [8]
// CHECK-NEXT:      }
// CHECK-NEXT:    }
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
}

// The paper's worked example (spec section 2.8, Terra Fig. 3): two traces
// give one switch with two cases, a feed, a fetch and a loop that is not
// unrolled.
// RUN: terra-opt %s -terra-merge-traces | FileCheck %s

// start -> inp -> op0 -> {rval -> op1 -> op2 | op2'} -> op3 -> Loop{op4} -> end
// CHECK-LABEL: terra.trace_graph @merged traces 2 {
// CHECK-NEXT:    terra.node 0 start succ [2]
// CHECK-NEXT:    terra.node 1 end
// CHECK-NEXT:    terra.node 2 feed -> (tensor<4xf32>) succ [3]
// CHECK-NEXT:    terra.node 3 op "toy.op0"(2:0) -> (tensor<4xf32>) succ [4, 12]
// CHECK-NEXT:    terra.node 4 feed -> (tensor<f32>) succ [5]
// CHECK-NEXT:    terra.node 5 op "toy.op1"(3:0, 4:0) -> (tensor<4xf32>) succ [6]
// CHECK-NEXT:    terra.node 6 op "toy.op2"(2:0) -> (tensor<4xf32>, tensor<4xf32>) succ [7]
// Path-aware provenance: op3 reads op1 / op2#1 on the first path and
// op0 / op2'#0 on the second. Its output is a fetch point.
// CHECK-NEXT:    terra.node 7 op "toy.op3"(5:0 | 3:0, 6:1 | 12:0) -> (tensor<4xf32>) succ [8] fetch [0]
// CHECK-NEXT:    terra.loop_node 8 trips [2, 1] succ [1] {
// CHECK-NEXT:      terra.node 9 start succ [11]
// CHECK-NEXT:      terra.node 10 end
// The second op4 of the first trace merges into the first: same loop.
// CHECK-NEXT:      terra.node 11 op "toy.op4"(7:0 | 11:0) -> (tensor<4xf32>) succ [10]
// CHECK-NEXT:    }
// CHECK-NEXT:    terra.node 12 op "toy.op2"(2:0) -> (tensor<4xf32>, tensor<4xf32>) succ [7]
// CHECK-NEXT:  }
// CHECK-NOT:   terra.trace

#inp  = loc("fig3.py":2:4)
#rval = loc("fig3.py":5:20)
#op0  = loc("fig3.py":3:12)
#op1  = loc("fig3.py":5:30)
#op2a = loc("fig3.py":6:40)
#op2b = loc("fig3.py":9:50)
#op3  = loc("fig3.py":10:60)
#prt  = loc("fig3.py":11:70)
#loop = loc("fig3.py":12:80)
#op4  = loc("fig3.py":13:90)

module {
  // cond = true, N = 2
  terra.trace @iter0 {
    %inp = terra.feed : tensor<4xf32> loc(#inp)
    %x0 = terra.op "toy.op0"(%inp) : (tensor<4xf32>) -> tensor<4xf32> loc(#op0)
    %r = terra.feed : tensor<f32> loc(#rval)
    %x1 = terra.op "toy.op1"(%x0, %r) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32> loc(#op1)
    %z:2 = terra.op "toy.op2"(%inp) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) loc(#op2a)
    %x2 = terra.op "toy.op3"(%x1, %z#1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc(#op3)
    terra.fetch %x2 : tensor<4xf32> loc(#prt)
    terra.loop_begin loc(#loop)
    terra.loop_iter
    %a = terra.op "toy.op4"(%x2) : (tensor<4xf32>) -> tensor<4xf32> loc(#op4)
    terra.loop_iter
    %b = terra.op "toy.op4"(%a) : (tensor<4xf32>) -> tensor<4xf32> loc(#op4)
    terra.loop_end
  }
  // cond = false, N = 1
  terra.trace @iter1 {
    %inp = terra.feed : tensor<4xf32> loc(#inp)
    %x0 = terra.op "toy.op0"(%inp) : (tensor<4xf32>) -> tensor<4xf32> loc(#op0)
    %z:2 = terra.op "toy.op2"(%inp) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) loc(#op2b)
    %x2 = terra.op "toy.op3"(%x0, %z#0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc(#op3)
    terra.fetch %x2 : tensor<4xf32> loc(#prt)
    terra.loop_begin loc(#loop)
    terra.loop_iter
    %a = terra.op "toy.op4"(%x2) : (tensor<4xf32>) -> tensor<4xf32> loc(#op4)
    terra.loop_end
  }
}

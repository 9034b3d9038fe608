// The paper's worked example (spec section 2.8, Terra Fig. 3): two traces
// give one switch with two cases, a feed, a fetch and a loop that is not
// unrolled.
// RUN: terra-opt %s -terra-merge-traces | FileCheck %s

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

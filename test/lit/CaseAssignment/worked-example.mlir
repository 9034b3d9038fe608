// Case assignment on the paper's worked example (spec section 2.8, Terra
// Fig. 4): one switch with two cases driven by a case select, a feed in the
// first case, a fetch after op3, and a while (trip counts 2 and 1 differ, so
// the loop is not unrolled) driven by a loop condition.
// RUN: terra-opt %s -terra-merge-traces -terra-assign-cases | FileCheck %s
// RUN: terra-opt %s -terra-merge-traces -terra-assign-cases | FileCheck %s --check-prefix=COUNT
// RUN: terra-opt %s -terra-merge-traces | terra-opt -terra-assign-cases | FileCheck %s

// CHECK-LABEL: terra.graph @merged {
// CHECK:         %[[INP:.*]] = terra.feed 2 : tensor<4xf32>
// CHECK:         %[[X0:.*]] = terra.op "toy.op0"(%[[INP]])
// CHECK:         %[[SEL:.*]] = terra.case_select 3 cases 2
// CHECK:         %[[SW:.*]]:2 = scf.index_switch %[[SEL]] -> tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT:    case 0 {
// CHECK-NEXT:      %[[R:.*]] = terra.feed 4 : tensor<f32>
// CHECK-NEXT:      %[[X1:.*]] = terra.op "toy.op1"(%[[X0]], %[[R]])
// CHECK-NEXT:      %[[Z:.*]]:2 = terra.op "toy.op2"(%[[INP]])
// CHECK-NEXT:      scf.yield %[[X1]], %[[Z]]#1
// CHECK-NEXT:    }
// CHECK-NEXT:    case 1 {
// CHECK-NEXT:      %[[Z2:.*]]:2 = terra.op "toy.op2"(%[[INP]])
// CHECK-NEXT:      scf.yield %[[X0]], %[[Z2]]#0
// CHECK-NEXT:    }
// CHECK-NEXT:    default {
// CHECK:         }
// CHECK-NEXT:    %[[X2:.*]] = terra.op "toy.op3"(%[[SW]]#0, %[[SW]]#1)
// CHECK-NEXT:    terra.fetch 0 %[[X2]] : tensor<4xf32>
// CHECK-NEXT:    %{{.*}} = scf.while (%[[ARG:.*]] = %[[X2]]) : (tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:      %[[C:.*]] = terra.loop_cond 8
// CHECK-NEXT:      scf.condition(%[[C]]) %[[ARG]]
// CHECK-NEXT:    } do {
// CHECK-NEXT:    ^bb0(%[[B:.*]]: tensor<4xf32>):
// CHECK-NEXT:      %[[Y:.*]] = terra.op "toy.op4"(%[[B]])
// CHECK-NEXT:      scf.yield %[[Y]]
// CHECK-NEXT:    }
// CHECK-NOT:     unrolled_loops

// Exactly one switch (two cases) and one while.
// COUNT-COUNT-1: scf.index_switch
// COUNT-NOT:     scf.index_switch
// COUNT-COUNT-2: case {{[01]}} {
// COUNT-NOT:     case 2
// COUNT-COUNT-1: scf.while
// COUNT-NOT:     scf.while

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

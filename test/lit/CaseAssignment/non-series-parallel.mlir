// A DAG that is not series-parallel: a -> {b, c}, b -> {d, e}, c -> e,
// {d, e} -> f. The region of the divergence at a ends at its immediate
// post-dominator f; e is reachable from both of a's cases and is
// duplicated into each. With a duplication bound below what the DAG needs,
// the pass fails with a clear error instead.
// RUN: terra-opt %s -terra-merge-traces -terra-assign-cases | FileCheck %s
// RUN: terra-opt %s -terra-merge-traces -terra-assign-cases=max-duplication=1 -verify-diagnostics -o /dev/null

// CHECK-LABEL: terra.graph @merged {
// CHECK-NEXT:    %[[A:.*]] = terra.op "toy.a"()
// CHECK-NEXT:    %[[S1:.*]] = terra.case_select 2 cases 2
// CHECK-NEXT:    %[[SW:.*]] = scf.index_switch %[[S1]] -> tensor<2xf32>
// CHECK-NEXT:    case 0 {
// CHECK-NEXT:      %[[B:.*]] = terra.op "toy.b"(%[[A]])
// CHECK-NEXT:      %[[S2:.*]] = terra.case_select 3 cases 2
// CHECK-NEXT:      %[[IN:.*]] = scf.index_switch %[[S2]] -> tensor<2xf32>
// CHECK-NEXT:      case 0 {
// CHECK-NEXT:        %[[D:.*]] = terra.op "toy.d"(%[[B]])
// CHECK-NEXT:        scf.yield %[[D]]
// CHECK-NEXT:      }
// CHECK-NEXT:      case 1 {
// CHECK-NEXT:        %[[E1:.*]] = terra.op "toy.e"(%[[B]])
// CHECK-NEXT:        scf.yield %[[E1]]
// CHECK-NEXT:      }
// CHECK:           scf.yield %[[IN]]
// CHECK-NEXT:    }
// CHECK-NEXT:    case 1 {
// CHECK-NEXT:      %[[C:.*]] = terra.op "toy.c"(%[[A]])
// CHECK-NEXT:      %[[E2:.*]] = terra.op "toy.e"(%[[C]])
// CHECK-NEXT:      scf.yield %[[E2]]
// CHECK-NEXT:    }
// CHECK:         terra.op "toy.f"(%[[SW]])
#a = loc("n.py":1:1)
#b = loc("n.py":2:1)
#c = loc("n.py":3:1)
#d = loc("n.py":4:1)
#e = loc("n.py":5:1)
#f = loc("n.py":6:1)
module {
  // expected-error @below {{case assignment would duplicate the TraceGraph beyond 6 node copies}}
  terra.trace @t0 {
    %a = terra.op "toy.a"() : () -> tensor<2xf32> loc(#a)
    %b = terra.op "toy.b"(%a) : (tensor<2xf32>) -> tensor<2xf32> loc(#b)
    %d = terra.op "toy.d"(%b) : (tensor<2xf32>) -> tensor<2xf32> loc(#d)
    %f = terra.op "toy.f"(%d) : (tensor<2xf32>) -> tensor<2xf32> loc(#f)
  }
  terra.trace @t1 {
    %a = terra.op "toy.a"() : () -> tensor<2xf32> loc(#a)
    %b = terra.op "toy.b"(%a) : (tensor<2xf32>) -> tensor<2xf32> loc(#b)
    %e = terra.op "toy.e"(%b) : (tensor<2xf32>) -> tensor<2xf32> loc(#e)
    %f = terra.op "toy.f"(%e) : (tensor<2xf32>) -> tensor<2xf32> loc(#f)
  }
  terra.trace @t2 {
    %a = terra.op "toy.a"() : () -> tensor<2xf32> loc(#a)
    %c = terra.op "toy.c"(%a) : (tensor<2xf32>) -> tensor<2xf32> loc(#c)
    %e = terra.op "toy.e"(%c) : (tensor<2xf32>) -> tensor<2xf32> loc(#e)
    %f = terra.op "toy.f"(%e) : (tensor<2xf32>) -> tensor<2xf32> loc(#f)
  }
}

// terra-mark-state-updates: a fetch of a value eager computes into a
// state's own memory (an in-place op on the state, through earlier
// in-place results, identity views and branch results) names that state.
// RUN: terra-opt %s -terra-mark-state-updates | FileCheck %s

// CHECK-LABEL: terra.graph @sgd_momentum
terra.graph @sgd_momentum {
  %w = terra.state "param:w" : tensor<4x8xf32>
  %m = terra.state "optim:w:momentum_buffer" : tensor<4x8xf32>
  %g = terra.feed 1 : tensor<4x8xf32>
  %lr = terra.feed 2 : tensor<f32>
  // A value that is not in place: no state.
  %y = terra.op "aten.mul"(%w, %g) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: terra.fetch 0 %{{[0-9]+}} : tensor<4x8xf32>
  terra.fetch 0 %y : tensor<4x8xf32>
  // Result k of a _foreach_ op is its first list's element k.
  %u:2 = terra.op "aten._foreach_mul_.Scalar"(%m, %w, %lr) : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
  // Through a chain of in-place ops.
  %v = terra.op "aten.add_.Tensor"(%u#0, %g) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: terra.fetch 1 %{{[0-9]+}} attributes {terra.updates_state = "optim:w:momentum_buffer"}
  terra.fetch 1 %v : tensor<4x8xf32>
  // aten.t of aten.t is the state itself.
  %t = terra.op "aten.t"(%w) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %tt = terra.op "aten.t"(%t) : (tensor<8x4xf32>) -> tensor<4x8xf32>
  %n = terra.op "aten.add_.Tensor"(%tt, %v) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: terra.fetch 2 %{{[0-9]+}} attributes {terra.updates_state = "param:w"}
  terra.fetch 2 %n : tensor<4x8xf32>
  // An in-place op on a view that is not the identity: no state.
  %s = terra.op "aten.t_"(%w) : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %q = terra.op "aten.add_.Tensor"(%t, %s) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  // CHECK: terra.fetch 3 %{{[0-9]+}} : tensor<8x4xf32>
  terra.fetch 3 %q : tensor<8x4xf32>
}

// A gradient zeroed in one case and undefined in the other, then
// accumulated: the switch's result is the gradient's memory.
// CHECK-LABEL: terra.graph @grad_accumulate
terra.graph @grad_accumulate {
  %gr = terra.state "grad:w" : tensor<4xf32>
  %x = terra.feed 1 : tensor<4xf32>
  %c = terra.case_select 5 cases 2
  %z = scf.index_switch %c -> tensor<4xf32>
  case 0 {
    %u = terra.undef : tensor<4xf32>
    scf.yield %u : tensor<4xf32>
  }
  default {
    %zero = terra.op "aten.zero_"(%gr) : (tensor<4xf32>) -> tensor<4xf32>
    scf.yield %zero : tensor<4xf32>
  }
  %a = terra.op "aten.add_.Tensor"(%z, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK: terra.fetch 0 %{{[0-9]+}} attributes {terra.updates_state = "grad:w"}
  terra.fetch 0 %a : tensor<4xf32>
  // A fused optimizer's results follow no rule: no state.
  %f = terra.op "aten._fused_adam_"(%gr, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK: terra.fetch 1 %{{[0-9]+}} : tensor<4xf32>
  terra.fetch 1 %f : tensor<4xf32>
}

// Adam's moments: the first step's case makes them, the other yields the
// state. The value is the state's only in that case, which the fetch
// names with its case selection: [selection id, cases...].
// CHECK-LABEL: terra.graph @made_in_one_case
terra.graph @made_in_one_case {
  %m = terra.state "optim:w:exp_avg" : tensor<4xf32>
  %g = terra.feed 1 : tensor<4xf32>
  %b = terra.feed 2 : tensor<f32>
  %c = terra.case_select 7 cases 3
  %r = scf.index_switch %c -> tensor<4xf32>
  case 0 {
    %z = terra.op "aten.zeros_like"(%g) : (tensor<4xf32>) -> tensor<4xf32>
    scf.yield %z : tensor<4xf32>
  }
  case 1 {
    scf.yield %m : tensor<4xf32>
  }
  case 2 {
    %d = terra.op "aten.detach"(%m) : (tensor<4xf32>) -> tensor<4xf32>
    scf.yield %d : tensor<4xf32>
  }
  default {
    %u = terra.undef : tensor<4xf32>
    scf.yield %u : tensor<4xf32>
  }
  %u:1 = terra.op "aten._foreach_mul_.Scalar"(%r, %b) : (tensor<4xf32>, tensor<f32>) -> (tensor<4xf32>)
  %a = terra.op "aten.add_.Tensor"(%u#0, %g) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK: terra.fetch 0 %{{[0-9#]+}} attributes {terra.updates_state = "optim:w:exp_avg", terra.updates_state_case = array<i64: 7, 1, 2>}
  terra.fetch 0 %a : tensor<4xf32>
}

// Only in some cases, but the default is one of them (it stands for every
// other index), or the branch is not a case selection's: no state.
// CHECK-LABEL: terra.graph @not_nameable
terra.graph @not_nameable {
  %m = terra.state "optim:w:exp_avg" : tensor<4xf32>
  %g = terra.feed 1 : tensor<4xf32>
  %c = terra.case_select 8 cases 2
  %r = scf.index_switch %c -> tensor<4xf32>
  case 0 {
    %z = terra.op "aten.zeros_like"(%g) : (tensor<4xf32>) -> tensor<4xf32>
    scf.yield %z : tensor<4xf32>
  }
  default {
    scf.yield %m : tensor<4xf32>
  }
  %a = terra.op "aten.add_.Tensor"(%r, %g) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK: terra.fetch 0 %{{[0-9]+}} : tensor<4xf32>
  terra.fetch 0 %a : tensor<4xf32>
  %i = arith.constant 1 : index
  %s = scf.index_switch %i -> tensor<4xf32>
  case 0 {
    %z = terra.op "aten.zeros_like"(%g) : (tensor<4xf32>) -> tensor<4xf32>
    scf.yield %z : tensor<4xf32>
  }
  case 1 {
    scf.yield %m : tensor<4xf32>
  }
  default {
    %u = terra.undef : tensor<4xf32>
    scf.yield %u : tensor<4xf32>
  }
  %e = terra.op "aten.add_.Tensor"(%s, %g) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // CHECK: terra.fetch 1 %{{[0-9]+}} : tensor<4xf32>
  terra.fetch 1 %e : tensor<4xf32>
}

// The whole CPU pipeline: a graph with a switch and a loop ends as LLVM
// dialect calling the runtime's entry points, and translates to LLVM IR.
// Buffers go through the runtime's tracked allocator; feeds arrive through
// the `_contiguous` entry points (row-major buffers).
// RUN: terra-opt %s -terra-cpu-pipeline | FileCheck %s
// RUN: terra-opt %s -terra-cpu-pipeline | terra-translate --mlir-to-llvmir | FileCheck %s --check-prefix=IR

// CHECK-LABEL: llvm.func @step()
// CHECK-DAG:     llvm.call @terra_rt_feed_contiguous_f32
// CHECK-DAG:     llvm.call @terra_rt_case
// CHECK-DAG:     llvm.call @terra_rt_loop
// CHECK-DAG:     llvm.call @_mlir_memref_to_llvm_alloc
// CHECK-DAG:     llvm.call @terra_rt_fetch_f32
// CHECK-LABEL: llvm.func @_mlir_ciface_step()
// CHECK-NOT:   terra.
// IR: define void @step()
// IR: call { i64, ptr } @terra_rt_feed_contiguous_f32(i64 1, i64 2)
// IR: call i64 @terra_rt_case(i64 5, i64 2)
// IR: call i1 @terra_rt_loop(i64 7)
module {
  terra.graph @step {
    %x = terra.feed 1 : tensor<?x4xf32>
    %r = terra.op "aten.relu"(%x) : (tensor<?x4xf32>) -> tensor<?x4xf32>
    %c = terra.case_select 5 cases 2
    %z = scf.index_switch %c -> tensor<?x4xf32>
    case 0 {
      %e = terra.op "aten.exp"(%r) : (tensor<?x4xf32>) -> tensor<?x4xf32>
      scf.yield %e : tensor<?x4xf32>
    }
    default {
      scf.yield %r : tensor<?x4xf32>
    }
    %l = scf.while (%a = %z) : (tensor<?x4xf32>) -> tensor<?x4xf32> {
      %k = terra.loop_cond 7
      scf.condition(%k) %a : tensor<?x4xf32>
    } do {
    ^bb0(%a: tensor<?x4xf32>):
      %n = terra.op "aten.add.Tensor"(%a, %a) : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
      scf.yield %n : tensor<?x4xf32>
    }
    terra.fetch 0 %l : tensor<?x4xf32>
  }
}

// terra-lower-graph: the graph becomes a C-interface function and the
// communication ops become runtime calls; an op without a lowering becomes a
// host callback listed in terra.host_ops.
// RUN: terra-opt %s -terra-convert-to-linalg -terra-lower-graph | FileCheck %s
// With contiguous-inputs (the CPU pipeline) feeds and state come from the
// `_contiguous` entry points as identity-layout buffers; host results keep
// the strided form.
// RUN: terra-opt %s -terra-convert-to-linalg -terra-lower-graph=contiguous-inputs=true | FileCheck %s --check-prefix=CONTIG

// CHECK-LABEL: module attributes {terra.asserts = ["state 'fc.weight': expected shape [4]"], terra.feed_types = {{\[\[}}1, "f32", array<i64: -1>]], terra.host_ops = [{args = {k = 3 : i64}, name = "aten.unknown_op"}], terra.states = ["fc.weight"]}
// The check messages also travel in the code, for graphs compiled ahead of
// time: NUL-terminated, an empty one last.
// CHECK:       memref.global "public" constant @terra_check_messages : memref<39xi8> = dense<[115, 116, {{.*}}, 93, 0, 0]>
// CHECK-DAG:   func.func private @terra_rt_feed_f32(i64, i64) -> memref<*xf32> attributes {llvm.emit_c_interface}
// CHECK-DAG:   func.func private @terra_rt_fetch_f32(i64, memref<*xf32>) attributes {llvm.emit_c_interface}
// CHECK-DAG:   func.func private @terra_rt_case(i64, i64) -> index
// CHECK-DAG:   func.func private @terra_rt_loop(i64) -> i1
// CHECK-DAG:   func.func private @terra_rt_host_call(i64)
// CHECK-LABEL: func.func @step() attributes {llvm.emit_c_interface, terra.unrolled_loops = [array<i64: 7, 2>]}
// CHECK:         %[[S:.*]] = call @terra_rt_state_f32(%{{.*}}, %{{.*}}) : (i64, i64) -> memref<*xf32>
// The state's static size is a guard (the cast below would take any):
// CHECK:         %[[D:.*]] = memref.dim %[[S]], %{{.*}} : memref<*xf32>
// CHECK:         %[[OK:.*]] = arith.cmpi eq, %[[D]], %{{.*}} : index
// CHECK:         call @terra_rt_check(%[[OK]], %{{.*}}) : (i1, i64) -> ()
// CHECK:         %[[SC:.*]] = memref.cast %[[S]] : memref<*xf32> to memref<4xf32, strided<[?], offset: ?>>
// CHECK:         bufferization.to_tensor %[[SC]] restrict : memref<4xf32, strided<[?], offset: ?>> to tensor<4xf32>
// CHECK:         %[[C1:.*]] = arith.constant 1 : i64
// CHECK:         %[[F:.*]] = call @terra_rt_feed_f32(%[[C1]], %{{.*}})
// CHECK:         memref.cast %[[F]] : memref<*xf32> to memref<?xf32, strided<[?], offset: ?>>
// CHECK:         call @terra_rt_host_arg_f32
// CHECK:         call @terra_rt_host_call
// CHECK:         call @terra_rt_host_result_f32
// CHECK:         call @terra_rt_case
// CHECK:         scf.index_switch
// CHECK:         scf.while
// CHECK:           call @terra_rt_loop
// CHECK:         bufferization.to_buffer %{{.*}} read_only
// CHECK:         call @terra_rt_fetch_f32
// CHECK:         return
// CONTIG:       %[[S:.*]] = call @terra_rt_state_contiguous_f32(%{{.*}}, %{{.*}}) : (i64, i64) -> memref<*xf32>
// CONTIG:       %[[SC:.*]] = memref.cast %[[S]] : memref<*xf32> to memref<4xf32>
// CONTIG:       bufferization.to_tensor %[[SC]] restrict : memref<4xf32> to tensor<4xf32>
// CONTIG:       %[[F:.*]] = call @terra_rt_feed_contiguous_f32(%{{.*}}, %{{.*}})
// CONTIG:       memref.cast %[[F]] : memref<*xf32> to memref<?xf32>
// CONTIG:       %[[H:.*]] = call @terra_rt_host_result_f32
// CONTIG:       memref.cast %[[H]] : memref<*xf32> to memref<?xf32, strided<[?], offset: ?>>
module {
  terra.graph @step attributes {unrolled_loops = [array<i64: 7, 2>]} {
    %w = terra.state "fc.weight" : tensor<4xf32>
    %x = terra.feed 1 : tensor<?xf32>
    %h = terra.op "aten.unknown_op"(%x) args {k = 3 : i64} : (tensor<?xf32>) -> tensor<?xf32>
    %c = terra.case_select 5 cases 2
    %z = scf.index_switch %c -> tensor<?xf32>
    case 0 {
      %e = terra.op "aten.add.Tensor"(%h, %w) : (tensor<?xf32>, tensor<4xf32>) -> tensor<?xf32>
      scf.yield %e : tensor<?xf32>
    }
    default {
      %u = terra.undef : tensor<?xf32>
      scf.yield %u : tensor<?xf32>
    }
    %r = scf.while (%a = %z) : (tensor<?xf32>) -> tensor<?xf32> {
      %k = terra.loop_cond 7
      scf.condition(%k) %a : tensor<?xf32>
    } do {
    ^bb0(%a: tensor<?xf32>):
      %n = terra.op "aten.neg"(%a) : (tensor<?xf32>) -> tensor<?xf32>
      scf.yield %n : tensor<?xf32>
    }
    terra.fetch 0 %r : tensor<?xf32>
  }
}

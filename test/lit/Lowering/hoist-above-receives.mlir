// terra-hoist-above-receives: work that does not need a receive (a feed, a
// case selection) runs before the graph waits for it; what feeds that work
// (empty tensors, zero fills, casts, allocations) moves with it, guards move
// as early as their operands allow, and fetches, receives and work that
// needs them keep their order.
// RUN: terra-opt %s -terra-hoist-above-receives | FileCheck %s

// CHECK-LABEL: func.func @step(
// The reduction of the argument and the library call on its buffer come
// first, each with what feeds it, then the guard and the work on the call's
// result that was after the case selection:
// CHECK:         %[[E1:.*]] = tensor.empty() : tensor<f32>
// CHECK-NEXT:    %[[F1:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E1]] : tensor<f32>)
// CHECK-NEXT:    %[[SUM:.*]] = linalg.reduce ins(%arg0
// CHECK:         %[[AB:.*]] = bufferization.to_buffer %arg0 read_only
// CHECK-NEXT:    %[[ABC:.*]] = memref.cast %[[AB]]
// CHECK-NEXT:    %[[OUT:.*]] = memref.alloc() : memref<8xf32>
// CHECK-NEXT:    %[[OUTC:.*]] = memref.cast %[[OUT]]
// CHECK-NEXT:    call @terra_lib_scale_f32(%[[ABC]], %[[OUTC]])
// CHECK-NEXT:    %[[SCALED:.*]] = bufferization.to_tensor %[[OUT]] restrict writable
// CHECK-NEXT:    %[[D:.*]] = tensor.dim %[[SCALED]]
// CHECK-NEXT:    %[[OK:.*]] = arith.cmpi eq, %[[D]]
// CHECK-NEXT:    call @terra_rt_check(%[[OK]]
// CHECK-NEXT:    %[[E2:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT:    %[[Z:.*]] = linalg.generic {{.*}} ins(%[[SCALED]] : tensor<8xf32>) outs(%[[E2]]
// The feed, and the work that needs it in its order:
// CHECK:         %[[FED:.*]] = call @terra_rt_feed_contiguous_f32
// CHECK:         %[[X:.*]] = bufferization.to_tensor
// (its empty tensor does not move without it)
// CHECK-NEXT:    %[[E0:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NEXT:    %[[Y:.*]] = linalg.generic {{.*}} ins(%[[X]], %arg0 : {{.*}} outs(%[[E0]]
// The library call on the fed value stays after it, and so does the tensor
// of its result (no operand ties it to the call):
// CHECK:         %[[YB:.*]] = bufferization.to_buffer %[[Y]] read_only
// CHECK:         %[[OUT2:.*]] = memref.alloc() : memref<8xf32>
// CHECK:         call @terra_lib_scale_f32(
// CHECK-NEXT:    %[[SCALED2:.*]] = bufferization.to_tensor %[[OUT2]] restrict writable
// CHECK:         call @terra_rt_fetch_f32(
// CHECK-NEXT:    %[[K:.*]] = call @terra_rt_case
// CHECK-NEXT:    %[[PICK:.*]] = scf.index_switch %[[K]]
// CHECK:         linalg.generic {{.*}} ins(%[[Z]], %[[PICK]]
// CHECK:         call @terra_rt_fetch_f32(
// CHECK:         %[[SB:.*]] = bufferization.to_buffer %[[SUM]] read_only
// CHECK:         call @terra_rt_fetch_f32(
// CHECK-NEXT:    return
#id = affine_map<(d0) -> (d0)>
module {
  func.func private @terra_rt_feed_contiguous_f32(i64, i64) -> memref<*xf32>
  func.func private @terra_rt_fetch_f32(i64, memref<*xf32>)
  func.func private @terra_rt_case(i64, i64) -> index
  func.func private @terra_rt_check(i1, i64)
  func.func private @terra_lib_scale_f32(memref<?xf32, strided<[?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>)

  func.func @step(%a: tensor<8xf32>) {
    %c0 = arith.constant 0 : i64
    %c1 = arith.constant 1 : i64
    %c8 = arith.constant 8 : index
    %c0i = arith.constant 0 : index
    %zero = arith.constant 0.0 : f32
    %fed = call @terra_rt_feed_contiguous_f32(%c1, %c1) : (i64, i64) -> memref<*xf32>
    %fc = memref.cast %fed : memref<*xf32> to memref<8xf32>
    %x = bufferization.to_tensor %fc restrict : memref<8xf32> to tensor<8xf32>
    // Uses the feed: stays after it.
    %e0 = tensor.empty() : tensor<8xf32>
    %y = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%x, %a : tensor<8xf32>, tensor<8xf32>) outs(%e0 : tensor<8xf32>) {
    ^bb0(%i: f32, %j: f32, %o: f32):
      %s = arith.addf %i, %j : f32
      linalg.yield %s : f32
    } -> tensor<8xf32>
    // Needs only %a: moves above the feed, its zero fill with it.
    %e1 = tensor.empty() : tensor<f32>
    %f1 = linalg.fill ins(%zero : f32) outs(%e1 : tensor<f32>) -> tensor<f32>
    %sum = linalg.reduce ins(%a : tensor<8xf32>) outs(%f1 : tensor<f32>) dimensions = [0]
      (%in: f32, %acc: f32) {
        %t = arith.addf %in, %acc : f32
        linalg.yield %t : f32
      }
    // A library call on %a's buffer into a fresh one: moves, and the tensor
    // of its result with it.
    %ab = bufferization.to_buffer %a read_only : tensor<8xf32> to memref<8xf32>
    %abc = memref.cast %ab : memref<8xf32> to memref<?xf32, strided<[?], offset: ?>>
    %out = memref.alloc() : memref<8xf32>
    %outc = memref.cast %out : memref<8xf32> to memref<?xf32, strided<[?], offset: ?>>
    call @terra_lib_scale_f32(%abc, %outc) : (memref<?xf32, strided<[?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>) -> ()
    %scaled = bufferization.to_tensor %out restrict writable : memref<8xf32> to tensor<8xf32>
    // A library call on the feed's value: stays, and so does the tensor of
    // its result, which no operand ties to the call.
    %yb = bufferization.to_buffer %y read_only : tensor<8xf32> to memref<8xf32>
    %ybc = memref.cast %yb : memref<8xf32> to memref<?xf32, strided<[?], offset: ?>>
    %out2 = memref.alloc() : memref<8xf32>
    %out2c = memref.cast %out2 : memref<8xf32> to memref<?xf32, strided<[?], offset: ?>>
    call @terra_lib_scale_f32(%ybc, %out2c) : (memref<?xf32, strided<[?], offset: ?>>, memref<?xf32, strided<[?], offset: ?>>) -> ()
    %scaled2 = bufferization.to_tensor %out2 restrict writable : memref<8xf32> to tensor<8xf32>
    // A fetch keeps its place.
    %sb = bufferization.to_buffer %scaled2 read_only : tensor<8xf32> to memref<8xf32>
    %sbc = memref.cast %sb : memref<8xf32> to memref<*xf32>
    call @terra_rt_fetch_f32(%c0, %sbc) : (i64, memref<*xf32>) -> ()
    // A case selection waits for the host too; the work after it that does
    // not need it moves above it (and above the feed), its guard first.
    %k = call @terra_rt_case(%c1, %c1) : (i64, i64) -> index
    %pick = scf.index_switch %k -> tensor<8xf32>
    case 0 {
      scf.yield %y : tensor<8xf32>
    }
    default {
      scf.yield %scaled2 : tensor<8xf32>
    }
    %d = tensor.dim %scaled, %c0i : tensor<8xf32>
    %ok = arith.cmpi eq, %d, %c8 : index
    call @terra_rt_check(%ok, %c1) : (i1, i64) -> ()
    %e2 = tensor.empty() : tensor<8xf32>
    %z = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%scaled : tensor<8xf32>) outs(%e2 : tensor<8xf32>) {
    ^bb0(%i: f32, %o: f32):
      %m = arith.mulf %i, %i : f32
      linalg.yield %m : f32
    } -> tensor<8xf32>
    %w = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%z, %pick : tensor<8xf32>, tensor<8xf32>) outs(%e2 : tensor<8xf32>) {
    ^bb0(%i: f32, %j: f32, %o: f32):
      %m = arith.mulf %i, %j : f32
      linalg.yield %m : f32
    } -> tensor<8xf32>
    %wb = bufferization.to_buffer %w read_only : tensor<8xf32> to memref<8xf32>
    %wbc = memref.cast %wb : memref<8xf32> to memref<*xf32>
    call @terra_rt_fetch_f32(%c1, %wbc) : (i64, memref<*xf32>) -> ()
    %sumb = bufferization.to_buffer %sum read_only : tensor<f32> to memref<f32>
    %sumc = memref.cast %sumb : memref<f32> to memref<*xf32>
    call @terra_rt_fetch_f32(%c0, %sumc) : (i64, memref<*xf32>) -> ()
    return
  }
}

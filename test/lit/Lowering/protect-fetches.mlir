// A fetch publishes its buffer without a copy, so a buffer the graph may
// write after fetching it is copied first and the copy fetched.
// RUN: terra-opt %s -pass-pipeline='builtin.module(func.func(terra-protect-fetches))' | FileCheck %s

#id = affine_map<(i) -> (i)>

func.func private @terra_rt_fetch_f32(i64, memref<*xf32>) attributes {llvm.emit_c_interface}
func.func private @terra_rt_feed_contiguous_f32(i64, i64) -> memref<*xf32>
func.func private @terra_rt_loop(i64) -> i1

// A loop body writing each trip into one buffer allocated before the loop
// (Fig. 3's loop once CSE had merged its destinations): the next trip
// would overwrite the value this trip fetched.
// CHECK-LABEL: func.func @written_on_the_next_trip
// CHECK:         scf.while
// CHECK:           linalg.generic {{.*}} outs(%[[OUT:[a-z0-9_]+]] :
// CHECK-NEXT:      ^bb0
// CHECK:           %[[COPY:.*]] = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
// CHECK-NEXT:      memref.copy %[[OUT]], %[[COPY]]
// CHECK-NEXT:      %[[SENT:.*]] = memref.cast %[[COPY]] : memref<16xf32> to memref<*xf32>
// CHECK-NEXT:      call @terra_rt_fetch_f32(%{{.*}}, %[[SENT]])
func.func @written_on_the_next_trip(%x: memref<16xf32>) {
  %id = arith.constant 1 : i64
  %out = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
  %r = scf.while (%a = %x) : (memref<16xf32>) -> memref<16xf32> {
    %go = func.call @terra_rt_loop(%id) : (i64) -> i1
    scf.condition(%go) %a : memref<16xf32>
  } do {
  ^bb0(%a: memref<16xf32>):
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%a : memref<16xf32>) outs(%out : memref<16xf32>) {
    ^bb0(%in: f32, %o: f32):
      %t = math.tanh %in : f32
      linalg.yield %t : f32
    }
    %sent = memref.cast %out : memref<16xf32> to memref<*xf32>
    func.call @terra_rt_fetch_f32(%id, %sent) : (i64, memref<*xf32>) -> ()
    scf.yield %out : memref<16xf32>
  }
  return
}

// A slice of the fetched buffer written in place after the fetch.
// CHECK-LABEL: func.func @slice_written_after
// CHECK:         %[[BUF:.*]] = memref.alloc() : memref<4x4xf32>
// CHECK:         %[[COPY:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x4xf32>
// CHECK-NEXT:    memref.copy %[[BUF]], %[[COPY]]
// CHECK-NEXT:    %[[SENT:.*]] = memref.cast %[[COPY]]
// CHECK-NEXT:    call @terra_rt_fetch_f32(%{{.*}}, %[[SENT]])
// CHECK:         memref.subview %[[BUF]]
func.func @slice_written_after(%v: f32) {
  %id = arith.constant 2 : i64
  %buf = memref.alloc() : memref<4x4xf32>
  linalg.fill ins(%v : f32) outs(%buf : memref<4x4xf32>)
  %sent = memref.cast %buf : memref<4x4xf32> to memref<*xf32>
  func.call @terra_rt_fetch_f32(%id, %sent) : (i64, memref<*xf32>) -> ()
  %row = memref.subview %buf[1, 0] [1, 4] [1, 1] : memref<4x4xf32> to memref<4xf32, strided<[1], offset: 4>>
  linalg.fill ins(%v : f32) outs(%row : memref<4xf32, strided<[1], offset: 4>>)
  return
}

// Not written after its fetch (only read), a write before the fetch, and a
// write into another buffer that a branch merges with it: no copy.
// CHECK-LABEL: func.func @not_written_after
// CHECK-NOT:     memref.copy
// CHECK:         return
func.func @not_written_after(%c: i1, %v: f32) -> f32 {
  %id = arith.constant 3 : i64
  %c0 = arith.constant 0 : index
  %a = memref.alloc() : memref<4xf32>
  %b = memref.alloc() : memref<4xf32>
  linalg.fill ins(%v : f32) outs(%a : memref<4xf32>)
  %sent = memref.cast %a : memref<4xf32> to memref<*xf32>
  func.call @terra_rt_fetch_f32(%id, %sent) : (i64, memref<*xf32>) -> ()
  %m = scf.if %c -> (memref<4xf32>) {
    scf.yield %a : memref<4xf32>
  } else {
    linalg.fill ins(%v : f32) outs(%b : memref<4xf32>)
    scf.yield %b : memref<4xf32>
  }
  %x = memref.load %m[%c0] : memref<4xf32>
  return %x : f32
}

// A buffer that a branch may make an alias of the fetched one, written
// after: copied.
// CHECK-LABEL: func.func @written_through_a_branch_result
// CHECK:         memref.copy
// CHECK:         call @terra_rt_fetch_f32
// CHECK:         scf.if
func.func @written_through_a_branch_result(%c: i1, %v: f32) {
  %id = arith.constant 4 : i64
  %a = memref.alloc() : memref<4xf32>
  %b = memref.alloc() : memref<4xf32>
  %sent = memref.cast %a : memref<4xf32> to memref<*xf32>
  func.call @terra_rt_fetch_f32(%id, %sent) : (i64, memref<*xf32>) -> ()
  %m = scf.if %c -> (memref<4xf32>) {
    scf.yield %a : memref<4xf32>
  } else {
    scf.yield %b : memref<4xf32>
  }
  linalg.fill ins(%v : f32) outs(%m : memref<4xf32>)
  return
}

// A feed's memory is not the run's: the runtime copies it when fetched.
// CHECK-LABEL: func.func @feed_fetched
// CHECK-NOT:     memref.copy
// CHECK:         return
func.func @feed_fetched(%v: f32) {
  %id = arith.constant 5 : i64
  %r = arith.constant 1 : i64
  %u = func.call @terra_rt_feed_contiguous_f32(%id, %r) : (i64, i64) -> memref<*xf32>
  %m = memref.cast %u : memref<*xf32> to memref<4xf32>
  %sent = memref.cast %m : memref<4xf32> to memref<*xf32>
  func.call @terra_rt_fetch_f32(%id, %sent) : (i64, memref<*xf32>) -> ()
  linalg.fill ins(%v : f32) outs(%m : memref<4xf32>)
  return
}

// A library call that names the operands it writes (terra.writes) only
// reads the others: the fetched weight it reads after the fetch is not
// copied; a call without the attribute may write every memref it takes.
// CHECK-LABEL: func.func @read_by_a_library_call
// CHECK-NOT:     memref.copy
// CHECK:         call @terra_rt_fetch_f32
// CHECK-NEXT:    call @lib(%{{.*}}, %{{.*}}) {terra.writes = array<i64: 1>}
// CHECK-LABEL: func.func @passed_to_an_unknown_call
// CHECK:         memref.copy
// CHECK:         call @terra_rt_fetch_f32
// CHECK-NEXT:    call @lib(
func.func private @lib(memref<4xf32>, memref<4xf32>)
func.func @read_by_a_library_call(%v: f32) {
  %id = arith.constant 6 : i64
  %w = memref.alloc() : memref<4xf32>
  %out = memref.alloc() : memref<4xf32>
  linalg.fill ins(%v : f32) outs(%w : memref<4xf32>)
  %sent = memref.cast %w : memref<4xf32> to memref<*xf32>
  func.call @terra_rt_fetch_f32(%id, %sent) : (i64, memref<*xf32>) -> ()
  func.call @lib(%w, %out) {terra.writes = array<i64: 1>} : (memref<4xf32>, memref<4xf32>) -> ()
  return
}
func.func @passed_to_an_unknown_call(%v: f32) {
  %id = arith.constant 7 : i64
  %w = memref.alloc() : memref<4xf32>
  %out = memref.alloc() : memref<4xf32>
  linalg.fill ins(%v : f32) outs(%w : memref<4xf32>)
  %sent = memref.cast %w : memref<4xf32> to memref<*xf32>
  func.call @terra_rt_fetch_f32(%id, %sent) : (i64, memref<*xf32>) -> ()
  func.call @lib(%w, %out) : (memref<4xf32>, memref<4xf32>) -> ()
  return
}

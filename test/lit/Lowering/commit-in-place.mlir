// terra-commit-in-place: a fetched new value of a state is computed into
// the state's memory if the host has finished the iteration when the graph
// gets there
// (terra_rt_commit_ready), when nothing reads the old value afterwards and
// nothing after the wait can fail the run.
// RUN: terra-opt %s -split-input-file -terra-commit-in-place | FileCheck %s

#id = affine_map<(i) -> (i)>
#rev = affine_map<(i) -> (3 - i)>
func.func private @terra_rt_state_contiguous_f32(i64, i64) -> memref<*xf32> attributes {llvm.emit_c_interface}
func.func private @terra_rt_feed_contiguous_f32(i64, i64) -> memref<*xf32> attributes {llvm.emit_c_interface}
func.func private @terra_rt_fetch_f32(i64, memref<*xf32>) attributes {llvm.emit_c_interface}
func.func private @terra_rt_check(i1, i64)

// p = p - p * g: the forward reads the old value, a check follows, then
// the update reads the state where it writes.
// CHECK-LABEL: module attributes {terra.donated_states = [0]}
// CHECK-LABEL: func.func @sgd
// CHECK:         %[[P:.*]] = memref.cast %{{.*}} : memref<*xf32> to memref<4xf32>
// CHECK:         call @terra_rt_check
// CHECK-NEXT:    %[[GO:.*]] = call @terra_rt_commit_ready() : () -> i1
// CHECK-NEXT:    %[[BUF:.*]] = scf.if %[[GO]] -> (memref<4xf32>) {
// CHECK-NEXT:      scf.yield %[[P]] : memref<4xf32>
// CHECK-NEXT:    } else {
// CHECK-NEXT:      %[[A:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
// CHECK-NEXT:      scf.yield %[[A]] : memref<4xf32>
// The update reads the state through its output when in place (a separate
// input overlapping the output kept LLVM's vectorizer on the scalar loop).
// CHECK:         scf.if %[[GO]] {
// CHECK-NEXT:      linalg.generic {{.*}} ins(%[[T:.*]] : memref<4xf32>) outs(%[[BUF]] : memref<4xf32>)
// CHECK-NEXT:      ^bb0(%[[TV:.*]]: f32, %[[OUT:.*]]: f32):
// CHECK-NEXT:        arith.subf %[[OUT]], %[[TV]] : f32
// CHECK:         } else {
// CHECK-NEXT:      linalg.generic {{.*}} ins(%[[P]], %[[T]] : memref<4xf32>, memref<4xf32>) outs(%[[BUF]] : memref<4xf32>)
// CHECK:         %[[U:.*]] = memref.cast %[[BUF]] : memref<4xf32> to memref<*xf32>
// CHECK:         call @terra_rt_fetch_state_f32(%{{.*}}, %{{.*}}, %[[U]]) : (i64, i64, memref<*xf32>) -> ()
func.func @sgd() {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c7 = arith.constant 7 : i64
  %s = call @terra_rt_state_contiguous_f32(%c0, %c1) : (i64, i64) -> memref<*xf32>
  %p = memref.cast %s : memref<*xf32> to memref<4xf32>
  %f = call @terra_rt_feed_contiguous_f32(%c1, %c1) : (i64, i64) -> memref<*xf32>
  %g = memref.cast %f : memref<*xf32> to memref<4xf32>
  %t = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%p, %g : memref<4xf32>, memref<4xf32>) outs(%t : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    linalg.yield %m : f32
  }
  %ok = arith.constant true
  call @terra_rt_check(%ok, %c0) : (i1, i64) -> ()
  %new = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%p, %t : memref<4xf32>, memref<4xf32>) outs(%new : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.subf %a, %b : f32
    linalg.yield %d : f32
  }
  %u = memref.cast %new : memref<4xf32> to memref<*xf32>
  call @terra_rt_fetch_f32(%c7, %u) {terra.updates_state = 0 : i64} : (i64, memref<*xf32>) -> ()
  return
}

// -----

#id = affine_map<(i) -> (i)>
#rev = affine_map<(i) -> (3 - i)>
func.func private @terra_rt_state_contiguous_f32(i64, i64) -> memref<*xf32> attributes {llvm.emit_c_interface}
func.func private @terra_rt_fetch_f32(i64, memref<*xf32>) attributes {llvm.emit_c_interface}
func.func private @terra_rt_check(i1, i64)

// The old value is read after the new one's first write (a fetch of it):
// the value stays in its own buffer.
// CHECK-LABEL: func.func @old_value_read_later
// CHECK-NOT:     terra_rt_commit_ready
// CHECK:         call @terra_rt_fetch_f32(%{{.*}}, %{{.*}}) {terra.updates_state = 0 : i64}
func.func @old_value_read_later() {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %s = call @terra_rt_state_contiguous_f32(%c0, %c1) : (i64, i64) -> memref<*xf32>
  %p = memref.cast %s : memref<*xf32> to memref<4xf32>
  %new = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%p : memref<4xf32>) outs(%new : memref<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.addf %a, %a : f32
    linalg.yield %d : f32
  }
  %u = memref.cast %new : memref<4xf32> to memref<*xf32>
  call @terra_rt_fetch_f32(%c1, %u) {terra.updates_state = 0 : i64} : (i64, memref<*xf32>) -> ()
  call @terra_rt_fetch_f32(%c0, %s) : (i64, memref<*xf32>) -> ()
  return
}

// The update reads the state at another position than it writes
// (reversed): writing in place would read values it already wrote.
// CHECK-LABEL: func.func @reversed_update
// CHECK-NOT:     terra_rt_commit_ready
func.func @reversed_update() {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %s = call @terra_rt_state_contiguous_f32(%c0, %c1) : (i64, i64) -> memref<*xf32>
  %p = memref.cast %s : memref<*xf32> to memref<4xf32>
  %new = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
  linalg.generic {indexing_maps = [#rev, #id], iterator_types = ["parallel"]} ins(%p : memref<4xf32>) outs(%new : memref<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  %u = memref.cast %new : memref<4xf32> to memref<*xf32>
  call @terra_rt_fetch_f32(%c1, %u) {terra.updates_state = 0 : i64} : (i64, memref<*xf32>) -> ()
  return
}

// A check after the update could still fail the run: a half-written state.
// CHECK-LABEL: func.func @check_after_update
// CHECK-NOT:     terra_rt_commit_ready
func.func @check_after_update(%ok: i1) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %s = call @terra_rt_state_contiguous_f32(%c0, %c1) : (i64, i64) -> memref<*xf32>
  %p = memref.cast %s : memref<*xf32> to memref<4xf32>
  %new = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%p : memref<4xf32>) outs(%new : memref<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.addf %a, %a : f32
    linalg.yield %d : f32
  }
  call @terra_rt_check(%ok, %c0) : (i1, i64) -> ()
  %u = memref.cast %new : memref<4xf32> to memref<*xf32>
  call @terra_rt_fetch_f32(%c1, %u) {terra.updates_state = 0 : i64} : (i64, memref<*xf32>) -> ()
  return
}

// -----

#id = affine_map<(i) -> (i)>
func.func private @terra_rt_state_contiguous_f32(i64, i64) -> memref<*xf32> attributes {llvm.emit_c_interface}
func.func private @terra_rt_fetch_f32(i64, memref<*xf32>) attributes {llvm.emit_c_interface}

// A value fetched on every trip of a loop: each instance needs its own
// buffer (one state memory would show every instance the last trip's).
// CHECK-LABEL: func.func @fetched_in_a_loop
// CHECK-NOT:     terra_rt_commit_ready
func.func @fetched_in_a_loop() {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %i0 = arith.constant 0 : index
  %i1 = arith.constant 1 : index
  %i3 = arith.constant 3 : index
  %s = call @terra_rt_state_contiguous_f32(%c0, %c1) : (i64, i64) -> memref<*xf32>
  %p = memref.cast %s : memref<*xf32> to memref<4xf32>
  %t = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%p : memref<4xf32>) outs(%t : memref<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  }
  scf.for %k = %i0 to %i3 step %i1 {
    %new = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%t : memref<4xf32>) outs(%new : memref<4xf32>) {
    ^bb0(%a: f32, %o: f32):
      %d = arith.addf %a, %a : f32
      linalg.yield %d : f32
    }
    %u = memref.cast %new : memref<4xf32> to memref<*xf32>
    func.call @terra_rt_fetch_f32(%c1, %u) {terra.updates_state = 0 : i64} : (i64, memref<*xf32>) -> ()
  }
  return
}

// -----

#id = affine_map<(i) -> (i)>
func.func private @terra_rt_state_contiguous_f32(i64, i64) -> memref<*xf32> attributes {llvm.emit_c_interface}
func.func private @terra_rt_fetch_f32(i64, memref<*xf32>) attributes {llvm.emit_c_interface}
func.func private @terra_rt_check(i1, i64)

// A feed's shape guard after the update (Adam's per-parameter bias
// corrections, fed as a list): the runtime checks feeds as the host sends
// them and answers no after a mismatch, so the guard cannot fail once the
// answer is yes.
// CHECK-LABEL: module attributes {terra.donated_states = [0]}
// CHECK-LABEL: func.func @feed_guard_after_update
// CHECK:         call @terra_rt_commit_ready
// CHECK:         call @terra_rt_check(%{{.*}}, %{{.*}}) {terra.feed_guard}
// CHECK:         call @terra_rt_fetch_state_f32
func.func @feed_guard_after_update(%ok: i1) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %s = call @terra_rt_state_contiguous_f32(%c0, %c1) : (i64, i64) -> memref<*xf32>
  %p = memref.cast %s : memref<*xf32> to memref<4xf32>
  %new = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]} ins(%p : memref<4xf32>) outs(%new : memref<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %d = arith.addf %a, %a : f32
    linalg.yield %d : f32
  }
  call @terra_rt_check(%ok, %c0) {terra.feed_guard} : (i1, i64) -> ()
  %u = memref.cast %new : memref<4xf32> to memref<*xf32>
  call @terra_rt_fetch_f32(%c1, %u) {terra.updates_state = 0 : i64} : (i64, memref<*xf32>) -> ()
  return
}

// -----

// Adam's moment: the first step's case makes it (zeros), the other yields
// the state (a branch's result, in the branches' common layout). In place
// only when the case selection picks the state's case and the branch's
// result is the state's memory as the buffer sees it (checked at run time:
// same pointer, offset, sizes and strides).
#id = affine_map<(i) -> (i)>
func.func private @terra_rt_state_contiguous_f32(i64, i64) -> memref<*xf32> attributes {llvm.emit_c_interface}
func.func private @terra_rt_fetch_f32(i64, memref<*xf32>) attributes {llvm.emit_c_interface}
func.func private @terra_rt_case(i64, i64) -> index

// CHECK-LABEL: module attributes {terra.donated_states = [0]}
// CHECK-LABEL: func.func @made_in_one_case
// CHECK:         %[[P:.*]] = memref.cast %{{.*}} : memref<*xf32> to memref<4xf32>
// CHECK:         %[[CASE:.*]] = call @terra_rt_case
// CHECK:         %[[R:.*]] = scf.index_switch %[[CASE]]
// CHECK:         %[[READY:.*]] = call @terra_rt_commit_ready() : () -> i1
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[IS:.*]] = arith.cmpi eq, %[[CASE]], %[[ONE]] : index
// CHECK-NEXT:    %[[IN:.*]] = arith.andi %[[READY]], %[[IS]] : i1
// CHECK-NEXT:    %[[PP:.*]] = memref.extract_aligned_pointer_as_index %[[P]]
// CHECK-NEXT:    %[[RP:.*]] = memref.extract_aligned_pointer_as_index %[[R]]
// CHECK-NEXT:    %[[SAME:.*]] = arith.cmpi eq, %[[RP]], %[[PP]] : index
// CHECK:         memref.extract_strided_metadata %[[R]]
// CHECK:         %[[GO:.*]] = arith.andi %[[IN]], %{{.*}} : i1
// CHECK-NEXT:    %[[BUF:.*]] = scf.if %[[GO]] -> (memref<4xf32>) {
// CHECK-NEXT:      scf.yield %[[P]] : memref<4xf32>
// CHECK:         scf.if %[[GO]] {
// CHECK-NEXT:      linalg.generic {{.*}} ins(%{{.*}} : memref<4xf32>) outs(%[[BUF]] : memref<4xf32>)
// CHECK:         } else {
// CHECK-NEXT:      linalg.generic {{.*}} ins(%[[R]], %{{.*}} : memref<4xf32, strided<[?], offset: ?>>, memref<4xf32>) outs(%[[BUF]] : memref<4xf32>)
// CHECK:         call @terra_rt_fetch_state_f32
func.func @made_in_one_case(%g: memref<4xf32>) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c2 = arith.constant 2 : i64
  %c7 = arith.constant 7 : i64
  %s = call @terra_rt_state_contiguous_f32(%c0, %c1) : (i64, i64) -> memref<*xf32>
  %p = memref.cast %s : memref<*xf32> to memref<4xf32>
  %case = call @terra_rt_case(%c7, %c2) : (i64, i64) -> index
  %r = scf.index_switch %case -> memref<4xf32, strided<[?], offset: ?>>
  case 0 {
    %z = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
    %zc = memref.cast %z : memref<4xf32> to memref<4xf32, strided<[?], offset: ?>>
    scf.yield %zc : memref<4xf32, strided<[?], offset: ?>>
  }
  case 1 {
    %pc = memref.cast %p : memref<4xf32> to memref<4xf32, strided<[?], offset: ?>>
    scf.yield %pc : memref<4xf32, strided<[?], offset: ?>>
  }
  default {
    %z = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
    %zc = memref.cast %z : memref<4xf32> to memref<4xf32, strided<[?], offset: ?>>
    scf.yield %zc : memref<4xf32, strided<[?], offset: ?>>
  }
  %new = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%r, %g : memref<4xf32, strided<[?], offset: ?>>, memref<4xf32>) outs(%new : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.addf %a, %b : f32
    linalg.yield %d : f32
  }
  %u = memref.cast %new : memref<4xf32> to memref<*xf32>
  call @terra_rt_fetch_f32(%c1, %u) {terra.updates_state = 0 : i64, terra.updates_state_case = array<i64: 7, 1>} : (i64, memref<*xf32>) -> ()
  return
}

// The case selection is not in the entry block (nor is it known before
// the update): not in place.
// CHECK-LABEL: func.func @case_not_known
// CHECK-NOT:     terra_rt_commit_ready
// CHECK:         call @terra_rt_fetch_f32
func.func @case_not_known(%g: memref<4xf32>) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %s = call @terra_rt_state_contiguous_f32(%c0, %c1) : (i64, i64) -> memref<*xf32>
  %p = memref.cast %s : memref<*xf32> to memref<4xf32>
  %new = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%p, %g : memref<4xf32>, memref<4xf32>) outs(%new : memref<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %d = arith.addf %a, %b : f32
    linalg.yield %d : f32
  }
  %u = memref.cast %new : memref<4xf32> to memref<*xf32>
  call @terra_rt_fetch_f32(%c1, %u) {terra.updates_state = 0 : i64, terra.updates_state_case = array<i64: 9, 1>} : (i64, memref<*xf32>) -> ()
  return
}

// The selection is received twice (here once more inside a branch): which
// receive chose the branch is not known, so not in place.
// CHECK-LABEL: func.func @case_received_twice
// CHECK-NOT:     terra_rt_commit_ready
// CHECK:         call @terra_rt_fetch_f32
func.func @case_received_twice(%g: memref<4xf32>, %b: i1) {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c2 = arith.constant 2 : i64
  %c5 = arith.constant 5 : i64
  %s = call @terra_rt_state_contiguous_f32(%c0, %c1) : (i64, i64) -> memref<*xf32>
  %p = memref.cast %s : memref<*xf32> to memref<4xf32>
  %case = call @terra_rt_case(%c5, %c2) : (i64, i64) -> index
  scf.if %b {
    %again = func.call @terra_rt_case(%c5, %c2) : (i64, i64) -> index
  }
  %new = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]} ins(%p, %g : memref<4xf32>, memref<4xf32>) outs(%new : memref<4xf32>) {
  ^bb0(%a: f32, %x: f32, %o: f32):
    %d = arith.addf %a, %x : f32
    linalg.yield %d : f32
  }
  %u = memref.cast %new : memref<4xf32> to memref<*xf32>
  call @terra_rt_fetch_f32(%c1, %u) {terra.updates_state = 0 : i64, terra.updates_state_case = array<i64: 5, 1>} : (i64, memref<*xf32>) -> ()
  return
}

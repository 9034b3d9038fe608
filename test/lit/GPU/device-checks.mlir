// RUN: terra-opt %s -split-input-file -terra-gpu-device-checks -verify-diagnostics | FileCheck %s

// A gather's per-element index check (terra-lower-graph calls
// terra_rt_check only when it fails) inside a kernel: the failure stores
// its message's index + 1 into the run's flag, read once at the function's
// entry, and the load with the index runs only when the check holds. The
// host's own check keeps its call.
// CHECK-LABEL: func.func private @terra_rt_check_flag() -> memref<1xi32>
// CHECK-SAME:    llvm.emit_c_interface
// CHECK-LABEL: func.func @gather
// CHECK-NEXT:    %[[FLAG:.*]] = call @terra_rt_check_flag() : () -> memref<1xi32>
// CHECK:         call @terra_rt_check(%{{.*}}, %{{.*}}) : (i1, i64) -> ()
// CHECK:         gpu.launch
// CHECK:           %[[OK:.*]] = arith.cmpi ult
// CHECK:           %[[FAILED:.*]] = arith.xori %[[OK]], %true
// CHECK:           scf.if %[[FAILED]] {
// CHECK:             %[[ID:.*]] = arith.trunci %{{.*}} : i64 to i32
// CHECK:             %[[CODE:.*]] = arith.addi %[[ID]], %c1_i32
// CHECK:             memref.store %[[CODE]], %[[FLAG]][%c0{{.*}}] : memref<1xi32>
// CHECK:           }
// CHECK:           scf.if %[[OK]] {
// CHECK:             memref.load %arg1
// CHECK:             memref.store
// CHECK:           }
// CHECK-NOT:       terra_rt_check(
// CHECK:           gpu.terminator
func.func private @terra_rt_check(i1, i64)
func.func @gather(%idx: memref<16xi64>, %table: memref<10xf32>, %out: memref<16xf32>, %n: i1) {
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c10 = arith.constant 10 : index
  %msg = arith.constant 2 : i64
  %host = arith.constant 0 : i64
  func.call @terra_rt_check(%n, %host) : (i1, i64) -> ()
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c16, %sy = %c1, %sz = %c1) {
    %i64 = memref.load %idx[%tx] : memref<16xi64>
    %i = arith.index_cast %i64 : i64 to index
    %ok = arith.cmpi ult, %i, %c10 : index
    %true = arith.constant true
    %failed = arith.xori %ok, %true : i1
    scf.if %failed {
      func.call @terra_rt_check(%ok, %msg) : (i1, i64) -> ()
    }
    %v = memref.load %table[%i] : memref<10xf32>
    memref.store %v, %out[%tx] : memref<16xf32>
    gpu.terminator
  }
  return
}

// -----

// A check inside a reduction loop of a kernel (the CPU-run kernels of
// terra-linalg-to-gpu{kernels=false}: block-mapped scf.parallel): the
// loop-carried sum is the guarded part's result, zero when the check
// fails (the run fails; the value is never used).
// CHECK-LABEL: func.func @sum_gathered
// CHECK:         %[[FLAG:.*]] = call @terra_rt_check_flag()
// CHECK:         scf.parallel
// CHECK:           scf.for {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (f32)
// CHECK:             %[[OK:.*]] = arith.cmpi
// CHECK:             scf.if %{{.*}} {
// CHECK:               memref.store %{{.*}}, %[[FLAG]]
// CHECK:             }
// CHECK:             %[[R:.*]] = scf.if %[[OK]] -> (f32) {
// CHECK:               %[[V:.*]] = memref.load
// CHECK:               %[[S:.*]] = arith.addf %[[ACC]], %[[V]]
// CHECK:               scf.yield %[[S]] : f32
// CHECK:             } else {
// CHECK:               %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK:               scf.yield %[[Z]] : f32
// CHECK:             }
// CHECK:             scf.yield %[[R]] : f32
func.func private @terra_rt_check(i1, i64)
func.func @sum_gathered(%idx: memref<4x8xi64>, %table: memref<10xf32>, %out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %c10 = arith.constant 10 : index
  %zero = arith.constant 0.0 : f32
  %msg = arith.constant 0 : i64
  scf.parallel (%r) = (%c0) to (%c4) step (%c1) {
    %s = scf.for %k = %c0 to %c8 step %c1 iter_args(%acc = %zero) -> (f32) {
      %i64 = memref.load %idx[%r, %k] : memref<4x8xi64>
      %i = arith.index_cast %i64 : i64 to index
      %ok = arith.cmpi ult, %i, %c10 : index
      func.call @terra_rt_check(%ok, %msg) : (i1, i64) -> ()
      %v = memref.load %table[%i] : memref<10xf32>
      %a = arith.addf %acc, %v : f32
      scf.yield %a : f32
    }
    memref.store %s, %out[%r] : memref<4xf32>
    scf.reduce
  } {mapping = [#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
  return
}

// -----

// Threads whose check failed cannot skip a barrier the others wait at.
func.func private @terra_rt_check(i1, i64)
func.func @barrier(%idx: memref<16xi64>, %table: memref<10xf32>, %out: memref<16xf32>) {
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c10 = arith.constant 10 : index
  %msg = arith.constant 0 : i64
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c16, %sy = %c1, %sz = %c1) {
    %i64 = memref.load %idx[%tx] : memref<16xi64>
    %i = arith.index_cast %i64 : i64 to index
    %ok = arith.cmpi ult, %i, %c10 : index
    // expected-error @below {{a runtime check inside a kernel is followed by a gpu.barrier}}
    func.call @terra_rt_check(%ok, %msg) : (i1, i64) -> ()
    %v = memref.load %table[%i] : memref<10xf32>
    gpu.barrier
    memref.store %v, %out[%tx] : memref<16xf32>
    gpu.terminator
  }
  return
}

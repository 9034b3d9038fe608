// RUN: terra-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(func.func(terra-gpu-host-kernels))' | FileCheck %s
// RUN: terra-opt %s -split-input-file -verify-diagnostics -pass-pipeline='builtin.module(func.func(terra-gpu-host-kernels{kernels=false}))' | FileCheck %s --check-prefix=LOOPS

// A fed scalar (SGD's momentum) the lowering loads on the host for a
// kernel: the kernel loads it itself, with the arithmetic in between (the
// host would read device memory: the CUDA co-execution segfault). The
// buffer's release after the kernel does not stop the move.
// CHECK-LABEL: func.func @fed_scalar
// CHECK:         %[[FEED:.*]] = call @terra_rt_feed_contiguous_f32
// CHECK:         %[[CAST:.*]] = memref.cast %[[FEED]]
// CHECK-NOT:     memref.load
// CHECK:         gpu.launch
// CHECK-NEXT:      %[[S:.*]] = memref.load %[[CAST]][] : memref<f32>
// CHECK-NEXT:      %[[NEG:.*]] = arith.negf %[[S]]
// CHECK:           arith.mulf %{{.*}}, %[[NEG]]
// CHECK:         memref.dealloc
func.func private @terra_rt_feed_contiguous_f32(i64, i64) -> memref<*xf32>
func.func @fed_scalar(%out: memref<16xf32>) {
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %id = arith.constant 37 : i64
  %rank = arith.constant 0 : i64
  %f = call @terra_rt_feed_contiguous_f32(%id, %rank) : (i64, i64) -> memref<*xf32>
  %cast = memref.cast %f : memref<*xf32> to memref<f32>
  %s = memref.load %cast[] : memref<f32>
  %neg = arith.negf %s : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c16, %sy = %c1, %sz = %c1) {
    %v = memref.load %out[%tx] : memref<16xf32>
    %m = arith.mulf %v, %neg : f32
    memref.store %m, %out[%tx] : memref<16xf32>
    gpu.terminator
  }
  %base, %off = memref.extract_strided_metadata %cast : memref<f32> -> memref<f32>, index
  memref.dealloc %base : memref<f32>
  return
}

// -----

// A kernel that uses a constant both directly and through the moved
// arithmetic: only what leads to the load moves (in order, operands
// first); the constant stays a kernel argument.
// CHECK-LABEL: func.func @chain_with_constant
// CHECK:         %[[C:.*]] = arith.constant 3.000000e+00 : f32
// CHECK:         gpu.launch
// CHECK-NEXT:      %[[S:.*]] = memref.load %{{.*}}[] : memref<f32>
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[S]], %[[C]]
// CHECK-NEXT:      arith.addf %[[M]], %[[C]]
func.func @chain_with_constant(%buf: memref<f32>, %out: memref<16xf32>) {
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %c3 = arith.constant 3.0 : f32
  %s = memref.load %buf[] : memref<f32>
  %m = arith.mulf %s, %c3 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c16, %sy = %c1, %sz = %c1) {
    %v = arith.addf %m, %c3 : f32
    memref.store %v, %out[%tx] : memref<16xf32>
    gpu.terminator
  }
  return
}

// -----

// A scalar written by a kernel after the host loaded it: the kernel cannot
// load it (it would read the new value); the host reads a copy made right
// where it loaded.
// The entry point is declared at the top of the module.
// CHECK:       func.func private @terra_rt_to_host_f32(memref<*xf32>) -> memref<*xf32> attributes {llvm.emit_c_interface}
// CHECK-LABEL: func.func @written_after_the_load
// CHECK:         %[[U:.*]] = memref.cast %[[BUF:.*]] : memref<f32> to memref<*xf32>
// CHECK-NEXT:    %[[H:.*]] = call @terra_rt_to_host_f32(%[[U]])
// CHECK-NEXT:    %[[HC:.*]] = memref.cast %[[H]] : memref<*xf32> to memref<f32>
// CHECK-NEXT:    %[[S:.*]] = memref.load %[[HC]][] : memref<f32>
// CHECK:         gpu.launch
// CHECK:         gpu.launch
// CHECK:           arith.mulf %{{.*}}, %[[S]]
func.func @written_after_the_load(%buf: memref<f32>, %out: memref<16xf32>) {
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %zero = arith.constant 0.0 : f32
  %s = memref.load %buf[] : memref<f32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    memref.store %zero, %buf[] : memref<f32>
    gpu.terminator
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c16, %sy = %c1, %sz = %c1) {
    %v = memref.load %out[%tx] : memref<16xf32>
    %m = arith.mulf %v, %s : f32
    memref.store %m, %out[%tx] : memref<16xf32>
    gpu.terminator
  }
  return
}

// -----

// A sequential loop over graph buffers (an in-order scatter-add) becomes
// one single-thread kernel, whole: the loop and its branch.
// CHECK-LABEL: func.func @sequential_loop
// CHECK:         gpu.launch blocks({{.*}}) in (%{{[^ ]*}} = %[[ONE:[^,]+]], %{{[^ ]*}} = %[[ONE]], %{{[^ ]*}} = %[[ONE]]) threads({{.*}}) in (%{{[^ ]*}} = %[[ONE]], %{{[^ ]*}} = %[[ONE]], %{{[^ ]*}} = %[[ONE]])
// CHECK-NEXT:      scf.for
// CHECK:             memref.load %{{.*}} : memref<5xi64>
// CHECK:             scf.if
// CHECK:               memref.store
// CHECK:           gpu.terminator
// CHECK-NEXT:    }
// CHECK-NEXT:    return
// LOOPS-LABEL: func.func @sequential_loop
// LOOPS:         scf.parallel (%{{.*}}) = (%[[Z:.*]]) to (%[[O:.*]]) step (%[[O]])
// LOOPS-NEXT:      scf.parallel (%{{.*}}) = (%[[Z]]) to (%[[O]]) step (%[[O]])
// LOOPS-NEXT:        scf.for
// LOOPS:           } {mapping = [#gpu.loop_dim_map<processor = thread_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
// LOOPS-NEXT:      scf.reduce
// LOOPS-NEXT:    } {mapping = [#gpu.loop_dim_map<processor = block_x, map = (d0) -> (d0), bound = (d0) -> (d0)>]}
func.func @sequential_loop(%idx: memref<5xi64>, %src: memref<5xf32>, %out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c16 = arith.constant 16 : index
  scf.for %i = %c0 to %c5 step %c1 {
    %j64 = memref.load %idx[%i] : memref<5xi64>
    %j = arith.index_cast %j64 : i64 to index
    %ok = arith.cmpi ult, %j, %c16 : index
    scf.if %ok {
      %a = memref.load %out[%j] : memref<16xf32>
      %b = memref.load %src[%i] : memref<5xf32>
      %sum = arith.addf %a, %b : f32
      memref.store %sum, %out[%j] : memref<16xf32>
    }
  }
  return
}

// -----

// An index the host reads to place a slice and check a bound (index_add's
// loop): one host copy of the index buffer before the loop serves every
// iteration; the loop's own kernels stay launches of the host.
// CHECK-LABEL: func.func @host_index_loop
// CHECK:         call @terra_rt_to_host_i64
// CHECK-NEXT:    %[[H:.*]] = memref.cast %{{.*}} : memref<*xi64> to memref<5xi64>
// CHECK-NEXT:    scf.for %[[I:.*]] =
// CHECK-NEXT:      memref.load %[[H]][%[[I]]] : memref<5xi64>
// CHECK:           call @terra_rt_check
// CHECK:           gpu.launch
// CHECK-NOT:     terra_rt_to_host
// CHECK:         return
func.func private @terra_rt_check(i1, i64)
func.func @host_index_loop(%idx: memref<5xi64>, %out: memref<16x16xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c5 = arith.constant 5 : index
  %c16 = arith.constant 16 : index
  %msg = arith.constant 3 : i64
  %one = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c5 step %c1 {
    %j64 = memref.load %idx[%i] : memref<5xi64>
    %j = arith.index_cast %j64 : i64 to index
    %ok = arith.cmpi ult, %j, %c16 : index
    func.call @terra_rt_check(%ok, %msg) : (i1, i64) -> ()
    %col = memref.subview %out[0, %j] [16, 1] [1, 1] : memref<16x16xf32> to memref<16x1xf32, strided<[16, 1], offset: ?>>
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c16, %sy = %c1, %sz = %c1) {
      %v = memref.load %col[%tx, %c0] : memref<16x1xf32, strided<[16, 1], offset: ?>>
      %w = arith.addf %v, %one : f32
      memref.store %w, %col[%tx, %c0] : memref<16x1xf32, strided<[16, 1], offset: ?>>
      gpu.terminator
    }
  }
  return
}

// -----

// A host store next to a call (which keeps the branch on the host) is a
// single-thread kernel of its own.
// CHECK-LABEL: func.func @host_store
// CHECK:         scf.if
// CHECK-NEXT:      call @terra_rt_check
// CHECK:           gpu.launch
// CHECK-NEXT:        memref.store
func.func private @terra_rt_check(i1, i64)
func.func @host_store(%out: memref<16xf32>, %ok: i1) {
  %c0 = arith.constant 0 : index
  %msg = arith.constant 0 : i64
  %one = arith.constant 1.0 : f32
  scf.if %ok {
    func.call @terra_rt_check(%ok, %msg) : (i1, i64) -> ()
    memref.store %one, %out[%c0] : memref<16xf32>
  }
  return
}

// -----

// An atomic update whose result the host uses: no kernel can hold it.
func.func private @terra_rt_check(i1, i64)
func.func @host_atomic(%out: memref<16xf32>) {
  %c0 = arith.constant 0 : index
  %msg = arith.constant 0 : i64
  %one = arith.constant 1.0 : f32
  // expected-error @below {{host code of a GPU graph writes a graph buffer's elements here, and no single-thread kernel can hold it}}
  %old = memref.atomic_rmw addf %one, %out[%c0] : (f32, memref<16xf32>) -> f32
  %ok = arith.cmpf olt, %old, %one : f32
  func.call @terra_rt_check(%ok, %msg) : (i1, i64) -> ()
  return
}

// -----

// Host memory stays the host's: stack slots are read and written in place,
// and private helpers (the dealloc helper) are left alone.
// CHECK-LABEL: func.func private @helper
// CHECK-NOT:     gpu.launch
// CHECK-LABEL: func.func @host_memory
// CHECK-NOT:     gpu.launch
// CHECK-NOT:     terra_rt_to_host
func.func private @helper(%a: memref<?xi1>) {
  %c0 = arith.constant 0 : index
  %t = arith.constant true
  memref.store %t, %a[%c0] : memref<?xi1>
  return
}
func.func @host_memory() -> i1 {
  %c0 = arith.constant 0 : index
  %t = arith.constant true
  %a = memref.alloca() : memref<2xi1>
  memref.store %t, %a[%c0] : memref<2xi1>
  %v = memref.load %a[%c0] : memref<2xi1>
  return %v : i1
}

// -----

// A dynamic reshape's shape array is the host's (terra-gpu-host-scratch
// makes it a stack slot): its stores and the reshape stay on the host.
// CHECK-LABEL: func.func @reshape_shape
// CHECK-NOT:     gpu.launch
// CHECK-NOT:     terra_rt_to_host
// CHECK:         memref.reshape
func.func @reshape_shape(%buf: memref<?xf32>, %n: index) -> memref<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %shape = memref.alloc() : memref<2xindex>
  memref.store %c2, %shape[%c0] : memref<2xindex>
  memref.store %n, %shape[%c1] : memref<2xindex>
  %r = memref.reshape %buf(%shape) : (memref<?xf32>, memref<2xindex>) -> memref<?x?xf32>
  memref.dealloc %shape : memref<2xindex>
  return %r : memref<?x?xf32>
}

// -----

// A constant table a kernel reads moves into it: kernel outlining then
// gives the kernel module its own copy of the global.
// CHECK-LABEL: func.func @constant_table
// CHECK-NOT:     memref.get_global
// CHECK:         gpu.launch
// CHECK-NEXT:      %[[T:.*]] = memref.get_global @table : memref<4xf32>
// CHECK:           memref.load %[[T]][
memref.global "private" constant @table : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>
func.func @constant_table(%out: memref<4xf32>) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %t = memref.get_global @table : memref<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c4, %sy = %c1, %sz = %c1) {
    %v = memref.load %t[%tx] : memref<4xf32>
    memref.store %v, %out[%tx] : memref<4xf32>
    gpu.terminator
  }
  return
}

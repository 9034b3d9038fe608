// RUN: terra-opt %s -split-input-file -verify-diagnostics -terra-gpu-host-scratch | FileCheck %s

// The dealloc helper's arrays (what -lower-deallocations creates) are the
// host's own: they become stack slots at the function's entry, even inside
// a loop, and their deallocs go away. A buffer a kernel reads stays an
// allocation (device memory at run time).
// CHECK-LABEL: func.func @step
// CHECK-DAG:     %[[PTRS:.*]] = memref.alloca() : memref<2xindex>
// CHECK-DAG:     %[[OWN:.*]] = memref.alloca() : memref<2xi1>
// CHECK:         %[[BUF:.*]] = memref.alloc() : memref<64xf32>
// CHECK:         gpu.launch_func @kernels::@k {{.*}} args(%[[BUF]] : memref<64xf32>)
// CHECK:         scf.for
// CHECK:           memref.store %{{.*}}, %[[PTRS]][
// CHECK:           %[[CAST:.*]] = memref.cast %[[OWN]] :
// CHECK:           call @helper(%{{.*}}, %[[CAST]])
// CHECK:           memref.load %[[OWN]][
// CHECK-NOT:     memref.dealloc %[[PTRS]] :
// CHECK-NOT:     memref.dealloc %[[OWN]] :
// CHECK:         memref.dealloc %[[BUF]]
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @k(%arg0: memref<64xf32>) kernel {
      gpu.return
    }
  }
  func.func private @helper(%p: memref<?xindex>, %o: memref<?xi1>) {
    return
  }
  func.func @step(%n: index) -> i1 {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %false = arith.constant false
    %buf = memref.alloc() : memref<64xf32>
    gpu.launch_func @kernels::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%buf : memref<64xf32>)
    %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %false) -> i1 {
      %ptrs = memref.alloc() : memref<2xindex>
      %own = memref.alloc() : memref<2xi1>
      memref.store %i, %ptrs[%c0] : memref<2xindex>
      %pc = memref.cast %ptrs : memref<2xindex> to memref<?xindex>
      %oc = memref.cast %own : memref<2xi1> to memref<?xi1>
      func.call @helper(%pc, %oc) : (memref<?xindex>, memref<?xi1>) -> ()
      %b = memref.load %own[%c1] : memref<2xi1>
      memref.dealloc %ptrs : memref<2xindex>
      memref.dealloc %own : memref<2xi1>
      %x = arith.ori %acc, %b : i1
      scf.yield %x : i1
    }
    memref.dealloc %buf : memref<64xf32>
    return %r : i1
  }
}

// -----

// A buffer the host code fills with a dynamic size cannot be a stack slot:
// an error, not a host write into device memory.
func.func private @use(%p: memref<?xindex>)
func.func private @helper(%p: memref<?xindex>) {
  return
}
func.func @dynamic(%n: index) {
  %c0 = arith.constant 0 : index
  // expected-error @+1 {{a host-only buffer of dynamic size in a GPU graph}}
  %ptrs = memref.alloc(%n) : memref<?xindex>
  memref.store %n, %ptrs[%c0] : memref<?xindex>
  func.call @helper(%ptrs) : (memref<?xindex>) -> ()
  memref.dealloc %ptrs : memref<?xindex>
  return
}

// -----

// Passed to a runtime entry point (no body): not the host's scratch.
// CHECK-LABEL: func.func @to_runtime
// CHECK:         memref.alloc() : memref<4xf32>
func.func private @terra_rt_fetch(%p: memref<4xf32>)
func.func @to_runtime() {
  %buf = memref.alloc() : memref<4xf32>
  func.call @terra_rt_fetch(%buf) : (memref<4xf32>) -> ()
  return
}

// -----

// A dynamic reshape's shape array is read by the host (to build the
// result's descriptor): a stack slot too. The reshaped buffer stays
// device memory.
// CHECK-LABEL: func.func @reshape_shape
// CHECK:         %[[SHAPE:.*]] = memref.alloca() : memref<2xindex>
// CHECK:         %[[BUF:.*]] = memref.alloc(%{{.*}}) : memref<?xf32>
// CHECK:         memref.store %{{.*}}, %[[SHAPE]][
// CHECK:         memref.reshape %[[BUF]](%[[SHAPE]])
// CHECK-NOT:     memref.dealloc %[[SHAPE]]
func.func private @use_index(%p: index)
func.func @reshape_shape(%n: index) -> memref<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %shape = memref.alloc() : memref<2xindex>
  %total = arith.muli %n, %c2 : index
  %buf = memref.alloc(%total) : memref<?xf32>
  memref.store %c2, %shape[%c0] : memref<2xindex>
  memref.store %n, %shape[%c1] : memref<2xindex>
  %r = memref.reshape %buf(%shape) : (memref<?xf32>, memref<2xindex>) -> memref<?x?xf32>
  %p = memref.extract_aligned_pointer_as_index %shape : memref<2xindex> -> index
  func.call @use_index(%p) : (index) -> ()
  memref.dealloc %shape : memref<2xindex>
  return %r : memref<?x?xf32>
}

// RUN: terra-opt %s -split-input-file -terra-gpu-merge-modules | FileCheck %s

// Two outlined modules, each with a kernel named like the other's: the
// kernels take their modules' names in one module, the identical helper
// is kept once, the differing global is renamed, and the launches follow.
// CHECK-LABEL: module attributes
// CHECK-NOT:     gpu.module @a
// CHECK:         gpu.module @terra_kernels
// CHECK-DAG:       func.func private @helper(f32) -> f32
// CHECK-DAG:       memref.global "private" constant @table : memref<2xf32> = dense<[1.000000e+00, 2.000000e+00]>
// CHECK-DAG:       memref.global "private" constant @[[T2:table_[0-9]+]] : memref<2xf32> = dense<[3.000000e+00, 4.000000e+00]>
// CHECK-DAG:       gpu.func @a(%{{.*}}: memref<2xf32>) kernel
// CHECK-DAG:       gpu.func @b(%{{.*}}: memref<2xf32>) kernel
// CHECK:         func.func @host
// CHECK:           gpu.launch_func @terra_kernels::@a
// CHECK:           gpu.launch_func @terra_kernels::@b
module attributes {gpu.container_module} {
  gpu.module @a {
    func.func private @helper(f32) -> f32
    memref.global "private" constant @table : memref<2xf32> = dense<[1.0, 2.0]>
    gpu.func @k(%out: memref<2xf32>) kernel {
      %t = memref.get_global @table : memref<2xf32>
      %c0 = arith.constant 0 : index
      %v = memref.load %t[%c0] : memref<2xf32>
      %r = func.call @helper(%v) : (f32) -> f32
      memref.store %r, %out[%c0] : memref<2xf32>
      gpu.return
    }
  }
  gpu.module @b {
    func.func private @helper(f32) -> f32
    memref.global "private" constant @table : memref<2xf32> = dense<[3.0, 4.0]>
    gpu.func @k(%out: memref<2xf32>) kernel {
      %t = memref.get_global @table : memref<2xf32>
      %c1 = arith.constant 1 : index
      %v = memref.load %t[%c1] : memref<2xf32>
      memref.store %v, %out[%c1] : memref<2xf32>
      gpu.return
    }
  }
  func.func @host(%out: memref<2xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @a::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%out : memref<2xf32>)
    gpu.launch_func @b::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%out : memref<2xf32>)
    return
  }
}

// -----

// The renamed global's uses follow it.
// CHECK-LABEL: module attributes
// CHECK:         gpu.func @b(
// CHECK:           memref.get_global @[[T:table_[0-9]+]]
// CHECK:         memref.global "private" constant @[[T]] : memref<2xf32> = dense<[3.000000e+00, 4.000000e+00]>
module attributes {gpu.container_module} {
  gpu.module @a {
    memref.global "private" constant @table : memref<2xf32> = dense<[1.0, 2.0]>
    gpu.func @k(%out: memref<2xf32>) kernel {
      %t = memref.get_global @table : memref<2xf32>
      %c0 = arith.constant 0 : index
      %v = memref.load %t[%c0] : memref<2xf32>
      memref.store %v, %out[%c0] : memref<2xf32>
      gpu.return
    }
  }
  gpu.module @b {
    gpu.func @k(%out: memref<2xf32>) kernel {
      %t = memref.get_global @table : memref<2xf32>
      %c0 = arith.constant 0 : index
      %v = memref.load %t[%c0] : memref<2xf32>
      memref.store %v, %out[%c0] : memref<2xf32>
      gpu.return
    }
    memref.global "private" constant @table : memref<2xf32> = dense<[3.0, 4.0]>
  }
  func.func @host(%out: memref<2xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @a::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%out : memref<2xf32>)
    gpu.launch_func @b::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%out : memref<2xf32>)
    return
  }
}

// -----

// Modules with different targets are left alone.
// CHECK-LABEL: module attributes
// CHECK:         gpu.module @a [#nvvm.target<chip = "sm_90">]
// CHECK:         gpu.module @b [#nvvm.target<chip = "sm_80">]
// CHECK:         gpu.launch_func @a::@k
module attributes {gpu.container_module} {
  gpu.module @a [#nvvm.target<chip = "sm_90">] {
    gpu.func @k() kernel {
      gpu.return
    }
  }
  gpu.module @b [#nvvm.target<chip = "sm_80">] {
    gpu.func @k() kernel {
      gpu.return
    }
  }
  func.func @host() {
    %c1 = arith.constant 1 : index
    gpu.launch_func @a::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
}

// -----

// Kernels identical but for their names and grid hints are kept once, and
// every launch points at the kept one; its grid hint goes when the hints
// differ. A kernel that differs (the constant) is kept.
// CHECK-LABEL: module attributes
// CHECK:         gpu.module @terra_kernels
// CHECK:           gpu.func @a(%{{.*}}: memref<4xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>}
// CHECK-NOT:       gpu.func @b
// CHECK:           gpu.func @c(
// CHECK-SAME:        known_grid_size = array<i32: 1, 1, 1>
// CHECK:         gpu.launch_func @terra_kernels::@a
// CHECK:         gpu.launch_func @terra_kernels::@a
// CHECK:         gpu.launch_func @terra_kernels::@c
module attributes {gpu.container_module} {
  gpu.module @a {
    gpu.func @k(%out: memref<4xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>, known_grid_size = array<i32: 1, 1, 1>} {
      %c0 = arith.constant 0 : index
      %v = arith.constant 1.0 : f32
      memref.store %v, %out[%c0] : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @b {
    gpu.func @k(%out: memref<4xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>, known_grid_size = array<i32: 2, 1, 1>} {
      %c0 = arith.constant 0 : index
      %v = arith.constant 1.0 : f32
      memref.store %v, %out[%c0] : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @c {
    gpu.func @k(%out: memref<4xf32>) kernel attributes {known_block_size = array<i32: 256, 1, 1>, known_grid_size = array<i32: 1, 1, 1>} {
      %c0 = arith.constant 0 : index
      %v = arith.constant 2.0 : f32
      memref.store %v, %out[%c0] : memref<4xf32>
      gpu.return
    }
  }
  func.func @host(%out: memref<4xf32>) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c256 = arith.constant 256 : index
    gpu.launch_func @a::@k blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%out : memref<4xf32>)
    gpu.launch_func @b::@k blocks in (%c2, %c1, %c1) threads in (%c256, %c1, %c1) args(%out : memref<4xf32>)
    gpu.launch_func @c::@k blocks in (%c1, %c1, %c1) threads in (%c256, %c1, %c1) args(%out : memref<4xf32>)
    return
  }
}

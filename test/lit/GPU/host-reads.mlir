// The host code of a GPU graph never reads a graph buffer's elements (they
// are device memory: a host read was the CUDA co-execution segfault). A fed
// scalar (SGD's momentum, fed as a 0-d tensor) is loaded by the kernels
// that use it; index_add's indices, which the host reads to place each
// slice, come from a host copy (terra_rt_to_host_i64), which the runtime
// library defines. A constant table (avg_pool2d's divisors without the
// padding) is the kernel module's global, never a host global a kernel
// would read.
// REQUIRES: terra-cuda-runtime
// RUN: terra-opt %s -terra-gpu-pipeline | terra-translate --mlir-to-llvmir -o %t.ll
// RUN: FileCheck %s --input-file=%t.ll
// RUN: llc -O0 -filetype=obj -relocation-model=pic %t.ll -o %t.o
// RUN: llvm-nm --undefined-only --format=just-symbols %t.o > %t.undefined
// RUN: llvm-nm --defined-only --format=just-symbols %terra_cuda_runtime_lib %terra_runtime_lib > %t.defined
// RUN: grep -v -x -F -f %t.defined %t.undefined > %t.missing
// RUN: FileCheck %s --check-prefix=MISSING --input-file=%t.missing

// CHECK-LABEL: define void @step()
// CHECK-NOT:     load float
// CHECK-NOT:     @__constant
// CHECK:         call { i64, ptr } @terra_rt_to_host_i64(
// CHECK-NOT:     load float
// CHECK-NOT:     @__constant
// CHECK:         ret void
// The kernel image holds the table.
// RUN: terra-opt %s -terra-gpu-pipeline | FileCheck %s --check-prefix=PTX
// PTX: .global .align 64 .b8 __constant_3x3xf32[36]

// MISSING: {{^free$}}
// MISSING-NOT: {{.}}
module {
  terra.graph @step {
    %p = terra.feed 1 : tensor<16x6xf32>
    %g = terra.feed 2 : tensor<16x6xf32>
    %momentum = terra.feed 3 : tensor<f32>
    %m = terra.op "aten._foreach_mul_.Scalar"(%p, %momentum) : (tensor<16x6xf32>, tensor<f32>) -> tensor<16x6xf32>
    %lr = terra.feed 4 : tensor<f32>
    %u = terra.op "aten._foreach_add_.List"(%m, %g, %lr) : (tensor<16x6xf32>, tensor<16x6xf32>, tensor<f32>) -> tensor<16x6xf32>
    terra.fetch 0 %u : tensor<16x6xf32>
    %i = terra.op "aten.arange.start_step"() args {start = 5 : i64, end = 0 : i64, step = -2 : i64} : () -> tensor<3xi64>
    %src = terra.feed 5 : tensor<16x3xf32>
    %a = terra.op "aten.index_add"(%p, %i, %src) args {dim = 1 : i64, alpha = 1 : i64} : (tensor<16x6xf32>, tensor<3xi64>, tensor<16x3xf32>) -> tensor<16x6xf32>
    terra.fetch 1 %a : tensor<16x6xf32>
    %x = terra.feed 6 : tensor<2x3x5x5xf32>
    %pool = terra.op "aten.avg_pool2d"(%x) args {kernel_size = [3, 3], stride = [2, 2], padding = [1, 1], ceil_mode = false, count_include_pad = false} : (tensor<2x3x5x5xf32>) -> tensor<2x3x3x3xf32>
    terra.fetch 2 %pool : tensor<2x3x3x3xf32>
  }
}

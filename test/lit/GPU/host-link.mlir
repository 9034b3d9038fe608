// The host side of a GPU graph links against what the project ships: every
// external symbol of its object file is defined by the CUDA runtime
// (lib/Runtime/Cuda: mgpu*, cuBLAS and cuDNN calls) or the graph runtime
// (lib/Runtime: terra_rt_*, buffer allocation, the check flag an
// embedding's index checks write inside its kernel), except libc's `free`.
// REQUIRES: terra-cuda-runtime
// RUN: terra-opt %s -terra-gpu-pipeline | terra-translate --mlir-to-llvmir -o %t.ll
// RUN: llc -O0 -filetype=obj -relocation-model=pic %t.ll -o %t.o
// RUN: llvm-nm --undefined-only --format=just-symbols %t.o > %t.undefined
// RUN: FileCheck %s --check-prefix=USES --input-file=%t.undefined
// RUN: llvm-nm --defined-only --format=just-symbols %terra_cuda_runtime_lib %terra_runtime_lib > %t.defined
// RUN: grep -v -x -F -f %t.defined %t.undefined > %t.missing
// RUN: FileCheck %s --check-prefix=MISSING --input-file=%t.missing
// The kernel image is loaded by a global constructor through the runtime:
// RUN: FileCheck %s --check-prefix=IR --input-file=%t.ll

// USES-DAG: _mlir_ciface_terra_cuda_matmul_f32
// USES-DAG: _mlir_ciface_terra_cuda_conv2d_f32
// USES-DAG: _mlir_ciface_terra_cuda_conv2d_grad_input_f32
// USES-DAG: _mlir_ciface_terra_cuda_conv2d_grad_weight_f32
// USES-DAG: _mlir_ciface_terra_rt_feed_contiguous_f32
// USES-DAG: _mlir_ciface_terra_rt_fetch_f32
// USES-DAG: _mlir_ciface_terra_rt_check_flag
// USES-DAG: _mlir_memref_to_llvm_alloc
// USES-DAG: _mlir_memref_to_llvm_free
// USES-DAG: mgpuModuleLoadJIT
// USES-DAG: mgpuModuleUnload
// USES-DAG: mgpuModuleGetFunction
// USES-DAG: mgpuLaunchKernel
// USES-DAG: mgpuStreamCreate
// USES-DAG: mgpuStreamSynchronize
// USES-DAG: mgpuStreamDestroy

// MISSING: {{^free$}}
// MISSING-NOT: {{.}}

// IR: @llvm.global_ctors = appending global {{.*}} @terra_kernels_load
// IR: define private void @terra_cuda_matmul_f32(
// IR:   call void @_mlir_ciface_terra_cuda_matmul_f32(
// IR: define void @step()
// IR:   call void @terra_cuda_matmul_f32(
// IR:   call void @mgpuLaunchKernel(
// IR: define internal void @terra_kernels_load()
// IR:   call ptr @mgpuModuleLoadJIT(ptr @terra_kernels_binary, i32 3)
module {
  terra.graph @step {
    %x = terra.feed 1 : tensor<?x64xf32>
    %w = terra.feed 2 : tensor<64x32xf32>
    %y = terra.op "aten.mm"(%x, %w) : (tensor<?x64xf32>, tensor<64x32xf32>) -> tensor<?x32xf32>
    %r = terra.op "aten.tanh"(%y) : (tensor<?x32xf32>) -> tensor<?x32xf32>
    terra.fetch 0 %r : tensor<?x32xf32>
    %cx = terra.feed 3 : tensor<2x4x12x12xf32>
    %cw = terra.feed 4 : tensor<8x4x3x3xf32>
    %cy = terra.op "aten.convolution"(%cx, %cw) args {bias = unit, stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1 : i64} : (tensor<2x4x12x12xf32>, tensor<8x4x3x3xf32>) -> tensor<2x8x6x6xf32>
    terra.fetch 1 %cy : tensor<2x8x6x6xf32>
    %cg = terra.feed 5 : tensor<2x8x6x6xf32>
    %gx, %gw = terra.op "aten.convolution_backward"(%cg, %cx, %cw) args {stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1 : i64, output_mask = [true, true, false], bias_sizes = [8]} : (tensor<2x8x6x6xf32>, tensor<2x4x12x12xf32>, tensor<8x4x3x3xf32>) -> (tensor<2x4x12x12xf32>, tensor<8x4x3x3xf32>)
    terra.fetch 2 %gx : tensor<2x4x12x12xf32>
    terra.fetch 3 %gw : tensor<8x4x3x3xf32>
    %e = terra.feed 6 : tensor<10x4xf32>
    %i = terra.feed 7 : tensor<?x3xi64>
    %ge = terra.op "aten.embedding"(%e, %i) : (tensor<10x4xf32>, tensor<?x3xi64>) -> tensor<?x3x4xf32>
    terra.fetch 4 %ge : tensor<?x3x4xf32>
  }
}

// Through the GPU pipeline, a convolution, its gradients and a transposed
// convolution with its backward end as calls of the CUDA runtime's cuDNN
// entry points (lib/Runtime/Cuda/Cudnn.cpp) on the unpadded input and the
// original grad_output, as on the CPU: no generated convolution kernels.
// A problem cuDNN does not take as it is (padding after the input other
// than before it) stays generated code.
// RUN: terra-opt %s -split-input-file -terra-gpu-pipeline | FileCheck %s
// RUN: terra-opt %s -split-input-file -terra-convert-to-linalg -terra-library-convolutions=backend=cuda | FileCheck %s --check-prefix=PASS
// RUN: terra-opt %s -split-input-file -terra-convert-to-linalg -terra-library-convolutions | FileCheck %s --check-prefix=ONEDNN
// RUN: not terra-opt %s -split-input-file -terra-library-convolutions=backend=rocm 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK: module attributes {{.*}}terra.host_ops = []
// CHECK-DAG: llvm.func @_mlir_ciface_terra_cuda_conv2d_f32(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)
// CHECK-DAG: llvm.func @_mlir_ciface_terra_cuda_conv2d_grad_input_f32(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)
// CHECK-DAG: llvm.func @_mlir_ciface_terra_cuda_conv2d_grad_weight_f32(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)
// CHECK-NOT: terra_lib_conv2d
// CHECK-LABEL: llvm.func @step()
// CHECK-DAG: llvm.call @terra_cuda_conv2d_f32(
// CHECK-DAG: llvm.call @terra_cuda_conv2d_grad_input_f32(
// CHECK-DAG: llvm.call @terra_cuda_conv2d_grad_weight_f32(
// BAD: terra-library-convolutions: unknown backend 'rocm' (cpu or cuda)
terra.graph @step {
  %x = terra.feed 2 : tensor<2x4x12x12xf32>
  %w = terra.feed 3 : tensor<8x4x3x3xf32>
  %b = terra.feed 7 : tensor<8xf32>
  %y = terra.op "aten.convolution"(%x, %w, %b) args {stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1 : i64} : (tensor<2x4x12x12xf32>, tensor<8x4x3x3xf32>, tensor<8xf32>) -> tensor<2x8x6x6xf32>
  terra.fetch 8 %y : tensor<2x8x6x6xf32>
  %go = terra.feed 1 : tensor<2x8x6x6xf32>
  %a, %g, %c = terra.op "aten.convolution_backward"(%go, %x, %w) args {stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = false, output_padding = [0, 0], groups = 1 : i64, output_mask = [true, true, true], bias_sizes = [8]} : (tensor<2x8x6x6xf32>, tensor<2x4x12x12xf32>, tensor<8x4x3x3xf32>) -> (tensor<2x4x12x12xf32>, tensor<8x4x3x3xf32>, tensor<8xf32>)
  terra.fetch 4 %a : tensor<2x4x12x12xf32>
  terra.fetch 5 %g : tensor<8x4x3x3xf32>
  terra.fetch 6 %c : tensor<8xf32>
  %tx = terra.feed 9 : tensor<2x8x4x4xf32>
  %tw = terra.feed 10 : tensor<8x4x4x4xf32>
  %ty = terra.op "aten.convolution"(%tx, %tw) args {bias = unit, stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = true, output_padding = [0, 0], groups = 1 : i64} : (tensor<2x8x4x4xf32>, tensor<8x4x4x4xf32>) -> tensor<2x4x8x8xf32>
  terra.fetch 11 %ty : tensor<2x4x8x8xf32>
  %tgo = terra.feed 12 : tensor<2x4x8x8xf32>
  %tgx, %tgw = terra.op "aten.convolution_backward"(%tgo, %tx, %tw) args {stride = [2, 2], padding = [1, 1], dilation = [1, 1], transposed = true, output_padding = [0, 0], groups = 1 : i64, output_mask = [true, true, false], bias_sizes = [4]} : (tensor<2x4x8x8xf32>, tensor<2x8x4x4xf32>, tensor<8x4x4x4xf32>) -> (tensor<2x8x4x4xf32>, tensor<8x4x4x4xf32>)
  terra.fetch 13 %tgx : tensor<2x8x4x4xf32>
  terra.fetch 14 %tgw : tensor<8x4x4x4xf32>
}

// -----

// Padding 1 before the rows and columns of a 7x7 input and none after
// (stride 2, 3x3 kernel: 3x3 outputs): cuDNN pads symmetrically, so the
// cuda backend leaves it a linalg convolution (generated code); the cpu
// backend (oneDNN) takes it.
// PASS-LABEL: func.func @asymmetric
// PASS-NOT:     call
// PASS:         linalg.conv_2d_nchw_fchw
// ONEDNN-LABEL: func.func @asymmetric
// ONEDNN:      call @terra_lib_conv2d_f32
func.func @asymmetric(%x: tensor<1x2x7x7xf32>, %w: tensor<4x2x3x3xf32>) -> tensor<1x4x3x3xf32> {
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 0, 0] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %zero : f32
  } : tensor<1x2x7x7xf32> to tensor<1x2x8x8xf32>
  %init = tensor.empty() : tensor<1x4x3x3xf32>
  %z = linalg.fill ins(%zero : f32) outs(%init : tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>} ins(%p, %w : tensor<1x2x8x8xf32>, tensor<4x2x3x3xf32>) outs(%z : tensor<1x4x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %y : tensor<1x4x3x3xf32>
}

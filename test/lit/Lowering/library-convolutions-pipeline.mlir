// Through the whole CPU pipeline, a convolution and its gradients end as
// calls of the runtime's convolution entry points (lib/Runtime/
// LibraryConv.cpp) on the unpadded input and the original grad_output: no
// generated convolution loops and no padded or spread-out copies remain.
// grad_bias stays a generated reduction. A transposed convolution and its
// backward (DCGAN's generator layer) become the same calls, not host
// callbacks.
// RUN: terra-opt %s -terra-cpu-pipeline | FileCheck %s

// CHECK: module attributes {{.*}}terra.host_ops = []
// CHECK-DAG: llvm.func @_mlir_ciface_terra_lib_conv2d_f32(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)
// CHECK-DAG: llvm.func @_mlir_ciface_terra_lib_conv2d_grad_input_f32(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)
// CHECK-DAG: llvm.func @_mlir_ciface_terra_lib_conv2d_grad_weight_f32(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, i64, i64, i64)
// CHECK-LABEL: llvm.func @step()
// CHECK-DAG: llvm.call @terra_lib_conv2d_f32(
// CHECK-DAG: llvm.call @terra_lib_conv2d_grad_input_f32(
// CHECK-DAG: llvm.call @terra_lib_conv2d_grad_weight_f32(
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

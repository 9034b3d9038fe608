// Through the whole CPU pipeline, a convolution and its gradients end as
// calls of the runtime's convolution entry points (lib/Runtime/
// LibraryConv.cpp) on the unpadded input and the original grad_output: no
// generated convolution loops and no padded or spread-out copies remain.
// grad_bias stays a generated reduction.
// RUN: terra-opt %s -terra-cpu-pipeline | FileCheck %s

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
}

// Every kernel the GPU pipeline generates for a softmax, a reduction over
// the outer dim, a full reduction (both split across threads when their
// run-time size is large: two kernels more each) and a linear layer (its
// matmul goes to cuBLAS, reading the row-major feeds in place and
// accumulating into its output initialized with the broadcast bias; the
// bias broadcast and the relu are kernels) and an embedding (its per-element index check
// writes the run's check flag: no host call in a kernel, which ptxas
// rejects as an unresolved extern function) is valid PTX for the CUDA 13
// assembler, for sm_90 and sm_80, as one module.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: terra-opt %s -terra-gpu-pipeline -o %t/sm90.mlir
// RUN: terra-translate --gpu-binary-to-ptx --gpu-ptx-dir=%t/sm90 %t/sm90.mlir | FileCheck %s --check-prefix=FILES
// RUN: %ptxas -arch=sm_90 %t/sm90/terra_kernels.ptx -o %t/k.cubin
// RUN: terra-opt %s -terra-gpu-pipeline="chip=sm_80" -o %t/sm80.mlir
// RUN: terra-translate --gpu-binary-to-ptx --gpu-ptx-dir=%t/sm80 %t/sm80.mlir
// RUN: %ptxas -arch=sm_80 %t/sm80/terra_kernels.ptx -o %t/k.cubin
// A PTX module for sm_90 is rejected for sm_80, so the checks above mean
// something:
// RUN: not %ptxas -arch=sm_80 %t/sm90/terra_kernels.ptx -o %t/k.cubin
// The whole-module listing, and cubin output through the toolkit's ptxas:
// RUN: terra-translate --gpu-binary-to-ptx %t/sm90.mlir | FileCheck %s --check-prefix=PTX
// RUN: terra-opt %s -terra-gpu-pipeline="format=bin" | FileCheck %s --check-prefix=BIN
// RUN: terra-opt %s -terra-gpu-pipeline="format=bin" | not terra-translate --gpu-binary-to-ptx 2>&1 | FileCheck %s --check-prefix=NOPTX

// All kernels are in one module (-terra-gpu-merge-modules), named after
// the modules the outliner made.
// FILES: sm90/terra_kernels.ptx
// FILES-NOT: .ptx
// PTX: // gpu.binary @terra_kernels
// PTX: .target sm_90
// PTX: .visible .entry step_kernel(
// PTX: .visible .entry step_kernel_14(
// PTX-NOT: .entry
// BIN: gpu.binary @terra_kernels  [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80"{{.*}} bin = "
// NOPTX: holds a binary object, not PTX
module {
  terra.graph @step {
    %x = terra.feed 1 : tensor<?x64xf32>
    %m = terra.op "aten._softmax"(%x) args {dim = -1 : i64, half_to_float = false} : (tensor<?x64xf32>) -> tensor<?x64xf32>
    %s = terra.op "aten.sum.dim_IntList"(%x) args {dim = [0]} : (tensor<?x64xf32>) -> tensor<64xf32>
    %t = terra.op "aten.amax"(%x) args {dim = []} : (tensor<?x64xf32>) -> tensor<f32>
    %w = terra.feed 2 : tensor<64x32xf32>
    %b = terra.feed 3 : tensor<32xf32>
    %y = terra.op "aten.addmm"(%b, %m, %w) : (tensor<32xf32>, tensor<?x64xf32>, tensor<64x32xf32>) -> tensor<?x32xf32>
    %r = terra.op "aten.relu"(%y) : (tensor<?x32xf32>) -> tensor<?x32xf32>
    terra.fetch 0 %r : tensor<?x32xf32>
    terra.fetch 1 %s : tensor<64xf32>
    terra.fetch 2 %t : tensor<f32>
    %e = terra.feed 4 : tensor<10x4xf32>
    %i = terra.feed 5 : tensor<?x3xi64>
    %g = terra.op "aten.embedding"(%e, %i) : (tensor<10x4xf32>, tensor<?x3xi64>) -> tensor<?x3x4xf32>
    terra.fetch 3 %g : tensor<?x3x4xf32>
  }
}

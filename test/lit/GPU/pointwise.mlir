// A fused pointwise chain (relu -> exp -> add) becomes one kernel: one
// thread per element of the collapsed iteration space, 256 per block, a
// bounds guard for the last block; exp calls libdevice, which is linked in.
// RUN: terra-opt %s -terra-gpu-pipeline | FileCheck %s
// RUN: terra-opt %s -terra-gpu-pipeline="chip=sm_80" | FileCheck %s --check-prefix=SM80

// CHECK-LABEL: llvm.func @step()
// CHECK:         llvm.call @terra_rt_feed_contiguous_f32
// CHECK:         llvm.call @_mlir_memref_to_llvm_alloc
// CHECK:         gpu.launch_func @[[MOD:terra_kernels]]::@[[FN:step_kernel[_0-9]*]] blocks in (%{{.*}}, %{{.*}}, %{{.*}}) threads in (%[[T:.*]], %{{.*}}, %{{.*}})
// CHECK-NOT:     gpu.launch_func
// CHECK:         llvm.call @terra_rt_fetch_f32
// CHECK:       gpu.binary @[[MOD]] [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80"
// CHECK-SAME:    assembly = "
// CHECK-SAME:    .version 8.0
// CHECK-SAME:    .target sm_90
// CHECK-SAME:    .visible .entry [[FN]](
// CHECK-SAME:    mov.u32 {{.*}}%ctaid.x
// CHECK-SAME:    mov.u32 {{.*}}%tid.x
// CHECK-NOT:     .extern .func __nv_expf
// CHECK-SAME:    ex2.approx
// CHECK-NOT:   terra.

// SM80: .target sm_80

module {
  terra.graph @step {
    %x = terra.feed 1 : tensor<?x64xf32>
    %r = terra.op "aten.relu"(%x) : (tensor<?x64xf32>) -> tensor<?x64xf32>
    %e = terra.op "aten.exp"(%r) : (tensor<?x64xf32>) -> tensor<?x64xf32>
    %s = terra.op "aten.add.Tensor"(%e, %x) : (tensor<?x64xf32>, tensor<?x64xf32>) -> tensor<?x64xf32>
    terra.fetch 0 %s : tensor<?x64xf32>
  }
}

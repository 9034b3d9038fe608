// terra-run-object runs a graph compiled ahead of time: the host code of a
// lowered graph, linked into a shared library, resolves the runtime entry
// points against the tool, which has no MLIR or LLVM (this is how graphs
// compiled here run on the GPU machines, docs/gpu.md).
// RUN: terra-opt %s -terra-cpu-pipeline | terra-translate --mlir-to-llvmir -o %t.ll
// RUN: llc -O2 -filetype=obj -relocation-model=pic %t.ll -o %t.o
// RUN: %cxx -shared %t.o -o %t.so
// RUN: rm -rf %t.out && mkdir %t.out
// RUN: terra-run-object %t.so --state 0=%S/Inputs/w-4.npy --feed 1=%S/Inputs/x-2x4.npy \
// RUN:   --feed 2=%S/Inputs/ones-2x4.npy --case 5=0 --loop 7=1 --loop 7=0 --repeat 2 \
// RUN:   --fetch-dir %t.out | FileCheck %s
// RUN: ls %t.out | FileCheck %s --check-prefix=FILES

// tanh(x + 1), fetched before the switch:
// CHECK: fetch 0 #1 f32 [2, 4] : 0.761594 0.809301 0.848284 0.879827 0.905148 0.925346 0.941376 0.954045
// Case 0 computes x * w and the loop negates it once:
// CHECK: fetch 1 #1 f32 [2, 4] : {{-?}}0 0.0625 -0.125 -0.5625 0.75 0.3125 -0.375 -1.3125
// FILES: 0_1.npy
// FILES: 1_1.npy

// Case 1 fetches the sum instead.
// RUN: terra-run-object %t.so --state 0=%S/Inputs/w-4.npy --feed 1=%S/Inputs/x-2x4.npy \
// RUN:   --feed 2=%S/Inputs/ones-2x4.npy --case 5=1 --loop 7=0 | FileCheck %s --check-prefix=CASE1
// CASE1: fetch 1 #1 f32 [2, 4] : 4.75 4.75 4.75 4.75 6.75 6.75 6.75 6.75

// Errors name what is wrong instead of hanging or crashing.
// RUN: not terra-run-object %t.so --state 0=%S/Inputs/w-4.npy --feed 1=%S/Inputs/x-2x4.npy 2>&1 \
// RUN:   | FileCheck %s --check-prefix=MISSING
// MISSING: terra-run-object: run failed: the graph waits for feed 2, which the host did not send before it finished the iteration
// RUN: not terra-run-object %t.so --feed 1=%S/Inputs/x-2x4.npy --feed 2=%S/Inputs/ones-2x4.npy 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOSTATE
// NOSTATE: terra-run-object: run failed: state 0 was not provided
// RUN: not terra-run-object %t.so --state 0=%S/Inputs/w-4.npy --feed 1=%S/Inputs/w-4.npy \
// RUN:   --feed 2=%S/Inputs/ones-2x4.npy --case 5=0 --loop 7=0 2>&1 | FileCheck %s --check-prefix=RANK
// RANK: terra-run-object: run failed: feed 1: expected f32 of rank 2, got f32 of rank 1
// RUN: not terra-run-object %t.so --state 0=%S/Inputs/x-2x4.npy --feed 1=%S/Inputs/x-2x4.npy \
// RUN:   --feed 2=%S/Inputs/ones-2x4.npy --case 5=0 --loop 7=0 2>&1 | FileCheck %s --check-prefix=STATERANK
// STATERANK: terra-run-object: run failed: state 0: expected f32 of rank 1, got f32 of rank 2
// Static sizes are guards in the graph; their messages travel in the
// library (terra_check_messages).
// RUN: not terra-run-object %t.so --state 0=%S/Inputs/w-4.npy --feed 1=%S/Inputs/ones-2x3.npy \
// RUN:   --feed 2=%S/Inputs/ones-2x4.npy --case 5=0 --loop 7=0 2>&1 | FileCheck %s --check-prefix=FEEDSIZE
// FEEDSIZE: terra-run-object: run failed: feed 1: expected shape [?, 4]
// RUN: not terra-run-object %t.so --state 0=%S/Inputs/ones-8.npy --feed 1=%S/Inputs/x-2x4.npy \
// RUN:   --feed 2=%S/Inputs/ones-2x4.npy --case 5=0 --loop 7=0 2>&1 | FileCheck %s --check-prefix=STATESIZE
// STATESIZE: terra-run-object: run failed: state 'fc.weight': expected shape [4]
// RUN: not terra-run-object %t.so --graph other 2>&1 | FileCheck %s --check-prefix=NOGRAPH
// NOGRAPH: has no graph function 'other' (see --graph)
// RUN: not terra-run-object %t.missing.so 2>&1 | FileCheck %s --check-prefix=NOLIB
// NOLIB: terra-run-object: cannot load the graph: {{.*}}missing.so
// RUN: not terra-run-object %t.so --feed x.npy 2>&1 | FileCheck %s --check-prefix=BADARG
// BADARG: terra-run-object: --feed expects <integer>=<value>, got 'x.npy'
// RUN: not terra-run-object %t.so --device tpu 2>&1 | FileCheck %s --check-prefix=BADDEV
// BADDEV: terra-run-object: --device expects cpu or cuda, got 'tpu'
// RUN: not terra-run-object %t.so --device cuda --memory pinned 2>&1 | FileCheck %s --check-prefix=BADMEM
// BADMEM: terra-run-object: --memory expects device or managed, got 'pinned'

module {
  terra.graph @step {
    %w = terra.state "fc.weight" : tensor<4xf32>
    %x = terra.feed 1 : tensor<?x4xf32>
    %y = terra.feed 2 : tensor<?x4xf32>
    %s = terra.op "aten.add.Tensor"(%x, %y) args {alpha = 1 : i64} : (tensor<?x4xf32>, tensor<?x4xf32>) -> tensor<?x4xf32>
    %t = terra.op "aten.tanh"(%s) : (tensor<?x4xf32>) -> tensor<?x4xf32>
    terra.fetch 0 %t : tensor<?x4xf32>
    %c = terra.case_select 5 cases 2
    %z = scf.index_switch %c -> tensor<?x4xf32>
    case 0 {
      %m = terra.op "aten.mul.Tensor"(%x, %w) : (tensor<?x4xf32>, tensor<4xf32>) -> tensor<?x4xf32>
      scf.yield %m : tensor<?x4xf32>
    }
    default {
      %r = terra.op "aten.sum.dim_IntList"(%s) args {dim = [1], keepdim = true} : (tensor<?x4xf32>) -> tensor<?x1xf32>
      %e = terra.op "aten.expand"(%r) args {size = [-1, 4]} : (tensor<?x1xf32>) -> tensor<?x4xf32>
      scf.yield %e : tensor<?x4xf32>
    }
    %o = scf.while (%a = %z) : (tensor<?x4xf32>) -> tensor<?x4xf32> {
      %k = terra.loop_cond 7
      scf.condition(%k) %a : tensor<?x4xf32>
    } do {
    ^bb0(%a: tensor<?x4xf32>):
      %n = terra.op "aten.neg"(%a) : (tensor<?x4xf32>) -> tensor<?x4xf32>
      scf.yield %n : tensor<?x4xf32>
    }
    terra.fetch 1 %o : tensor<?x4xf32>
  }
}

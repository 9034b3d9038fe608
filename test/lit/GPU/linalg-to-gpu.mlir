// RUN: terra-opt %s -split-input-file -pass-pipeline="builtin.module(func.func(terra-linalg-to-gpu{split-reductions=false},canonicalize))" | FileCheck %s
// RUN: terra-opt %s -split-input-file -pass-pipeline='builtin.module(func.func(terra-linalg-to-gpu{block-size=128 split-reductions=false},canonicalize))' 2>/dev/null | FileCheck %s --check-prefix=B128

// A 2-d pointwise op: its two parallel dims collapse into one linear index
// (the innermost dim fastest), 256 threads per block, ceil(total / 256)
// blocks, a guard for the last block.
// CHECK-LABEL: func.func @pointwise
// CHECK-DAG:     %[[C256:.*]] = arith.constant 256 : index
// CHECK-DAG:     %[[C64:.*]] = arith.constant 64 : index
// CHECK:         %[[N:.*]] = memref.dim %{{.*}}, %c0
// CHECK:         %[[TOTAL:.*]] = arith.muli %[[N]], %[[C64]]
// CHECK:         %[[BLOCKS:.*]] = arith.ceildivui %[[TOTAL]], %[[C256]]
// CHECK:         gpu.launch blocks(%[[B:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[BLOCKS]], %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads(%[[T:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C256]],
// CHECK:           %[[LIN0:.*]] = arith.muli %[[B]], %[[C256]]
// CHECK:           %[[LIN:.*]] = arith.addi %[[LIN0]], %[[T]]
// CHECK:           %[[IN:.*]] = arith.cmpi ult, %[[LIN]], %[[TOTAL]]
// CHECK:           scf.if %[[IN]] {
// CHECK:             %[[J:.*]] = arith.remui %[[LIN]], %[[C64]]
// CHECK:             %[[I:.*]] = arith.divui %[[LIN]], %[[C64]]
// CHECK:             memref.load %{{.*}}[%[[I]], %[[J]]]
// CHECK:             math.exp
// CHECK:             memref.store %{{.*}}, %{{.*}}[%[[I]], %[[J]]]
// CHECK:           gpu.terminator
// CHECK-NOT:     scf.parallel
// B128-LABEL: func.func @pointwise
// B128:         threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c128
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @pointwise(%x: memref<?x64xf32>, %y: memref<?x64xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<?x64xf32>) outs(%y : memref<?x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %e = math.exp %a : f32
    linalg.yield %e : f32
  }
  return
}

// -----

// A sum over dim 0: the iterators are interchanged so the parallel dim is
// outermost; each thread runs the reduction loop for one output element,
// with the element in a register: loaded once, folded (unrolled 8 times,
// then the remainder), stored once.
// CHECK-LABEL: func.func @sum_dim0
// CHECK:         gpu.launch
// CHECK:           scf.if
// CHECK:             %[[INIT:.*]] = memref.load %arg1[%[[T:.*]]] : memref<64xf32>
// CHECK:             %[[MAIN:.*]] = scf.for %{{.*}} = %c0{{.*}} to %[[UB:.*]] step %c8 iter_args(%{{.*}} = %[[INIT]]) -> (f32)
// CHECK-NOT:           memref.store
// CHECK-COUNT-8:       arith.addf
// CHECK:             %[[SUM:.*]] = scf.for %{{.*}} = %[[UB]] to %{{.*}} step %c1 iter_args(%{{.*}} = %[[MAIN]]) -> (f32)
// CHECK:               memref.load
// CHECK:               arith.addf
// CHECK:             memref.store %[[SUM]], %arg1[%[[T]]]
// CHECK-NOT:     gpu.launch
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d1)>
func.func @sum_dim0(%x: memref<?x64xf32>, %y: memref<64xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["reduction", "parallel"]}
      ins(%x : memref<?x64xf32>) outs(%y : memref<64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// No parallel dimension (a 0-d fill, a full reduction): one-thread kernels,
// so graph buffers are never touched by host code. A memref.copy becomes a
// kernel too.
// CHECK-LABEL: func.func @serial
// CHECK:         gpu.launch blocks({{.*}}) in (%{{.*}} = %[[ONE:c1[_0-9]*]], {{.*}} threads({{.*}}) in (%{{.*}} = %[[ONE]],
// CHECK:           memref.store
// CHECK:         gpu.launch
// CHECK:           scf.for
// CHECK:             scf.for
// CHECK:               arith.maximumf
// CHECK:         gpu.launch
// CHECK:           memref.load
// CHECK:           memref.store
// CHECK-NOT:     memref.copy
#all = affine_map<(d0, d1) -> (d0, d1)>
#none = affine_map<(d0, d1) -> ()>
func.func @serial(%x: memref<?x64xf32>, %m: memref<f32>, %c: memref<?x64xf32>) {
  %ninf = arith.constant 0xFF800000 : f32
  linalg.fill ins(%ninf : f32) outs(%m : memref<f32>)
  linalg.generic {indexing_maps = [#all, #none], iterator_types = ["reduction", "reduction"]}
      ins(%x : memref<?x64xf32>) outs(%m : memref<f32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.maximumf %a, %o : f32
    linalg.yield %s : f32
  }
  memref.copy %x, %c : memref<?x64xf32> to memref<?x64xf32>
  return
}

// -----

// An input that views the output's buffer: the loop would read elements
// whose new values are still in registers, so linalg's loops stay (each
// iteration loads and stores the output element).
// CHECK-LABEL: func.func @sum_into_own_row
// CHECK:         gpu.launch
// CHECK:           scf.for
// CHECK-NOT:         iter_args
// CHECK:             memref.load
// CHECK:             memref.load
// CHECK:             arith.addf
// CHECK:             memref.store
#in2 = affine_map<(d0, d1) -> (d0, d1)>
#out2 = affine_map<(d0, d1) -> (d1)>
func.func @sum_into_own_row(%y: memref<64x64xf32>) {
  %row = memref.subview %y[0, 0] [1, 64] [1, 1] : memref<64x64xf32> to memref<64xf32, strided<[1]>>
  linalg.generic {indexing_maps = [#in2, #out2], iterator_types = ["reduction", "parallel"]}
      ins(%y : memref<64x64xf32>) outs(%row : memref<64xf32, strided<[1]>>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %o : f32
    linalg.yield %s : f32
  }
  return
}

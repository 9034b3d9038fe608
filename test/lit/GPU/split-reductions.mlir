// RUN: terra-opt %s -split-input-file -pass-pipeline="builtin.module(func.func(terra-linalg-to-gpu,canonicalize))" | FileCheck %s
// RUN: terra-opt %s -split-input-file -pass-pipeline="builtin.module(func.func(terra-linalg-to-gpu{split-reductions=false},canonicalize))" | FileCheck %s --check-prefix=OFF

// A full sum of 100003 elements: 3126 threads each fold every 3126th
// element (consecutive threads, consecutive elements) from 0.0 into a
// buffer of partials (the fold unrolled 8 times: 8 loads in flight, then the
// remainder); the 3126 partials are a reduction again, split into
// 98, which one thread folds into the output.
// CHECK-LABEL: func.func @full_sum
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-DAG:     %[[S:.*]] = arith.constant 3126 : index
// CHECK-DAG:     %[[K:.*]] = arith.constant 100003 : index
// CHECK:         %[[P:.*]] = memref.alloc() : memref<3126xf64>
// CHECK:         gpu.launch
// CHECK:           %[[T:.*]] = arith.remui %{{.*}}, %[[S]]
// CHECK:           %[[MAIN:.*]] = scf.for %[[K_IV:.*]] = %[[T]] to %[[UB:.*]] step %c25008 iter_args(%{{.*}} = %[[ZERO]])
// CHECK:             memref.load %arg0[%[[K_IV]]]
// CHECK:             math.exp
// CHECK:             arith.addf
// CHECK-COUNT-7:     memref.load %arg0
// CHECK:           %[[REST:.*]] = scf.for %{{.*}} = %[[UB]] to %[[K]] step %[[S]] iter_args(%{{.*}} = %[[MAIN]])
// CHECK:           memref.store %[[REST]], %[[P]][%[[T]]]
// CHECK:         %[[P2:.*]] = memref.alloc() : memref<98xf64>
// CHECK:         gpu.launch
// CHECK:           memref.load %[[P]]
// CHECK:           memref.store %{{.*}}, %[[P2]]
// CHECK:         gpu.launch
// CHECK:           memref.load %[[P2]]
// CHECK:           memref.store %{{.*}}, %arg1[]
// CHECK:         memref.dealloc %[[P2]]
// CHECK:         memref.dealloc %[[P]]
// OFF-LABEL: func.func @full_sum
// OFF-NOT:     memref.alloc
// OFF:         gpu.launch {{.*}} threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c1, %{{.*}} = %c1, %{{.*}} = %c1)
// OFF-NOT:     gpu.launch
// OFF-LABEL: func.func @row_max
#id = affine_map<(d0) -> (d0)>
#sc = affine_map<(d0) -> ()>
func.func @full_sum(%x: memref<100003xf64>, %y: memref<f64>) {
  linalg.generic {indexing_maps = [#id, #sc], iterator_types = ["reduction"]}
      ins(%x : memref<100003xf64>) outs(%y : memref<f64>) {
  ^bb0(%a: f64, %acc: f64):
    %e = math.exp %a : f64
    %s = arith.addf %acc, %e : f64
    linalg.yield %s : f64
  }
  return
}

// -----

// Row maxima of 8 x 50000: 1563 threads per row (each folding 32
// elements), starting from max's neutral element, -inf; then one thread per
// row folds its 1563 partials (too few to split again).
// CHECK-LABEL: func.func @row_max
// CHECK-DAG:     %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK:         %[[P:.*]] = memref.alloc() : memref<8x1563xf32>
// CHECK:         gpu.launch
// CHECK:           scf.for %{{.*}} iter_args(%{{.*}} = %[[NINF]])
// CHECK:             arith.maximumf
// CHECK:         gpu.launch
// CHECK:           memref.load %[[P]]
// CHECK:           arith.maximumf
// CHECK-NOT:     gpu.launch
// CHECK:         memref.dealloc %[[P]]
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @row_max(%x: memref<8x50000xf32>, %y: memref<8xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x50000xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %m = arith.maximumf %acc, %a : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// Few elements per output, or many outputs: one thread per output.
// CHECK-LABEL: func.func @not_split
// CHECK-NOT:     memref.alloc
// CHECK-COUNT-2: gpu.launch
// CHECK-NOT:     gpu.launch
#in = affine_map<(d0, d1) -> (d0, d1)>
#out = affine_map<(d0, d1) -> (d0)>
func.func @not_split(%x: memref<4x1000xf32>, %y: memref<4xf32>,
                     %u: memref<65536x4096xf32>, %v: memref<65536xf32>) {
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x1000xf32>) outs(%y : memref<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#in, #out], iterator_types = ["parallel", "reduction"]}
      ins(%u : memref<65536x4096xf32>) outs(%v : memref<65536xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A size known only at run time: split (1024 threads) when it is at least
// 2048, one thread otherwise.
// CHECK-LABEL: func.func @dynamic_sum
// CHECK:         %[[N:.*]] = memref.dim %arg0
// CHECK:         %[[LARGE:.*]] = arith.cmpi uge, %[[N]], %c2048
// CHECK:         scf.if %[[LARGE]] {
// CHECK:           memref.alloc() : memref<1024xf32>
// CHECK-COUNT-2:   gpu.launch
// CHECK:           memref.dealloc
// CHECK:         } else {
// CHECK:           gpu.launch
// CHECK-NOT:       memref.alloc
// CHECK:         }
#id = affine_map<(d0) -> (d0)>
#sc = affine_map<(d0) -> ()>
func.func @dynamic_sum(%x: memref<?xf32>, %y: memref<f32>) {
  linalg.generic {indexing_maps = [#id, #sc], iterator_types = ["reduction"]}
      ins(%x : memref<?xf32>) outs(%y : memref<f32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %acc, %a : f32
    linalg.yield %s : f32
  }
  return
}

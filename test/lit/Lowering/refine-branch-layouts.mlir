// terra-refine-branch-layouts: an scf.if result typed with the fully
// dynamic layout gets the identity layout when every branch yields an
// identity buffer of its shape (through memref.casts between ranked types;
// inner ifs first); the linalg ops that read it take the refined buffer
// (the casts left are their folds' to make). A branch
// that yields a strided view, or a buffer cast from an unranked memref that
// is not of the identity type, keeps the result as it was.
// RUN: terra-opt %s -split-input-file -terra-refine-branch-layouts | FileCheck %s
// RUN: terra-opt %s -split-input-file -terra-refine-branch-layouts -terra-collapse-dims=on-buffers=true | FileCheck %s --check-prefix=COLLAPSE

#dyn = strided<[?, ?, ?, ?], offset: ?>
#id = affine_map<(a, b, c, d) -> (a, b, c, d)>

// CHECK-LABEL: func.func @nested
// CHECK:         %[[INNER:.*]] = scf.if %{{.*}} -> (memref<8x4x3x3xf32>)
// CHECK:         %[[OUTER:.*]] = scf.if %{{.*}} -> (memref<8x4x3x3xf32>)
// CHECK:           scf.yield %{{.*}} : memref<8x4x3x3xf32>
// CHECK:         } else {
// CHECK:           scf.yield %[[INNER]] : memref<8x4x3x3xf32>
// CHECK-NOT:     memref.cast %[[OUTER]]
// CHECK:         linalg.generic {{.*}} ins(%[[OUTER]] : memref<8x4x3x3xf32>)
// An optimizer-style update over the refined value: one flat loop.
// COLLAPSE-LABEL: func.func @nested
// COLLAPSE:         memref.collapse_shape %{{.*}} {{\[\[}}0, 1, 2, 3]] : memref<8x4x3x3xf32> into memref<288xf32>
// COLLAPSE:         linalg.generic {{.*}} iterator_types = ["parallel"]}
func.func @nested(%c: i1, %d: i1, %state: memref<*xf32>, %v: f32) {
  %a = memref.alloc() : memref<8x4x3x3xf32>
  %s = memref.cast %state : memref<*xf32> to memref<8x4x3x3xf32>
  %inner = scf.if %d -> (memref<8x4x3x3xf32, #dyn>) {
    %x = memref.cast %a : memref<8x4x3x3xf32> to memref<8x4x3x3xf32, #dyn>
    scf.yield %x : memref<8x4x3x3xf32, #dyn>
  } else {
    %y = memref.cast %s : memref<8x4x3x3xf32> to memref<8x4x3x3xf32, #dyn>
    scf.yield %y : memref<8x4x3x3xf32, #dyn>
  }
  %outer = scf.if %c -> (memref<8x4x3x3xf32, #dyn>) {
    %b = memref.alloc() : memref<8x4x3x3xf32>
    %z = memref.cast %b : memref<8x4x3x3xf32> to memref<8x4x3x3xf32, #dyn>
    scf.yield %z : memref<8x4x3x3xf32, #dyn>
  } else {
    scf.yield %inner : memref<8x4x3x3xf32, #dyn>
  }
  %out = memref.alloc() : memref<8x4x3x3xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%outer : memref<8x4x3x3xf32, #dyn>) outs(%out : memref<8x4x3x3xf32>) {
  ^bb0(%in: f32, %o: f32):
    %r = arith.mulf %in, %v : f32
    linalg.yield %r : f32
  }
  return
}

// -----

#dyn = strided<[?, ?], offset: ?>

// CHECK-LABEL: func.func @strided_branch
// CHECK:         scf.if %{{.*}} -> (memref<4x6xf32, strided<[?, ?], offset: ?>>)
// CHECK:         scf.if %{{.*}} -> (memref<4x6xf32, strided<[?, ?], offset: ?>>)
func.func @strided_branch(%c: i1, %m: memref<8x6xf32>, %state: memref<*xf32>) -> (memref<4x6xf32, #dyn>, memref<4x6xf32, #dyn>) {
  %a = memref.alloc() : memref<4x6xf32>
  %r = scf.if %c -> (memref<4x6xf32, #dyn>) {
    %x = memref.cast %a : memref<4x6xf32> to memref<4x6xf32, #dyn>
    scf.yield %x : memref<4x6xf32, #dyn>
  } else {
    %v = memref.subview %m[2, 0] [4, 6] [1, 1] : memref<8x6xf32> to memref<4x6xf32, strided<[6, 1], offset: 12>>
    %y = memref.cast %v : memref<4x6xf32, strided<[6, 1], offset: 12>> to memref<4x6xf32, #dyn>
    scf.yield %y : memref<4x6xf32, #dyn>
  }
  %t = scf.if %c -> (memref<4x6xf32, #dyn>) {
    %x = memref.cast %a : memref<4x6xf32> to memref<4x6xf32, #dyn>
    scf.yield %x : memref<4x6xf32, #dyn>
  } else {
    %y = memref.cast %state : memref<*xf32> to memref<4x6xf32, #dyn>
    scf.yield %y : memref<4x6xf32, #dyn>
  }
  return %r, %t : memref<4x6xf32, #dyn>, memref<4x6xf32, #dyn>
}

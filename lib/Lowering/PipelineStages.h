//===- PipelineStages.h - Stages shared by the CPU and GPU pipelines -*- C++
//-*-===//
//
// The tensor-level prefix both pipelines run on a lowered graph, split in
// two so the CPU pipeline can put its vectorization rewrites in between.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_LIB_LOWERING_PIPELINESTAGES_H
#define TERRA_LIB_LOWERING_PIPELINESTAGES_H

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace terra {

/// Canonicalize, linalg elementwise fusion on tensors, CSE.
void addFusionPasses(mlir::OpPassManager &pm);

/// The two bufferization workarounds (switch to if, split empty tensors),
/// then one-shot bufferization with function boundaries and identity
/// layouts.
void addBufferizationPasses(mlir::OpPassManager &pm);

} // namespace terra

#endif // TERRA_LIB_LOWERING_PIPELINESTAGES_H

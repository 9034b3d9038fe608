//===- TypedTraceGraph.h - TraceGraph with MLIR payloads --------*- C++ -*-===//
//
// Binds the MLIR-free TraceGraph to the IR: interns op keys (name, args,
// site, result dtypes/ranks) from `terra.trace` ops, keeps the relaxed
// result types of every node (a dimension that differs between traces
// becomes dynamic, spec section 2.2), and converts to and from the textual
// `terra.trace_graph` form.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_MERGE_TYPEDTRACEGRAPH_H
#define TERRA_MERGE_TYPEDTRACEGRAPH_H

#include "terra/Dialect/TerraOps.h"
#include "terra/Merge/TraceGraph.h"

#include "mlir/IR/Builders.h"

#include <map>
#include <memory>
#include <tuple>

namespace terra {

class TypedTraceGraph {
public:
  struct KeyInfo {
    TGKind kind;
    mlir::StringAttr name;     ///< Op name or state name.
    mlir::DictionaryAttr args; ///< Op args (may be null).
    mlir::Location loc;        ///< The site.
  };

  explicit TypedTraceGraph(mlir::MLIRContext *ctx);

  /// Converts and merges one trace. Malformed traces are reported at the
  /// offending op; a trace no graph can route is reported as a warning and
  /// leaves the graph unchanged.
  mlir::FailureOr<MergeOutcome> addTrace(TraceOp trace);

  /// Emits the textual TraceGraph.
  TraceGraphOp emit(mlir::OpBuilder &b, mlir::Location loc,
                    llvm::StringRef name) const;

  /// Rebuilds a TraceGraph from its textual form.
  static mlir::FailureOr<std::unique_ptr<TypedTraceGraph>>
  fromIR(TraceGraphOp op);

  const TraceGraph &graph() const { return tg; }
  const KeyInfo &keyInfo(KeyId key) const { return keys[key]; }
  llvm::ArrayRef<mlir::Type> nodeTypes(NodeId id) const {
    return id < types.size() ? llvm::ArrayRef<mlir::Type>(types[id])
                             : llvm::ArrayRef<mlir::Type>();
  }
  mlir::Location nodeLoc(NodeId id) const;
  mlir::MLIRContext *getContext() const { return ctx; }

  /// Interns an op key; used by the trace importer and the Python front end.
  KeyId internKey(TGKind kind, mlir::StringAttr name,
                  mlir::DictionaryAttr args, mlir::Location loc,
                  mlir::TypeRange resultTypes);
  uint32_t typeClass(mlir::Type type);

private:
  void relax(NodeId id, mlir::TypeRange observed);

  mlir::MLIRContext *ctx;
  TraceGraph tg;
  std::vector<KeyInfo> keys;
  std::map<std::tuple<int, const void *, const void *, const void *,
                      std::vector<uint32_t>>,
           KeyId>
      keyIndex;
  std::map<std::pair<const void *, int64_t>, uint32_t> classIndex;
  std::vector<llvm::SmallVector<mlir::Type, 1>> types;
};

/// Joins two observed types of one value: dims that differ become dynamic.
mlir::Type relaxType(mlir::Type a, mlir::Type b);

} // namespace terra

#endif // TERRA_MERGE_TYPEDTRACEGRAPH_H

//===- HoistAboveReceives.cpp - The terra-hoist-above-receives pass -------===//
//
// A graph runs its ops in trace order, and a receive (a feed, a case
// selection, a loop condition, a host callback) waits for the host. Work
// the trace put after a receive but that does not depend on it can run
// while the graph waits instead: Faster R-CNN's graph idled through the
// host's NumPy proposal filtering, then ran the RPN branch's backward pass
// and its parameters' updates after the RoIs were fed, though none of it
// needs them. This pass moves such work above the receives it does not
// depend on, in every block (see Passes.td for the rules).
//
//===----------------------------------------------------------------------===//
#include "RuntimeNames.h"

#include "terra/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

namespace terra {
#define GEN_PASS_DEF_TERRAHOISTABOVERECEIVES
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;

namespace {

bool callsPrefix(Operation *op, ArrayRef<StringRef> prefixes) {
  auto call = dyn_cast<func::CallOp>(op);
  if (!call)
    return false;
  StringRef callee = call.getCallee();
  return llvm::any_of(prefixes,
                      [&](StringRef p) { return callee.starts_with(p); });
}

/// A call that waits for the host: a feed, a case selection, a loop
/// condition, a host callback.
bool waitsForHost(Operation *op) {
  return callsPrefix(op, {terra::kRuntimeFeed, terra::kRuntimeCase,
                          terra::kRuntimeLoop, terra::kRuntimeHostCall});
}

/// An op after which the graph may wait for the host: a waiting call, or an
/// op with one inside its regions.
bool isReceive(Operation *op) {
  if (waitsForHost(op))
    return true;
  if (op->getNumRegions() == 0)
    return false;
  return op
      ->walk([](Operation *inner) {
        return waitsForHost(inner) ? WalkResult::interrupt()
                                   : WalkResult::advance();
      })
      .wasInterrupted();
}

/// A runtime guard (a failed one ends the run with its message): it may
/// fail earlier, never on other values.
bool isGuard(Operation *op) { return callsPrefix(op, {terra::kRuntimeCheck}); }

/// Whether `op` has no memory effect of its own (its regions aside).
bool hasNoOwnEffect(Operation *op) {
  if (auto effects = dyn_cast<MemoryEffectOpInterface>(op))
    return effects.hasNoEffect();
  return op->hasTrait<OpTrait::HasRecursiveMemoryEffects>();
}

/// `op` computes from its operands alone, its only effects the runtime's
/// guards inside its regions (an index checked per element).
bool computesOnly(Operation *op) {
  if (isMemoryEffectFree(op))
    return true;
  if (op->getNumRegions() == 0 || !hasNoOwnEffect(op))
    return false;
  return !op->walk([&](Operation *inner) {
              return inner == op || isGuard(inner) || hasNoOwnEffect(inner)
                         ? WalkResult::advance()
                         : WalkResult::interrupt();
            }).wasInterrupted();
}

/// The buffer `v` is a cast of, or `v`.
Value castRoot(Value v) {
  while (auto cast = v.getDefiningOp<memref::CastOp>())
    v = cast.getSource();
  return v;
}

/// Every use of `buffer` (through casts) is a cast, `call`, or its wrapping
/// as a tensor.
bool onlyFeeds(Value buffer, Operation *call) {
  for (Operation *user : buffer.getUsers()) {
    if (user == call || isa<bufferization::ToTensorOp>(user))
      continue;
    if (auto cast = dyn_cast<memref::CastOp>(user)) {
      if (onlyFeeds(cast.getResult(), call))
        continue;
    }
    return false;
  }
  return true;
}

/// A library call (BLAS, oneDNN, cuBLAS, cuDNN entry points emitted on
/// tensors: terra-library-convolutions) that reads tensors' buffers and
/// writes fresh buffers nothing else touches: a computation like any other.
bool isLibraryComputation(Operation *op) {
  if (!callsPrefix(op, {"terra_lib_", "terra_cuda_"}))
    return false;
  for (Value v : op->getOperands()) {
    if (!isa<BaseMemRefType>(v.getType()))
      continue;
    Value root = castRoot(v);
    Operation *def = root.getDefiningOp();
    if (auto toBuffer = dyn_cast_or_null<bufferization::ToBufferOp>(def)) {
      if (toBuffer.getReadOnly())
        continue;
      return false;
    }
    if (isa_and_nonnull<memref::GetGlobalOp>(def))
      continue;
    if (isa_and_nonnull<memref::AllocOp>(def) && onlyFeeds(root, op))
      continue;
    return false;
  }
  return true;
}

/// How an op may move.
enum class Role {
  Fixed,   ///< keeps its place among the receives
  Work,    ///< runs as early as its operands allow
  Feeding, ///< moves only as far as the work using it
};

/// An op that is not a receive: work worth running early on its own (a loop
/// nest, a library call, a loop, and guards, which then come before what
/// they guard), or what feeds such work (tensor.empty, fills, casts, index
/// arithmetic, allocations and tensor wrappers), which moves only with it so
/// that what later passes match stays together (a zero fill right before its
/// GEMM: BLAS's beta), or anything with another effect (fetches, state
/// reads, host-callback staging), which stays.
Role roleOf(Operation *op) {
  if (op->hasTrait<OpTrait::IsTerminator>())
    return Role::Fixed;
  if (isGuard(op) || isLibraryComputation(op))
    return Role::Work;
  if (isa<memref::AllocOp, bufferization::ToTensorOp>(op))
    return Role::Feeding;
  if (auto toBuffer = dyn_cast<bufferization::ToBufferOp>(op))
    return toBuffer.getReadOnly() ? Role::Feeding : Role::Fixed;
  if (!computesOnly(op))
    return Role::Fixed;
  if (isa<linalg::FillOp>(op))
    return Role::Feeding;
  return isa<linalg::LinalgOp>(op) || op->getNumRegions() != 0 ? Role::Work
                                                               : Role::Feeding;
}

/// Moves the movable ops of `block` above the receives they do not depend
/// on. Segment k is what runs between receive k - 1 and receive k. Work
/// goes to the earliest segment where all its operands (those its regions
/// use included) exist; the ops feeding it go as late as their first user
/// allows. A moved op goes to the end of its segment, in its original order
/// among the ops moved there; other ops keep their segment and order.
void hoist(Block &block) {
  SmallVector<Operation *> receives;
  // Per op: its segment in the trace's order, the first segment its
  // results exist in (after it, for a receive; the earliest possible, for
  // a movable op) and, for a movable op, the one it goes to.
  DenseMap<Operation *, unsigned> original, ready, final;
  auto readyOf = [&](Value v) -> unsigned {
    auto it = ready.find(v.getDefiningOp());
    return it == ready.end() ? 0 : it->second; // (from outside the block)
  };
  SmallVector<std::pair<Operation *, Role>> movable;
  for (Operation &op : block) {
    unsigned here = receives.size();
    original[&op] = here;
    ready[&op] = here;
    if (isReceive(&op)) {
      ready[&op] = here + 1;
      receives.push_back(&op);
      continue;
    }
    if (receives.empty()) // (nothing moves above the first receive)
      continue;
    Role role = roleOf(&op);
    if (role == Role::Fixed)
      continue;
    unsigned at = 0;
    for (Value v : op.getOperands())
      at = std::max(at, readyOf(v));
    if (op.getNumRegions()) {
      llvm::SetVector<Value> above;
      getUsedValuesDefinedAbove(op.getRegions(), above);
      for (Value v : above)
        at = std::max(at, readyOf(v));
    }
    if (auto toTensor = dyn_cast<bufferization::ToTensorOp>(op)) {
      // A buffer's tensor is its contents once the ops before it that use
      // the buffer (a library call writing it) have run: no operand says so.
      SmallVector<Value> buffers = {castRoot(toTensor.getBuffer())};
      while (!buffers.empty()) {
        for (Operation *user : buffers.pop_back_val().getUsers()) {
          if (auto cast = dyn_cast<memref::CastOp>(user))
            buffers.push_back(cast.getResult());
          else if (user->getBlock() == &block && user->isBeforeInBlock(&op))
            at = std::max(at, ready[user]);
        }
      }
    }
    ready[&op] = at;
    movable.push_back({&op, role});
  }
  // Feeding ops follow their first user (users come later: reverse order).
  for (auto [op, role] : llvm::reverse(movable)) {
    unsigned at = ready[op];
    if (role == Role::Feeding) {
      unsigned firstUse = original[op];
      for (Operation *user : op->getUsers())
        if (Operation *inBlock = block.findAncestorOpInBlock(*user)) {
          auto it = final.find(inBlock);
          firstUse = std::min(firstUse, it != final.end() ? it->second
                                                          : original[inBlock]);
        }
      at = std::max(at, firstUse);
    }
    final[op] = at;
  }
  for (auto [op, role] : movable)
    if (final[op] < original[op])
      op->moveBefore(receives[final[op]]);
}

struct TerraHoistAboveReceivesPass
    : public terra::impl::TerraHoistAboveReceivesBase<
          TerraHoistAboveReceivesPass> {
  void runOnOperation() override {
    getOperation()->walk(
        [](func::FuncOp f) { f.walk([](Block *block) { hoist(*block); }); });
  }
};

} // namespace

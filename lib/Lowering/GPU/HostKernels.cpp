//===- HostKernels.cpp - The terra-gpu-host-kernels pass ------------------===//
//
// Keeps a GPU graph's host code off the graph's buffers (device memory):
// host loads only kernels use move into them, sequential loops become
// single-thread kernels, indices the host needs come from a host copy
// (see the pass description in Passes.td).
//
//===----------------------------------------------------------------------===//
#include "../RuntimeDecl.h"
#include "../RuntimeNames.h"
#include "HostMemory.h"

#include "terra/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/ParallelLoopMapper.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"

namespace terra {
#define GEN_PASS_DEF_TERRAGPUHOSTKERNELS
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;

namespace {

/// Whether `op` is a kernel: a gpu.launch, or (terra-linalg-to-gpu's
/// `kernels=false`, the gpu-loops pipeline) an scf.parallel mapped to
/// blocks.
bool isKernel(Operation *op) {
  if (isa<gpu::LaunchOp>(op))
    return true;
  auto loop = dyn_cast<scf::ParallelOp>(op);
  return loop && loop->hasAttr(gpu::getMappingAttrName());
}

/// Calls `fn` on every op of host code in `func`, in pre-order: kernels
/// are visited, their bodies are not.
void walkHost(func::FuncOp func, function_ref<void(Operation *)> fn) {
  func.getBody().walk<WalkOrder::PreOrder>([&](Operation *op) {
    fn(op);
    return isKernel(op) ? WalkResult::skip() : WalkResult::advance();
  });
}

/// Whether buffer `v` is the host's own memory: a stack slot, a constant
/// global of the host module, a host copy (terra_rt_to_host_*), or an
/// array of the dealloc helper (which terra-gpu-host-scratch moves to the
/// stack).
bool inHostMemory(Value v) {
  Operation *def = terra::gpu::bufferOf(v).getDefiningOp();
  if (!def)
    return false; // an argument: a feed, state or result buffer
  if (isa<memref::AllocaOp, memref::GetGlobalOp>(def))
    return true;
  if (auto call = dyn_cast<func::CallOp>(def))
    return call.getCallee().starts_with(terra::kRuntimeToHost);
  auto alloc = dyn_cast<memref::AllocOp>(def);
  return alloc && terra::gpu::isHostScratch(alloc);
}

/// Whether `op` itself reads or writes the elements of a graph buffer.
bool accessesDeviceMemory(Operation *op) {
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return false;
  SmallVector<MemoryEffects::EffectInstance> list;
  effects.getEffects(list);
  for (const MemoryEffects::EffectInstance &e : list) {
    if (!isa<MemoryEffects::Read, MemoryEffects::Write>(e.getEffect()))
      continue;
    Value v = e.getValue();
    if (v && isa<MemRefType>(v.getType()) && !inHostMemory(v))
      return true;
  }
  return false;
}

/// Whether `op` or an op inside it must stay on the host: a call (runtime
/// entry points, library calls), an allocation or release (the run's
/// allocator), a kernel launch, or an access to host memory.
bool needsHost(Operation *op) {
  WalkResult r = op->walk([](Operation *inner) {
    if (isa<func::CallOp, memref::AllocOp, memref::DeallocOp, memref::AllocaOp>(
            inner) ||
        isKernel(inner))
      return WalkResult::interrupt();
    if (auto effects = dyn_cast<MemoryEffectOpInterface>(inner)) {
      SmallVector<MemoryEffects::EffectInstance> list;
      effects.getEffects(list);
      for (const MemoryEffects::EffectInstance &e : list)
        if (Value v = e.getValue();
            v && isa<MemRefType>(v.getType()) && inHostMemory(v))
          return WalkResult::interrupt();
    } else if (inner->getNumRegions() == 0 &&
               !inner->hasTrait<OpTrait::IsTerminator>() &&
               !isMemoryEffectFree(inner)) {
      return WalkResult::interrupt(); // unknown effects
    }
    return WalkResult::advance();
  });
  return r.wasInterrupted();
}

/// The outermost structured loop or branch around `access` that can move
/// into a kernel as a whole: its parents up to the first that needs the
/// host or is not scf.for / scf.if / scf.while / scf.parallel.
Operation *kernelRoot(Operation *access) {
  Operation *root = access;
  for (Operation *parent = root->getParentOp();
       parent &&
       isa<scf::ForOp, scf::IfOp, scf::WhileOp, scf::ParallelOp>(parent) &&
       !needsHost(parent);
       parent = parent->getParentOp())
    root = parent;
  return root;
}

/// Every op that uses buffer `v` or a view of it, through view-like ops.
void usersOfBuffer(Value v, SmallVectorImpl<Operation *> &users) {
  for (Operation *user : v.getUsers()) {
    if (auto view = dyn_cast<ViewLikeOpInterface>(user);
        view && view.getViewSource() == v) {
      for (Value r : user->getResults())
        usersOfBuffer(r, users);
      continue;
    }
    users.push_back(user);
  }
}

/// Whether `op` may write memory: it has write effects, or unknown ones
/// (a call: a library call writes its output), except the runtime's
/// fetches, which only read.
bool mayWrite(Operation *op) {
  if (auto call = dyn_cast<func::CallOp>(op))
    return !call.getCallee().starts_with(terra::kRuntimeFetch);
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return true;
  return effects.hasEffect<MemoryEffects::Write>();
}

/// `op`, or the op holding it at the nesting level of `anchor` (an op whose
/// region is an ancestor of `anchor`'s); null if there is none.
Operation *atLevelOf(Operation *op, Operation *anchor) {
  while (op && !op->getParentRegion()->isAncestor(anchor->getParentRegion()))
    op = op->getParentOp();
  return op;
}

/// Whether host load `load` of a graph buffer may move into `launch`, a
/// kernel that uses its value: every op that may write the buffer happens
/// before the load (its producer), and its release does not come before
/// the launch, so the kernel reads the value the host would have read.
/// (Reads, views and fetches may come anywhere.)
bool loadMayMoveInto(memref::LoadOp load, Operation *launch,
                     DominanceInfo &dom) {
  SmallVector<Operation *> users;
  usersOfBuffer(terra::gpu::bufferOf(load.getMemRef()), users);
  for (Operation *user : users) {
    if (isa<memref::DeallocOp>(user)) {
      Operation *at = atLevelOf(user, launch);
      if (!at || dom.properlyDominates(at, launch))
        return false;
      continue;
    }
    if (!mayWrite(user))
      continue;
    Operation *at = atLevelOf(user, load);
    if (!at || !dom.properlyDominates(at, load))
      return false;
  }
  return true;
}

/// Moves into `launch` the host loads of graph buffers whose values it uses
/// (loadMayMoveInto), with the scalar arithmetic between them and the
/// kernel: a fed learning rate, `-lr`, a bias correction. Upstream's
/// sinkOperationsIntoLaunchOp only sinks ops whose operands are kernel
/// arguments already; a load's buffer comes from a runtime call.
void sinkLoadsInto(Operation *launch, DominanceInfo &dom) {
  Region &body = launch->getRegion(0);
  SetVector<Value> captured;
  getUsedValuesDefinedAbove(body, captured);
  // The ops to move, in post-order (operands' producers first): loads
  // that may move, constant globals, and pure scalar ops with an operand
  // among them. The rest stays where it is, a kernel argument.
  SetVector<Operation *> chain;
  DenseSet<Operation *> stays;
  std::function<bool(Operation *)> collect = [&](Operation *op) -> bool {
    if (chain.contains(op))
      return true;
    if (stays.contains(op))
      return false;
    bool moves = false;
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      moves =
          !inHostMemory(load.getMemRef()) && loadMayMoveInto(load, launch, dom);
    } else if (isa<memref::GetGlobalOp>(op)) {
      // A constant table (pooling divisors, window masks): the kernel
      // reads its own copy, which kernel outlining puts in the module.
      moves = true;
    } else if (op->getNumRegions() == 0 && isPure(op) &&
               llvm::none_of(op->getResultTypes(),
                             [](Type t) { return isa<ShapedType>(t); })) {
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          moves |= collect(def);
    }
    if (!moves) {
      stays.insert(op);
      return false;
    }
    chain.insert(op);
    return true;
  };
  SmallVector<Value> moved;
  for (Value v : captured)
    if (Operation *def = v.getDefiningOp(); def && collect(def))
      moved.push_back(v);
  if (chain.empty())
    return;
  OpBuilder b(&body.front(), body.front().begin());
  IRMapping map;
  for (Operation *op : chain)
    b.clone(*op, map);
  for (Value v : moved)
    replaceAllUsesInRegionWith(v, map.lookup(v), body);
}

/// A row-major host copy of `memref`, made before `at`, as a memref of its
/// type (of dynamic strides if it has another layout).
Value copyToHost(Value memref, Operation *at, Location loc) {
  auto type = cast<MemRefType>(memref.getType());
  Type elem = type.getElementType();
  OpBuilder b(at);
  auto unranked = UnrankedMemRefType::get(elem, type.getMemorySpace());
  auto module = at->getParentOfType<ModuleOp>();
  std::string name =
      (terra::kRuntimeToHost + terra::runtimeDTypeSuffix(elem)).str();
  func::FuncOp callee = terra::declareFunction(
      module, nullptr, name, b.getFunctionType({unranked}, {unranked}), true);
  Value in = memref::CastOp::create(b, loc, unranked, memref);
  Value host =
      func::CallOp::create(b, loc, callee, ValueRange{in}).getResult(0);
  // The copy is row-major: the load's type if that is, else a layout of
  // dynamic strides.
  MemRefType hostType = type;
  if (!type.getLayout().isIdentity())
    hostType = MemRefType::get(
        type.getShape(), elem,
        StridedLayoutAttr::get(
            b.getContext(), ShapedType::kDynamic,
            SmallVector<int64_t>(type.getRank(), ShapedType::kDynamic)),
        type.getMemorySpace());
  return memref::CastOp::create(b, loc, hostType, host);
}

/// Makes host load `load`, whose value the host itself uses (an index that
/// places a slice, a bound checked on the host), read a host copy of its
/// buffer (`terra_rt_to_host_<dtype>`: the runtime waits for the work
/// queued before it, then copies the buffer out). The copy is made before
/// the outermost op around the load that the load's memref is defined
/// before and that holds no write to the buffer, so one copy serves a
/// whole loop of index reads (at worst it is made right before the load).
/// `copies`: the host copies made so far, by memref and insertion point.
using HostCopies = DenseMap<std::pair<Value, Operation *>, Value>;
void readFromHostCopy(memref::LoadOp load, DominanceInfo &dom,
                      HostCopies &copies) {
  Value memref = load.getMemRef();
  SmallVector<Operation *> writers;
  SmallVector<Operation *> users;
  usersOfBuffer(terra::gpu::bufferOf(memref), users);
  for (Operation *user : users)
    if (mayWrite(user))
      writers.push_back(user);
  auto canHoistAbove = [&](Operation *op) {
    if (Operation *def = memref.getDefiningOp();
        def && !dom.properlyDominates(def, op))
      return false;
    if (auto arg = dyn_cast<BlockArgument>(memref);
        arg && op->isAncestor(arg.getOwner()->getParentOp()))
      return false;
    return llvm::none_of(writers,
                         [&](Operation *w) { return op->isAncestor(w); });
  };
  Operation *at = load;
  while (Operation *parent = at->getParentOp()) {
    if (isa<FunctionOpInterface>(parent) || !canHoistAbove(parent))
      break;
    at = parent;
  }
  Value &view = copies[{memref, at}];
  if (!view)
    view = copyToHost(memref, at, load.getLoc());
  load.getMemrefMutable().assign(view);
}

struct TerraGPUHostKernelsPass
    : public terra::impl::TerraGPUHostKernelsBase<TerraGPUHostKernelsPass> {
  using TerraGPUHostKernelsBase::TerraGPUHostKernelsBase;

  /// Puts `root` into a single-thread kernel: a gpu.launch, or with
  /// `kernels=false` the one-iteration block and thread loops
  /// terra-linalg-to-gpu would make (the gpu-loops pipeline runs them on
  /// the CPU).
  void wrapInKernel(Operation *root) {
    OpBuilder b(root);
    Location loc = root->getLoc();
    Value one = arith::ConstantIndexOp::create(b, loc, 1);
    if (kernels) {
      auto launch = gpu::LaunchOp::create(b, loc, one, one, one, one, one, one);
      b.setInsertionPointToEnd(&launch.getBody().front());
      root->moveBefore(gpu::TerminatorOp::create(b, loc));
      return;
    }
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    MLIRContext *ctx = b.getContext();
    AffineMap id = AffineMap::getMultiDimIdentityMap(1, ctx);
    scf::ParallelOp inner;
    for (gpu::Processor p : {gpu::Processor::BlockX, gpu::Processor::ThreadX}) {
      auto loop = scf::ParallelOp::create(b, loc, ValueRange{zero},
                                          ValueRange{one}, ValueRange{one});
      (void)gpu::setMappingAttr(
          loop, {gpu::ParallelLoopDimMappingAttr::get(ctx, p, id, id)});
      b.setInsertionPoint(loop.getBody()->getTerminator());
      inner = loop;
    }
    root->moveBefore(inner.getBody()->getTerminator());
  }

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal() || func.isPrivate())
      return; // helpers (the dealloc helper) work on host scratch arrays
    // Scalars the host loads from graph buffers only for kernels (a fed
    // learning rate, a loss scale) are loaded by the kernels themselves.
    auto sinkIntoKernels = [&] {
      DominanceInfo dom(func);
      SmallVector<Operation *> launches, hostOps;
      walkHost(func, [&](Operation *op) {
        if (isKernel(op))
          launches.push_back(op);
        else if (op->getNumRegions() == 0)
          hostOps.push_back(op);
      });
      for (Operation *launch : launches)
        sinkLoadsInto(launch, dom);
      // What the host computed for them only is gone: loads and their
      // arithmetic left without a user (users first).
      for (Operation *op : llvm::reverse(hostOps))
        if (isOpTriviallyDead(op))
          op->erase();
    };
    sinkIntoKernels();

    bool failed = false;
    SetVector<Operation *> roots;
    SmallVector<memref::LoadOp> hostReads;
    walkHost(func, [&](Operation *op) {
      if (!accessesDeviceMemory(op))
        return;
      Operation *root = kernelRoot(op);
      if (root->use_empty() && !needsHost(root)) {
        roots.insert(root);
      } else if (auto load = dyn_cast<memref::LoadOp>(op)) {
        hostReads.push_back(load);
      } else {
        op->emitError("host code of a GPU graph writes a graph buffer's "
                      "elements here, and no single-thread kernel can hold "
                      "it: the graph's buffers are device memory");
        failed = true;
      }
    });
    if (failed)
      return signalPassFailure();
    DominanceInfo dom(func);
    HostCopies copies;
    for (memref::LoadOp load : hostReads)
      readFromHostCopy(load, dom, copies);
    numHostCopies += copies.size();
    // Nested roots: only the outermost moves (an inner root inside an outer
    // one moves with it).
    auto insideAnother = [&](Operation *root) {
      for (Operation *p = root->getParentOp(); p; p = p->getParentOp())
        if (roots.contains(p))
          return true;
      return false;
    };
    for (Operation *root : roots) {
      if (insideAnother(root))
        continue;
      wrapInKernel(root);
      ++numKernels;
    }
    // Loads of scalars the new kernels use.
    sinkIntoKernels();
  }
};

} // namespace

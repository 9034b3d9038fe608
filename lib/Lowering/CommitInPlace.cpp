//===- CommitInPlace.cpp - The terra-commit-in-place pass -----------------===//
//
// After bufferization, a committed iteration's new state (parameters,
// gradients, optimizer slots) is computed into fresh buffers that the host
// then copies into its tensors. This pass lets the graph write such a
// value straight into the state's memory instead, as eager's in-place ops
// do, when the host has already validated the whole iteration by the time
// the graph gets there (see the pass description in Passes.td):
//
//   %ready = call @terra_rt_commit_ready() : () -> i1
//   %buf = scf.if %ready -> memref<...> { scf.yield %state }
//          else { %a = memref.alloc() ; scf.yield %a }
//
// replaces the value's allocation, and its fetch becomes
// `terra_rt_fetch_state_*`, which publishes the state's memory without a
// copy. A fetch qualifies when -terra-mark-state-updates named its state
// (`terra.updates_state`, the state's runtime index after
// -terra-lower-graph), its buffer is an allocation of the state's type,
// and nothing reads the state's old value after the first write of the
// buffer, except that first write itself when it is an elementwise linalg
// op reading the state at the position it writes (`p = p - lr * g`). Each
// value's question goes right before the entry-block op holding its
// buffer's first use, after every op that can still fail (a runtime
// check other than a feed's shape guard, a host op, a state read): past
// it, the run cannot fail, so the host never sees a half-written state.
//
//===----------------------------------------------------------------------===//
#include "BufferWrites.h"
#include "RuntimeDecl.h"
#include "RuntimeNames.h"

#include "terra/Passes.h"

#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace terra {
#define GEN_PASS_DEF_TERRACOMMITINPLACE
#include "terra/Passes.h.inc"
} // namespace terra

using namespace mlir;
using terra::isMemRef;
using Roots = terra::BufferRoots;

namespace {

constexpr StringLiteral kUpdatesState = "terra.updates_state";
/// [case selection id, cases...]: the value is the state's only in those
/// cases (-terra-mark-state-updates).
constexpr StringLiteral kUpdatesStateCase = "terra.updates_state_case";

std::optional<int64_t> constantI64(Value v) {
  IntegerAttr attr;
  if (auto c = v.getDefiningOp<arith::ConstantOp>())
    attr = dyn_cast<IntegerAttr>(c.getValue());
  if (!attr)
    return std::nullopt;
  return attr.getInt();
}

/// `v` without casts and without a collapse-then-expand round trip to the
/// same type (what collapsing an elementwise loop's dims leaves).
Value stripCasts(Value v) {
  while (true) {
    if (auto cast = v.getDefiningOp<memref::CastOp>()) {
      v = cast.getSource();
      continue;
    }
    auto expand = v.getDefiningOp<memref::ExpandShapeOp>();
    auto collapse =
        expand ? expand.getSrc().getDefiningOp<memref::CollapseShapeOp>()
               : memref::CollapseShapeOp();
    if (collapse && collapse.getSrc().getType() == expand.getType() &&
        collapse.getReassociationIndices() ==
            expand.getReassociationIndices()) {
      v = collapse.getSrc();
      continue;
    }
    return v;
  }
}

/// Runtime calls that may still fail the run: after the commit question there
/// must be none.
bool mayFail(func::CallOp call) {
  StringRef callee = call.getCallee();
  // A feed's shape guard: the runtime checks the feed's type as the host
  // sends it, and says no to a commit in place after a mismatch
  // (Channels::commitDecision).
  if (call->hasAttr("terra.feed_guard"))
    return false;
  return callee.starts_with(terra::kRuntimeCheck) ||
         callee.starts_with(terra::kRuntimeHostCall) ||
         callee.starts_with(terra::kRuntimeHostArg) ||
         callee.starts_with(terra::kRuntimeHostResult) ||
         callee.starts_with(terra::kRuntimeToHost) ||
         callee.starts_with(terra::kRuntimeState);
}

/// Ops that only make a view or read a memref's metadata: not accesses.
bool isView(Operation *op) {
  return isa<ViewLikeOpInterface, memref::CastOp, memref::DimOp,
             memref::ExtractStridedMetadataOp>(op) ||
         op->hasTrait<OpTrait::IsTerminator>();
}

struct Candidate {
  func::CallOp fetch;
  int64_t state;
  memref::AllocOp alloc;
  Value stateMemRef;        ///< Null: to be made (a cast of stateCall's).
  Operation *reshape;       ///< The fetch's view of `alloc`, if any.
  func::CallOp stateCall;   ///< The runtime call reading the state.
  Operation *top = nullptr; ///< The entry-block op holding the first write.
  /// The first write when it reads the state (an elementwise update): its
  /// init operand that writes the buffer, and its inputs reading the state.
  Operation *update = nullptr;
  unsigned updateInit = 0;
  SmallVector<unsigned> stateInputs;
  /// Those of its state inputs whose static layout is not the buffer's (a
  /// branch's result of the state has the branches' common layout): each
  /// must be the state's memory as the buffer sees it, checked at run time.
  SmallVector<Value> checkedInputs;
  /// The entry-block case selection (`terra_rt_case`) and the cases in
  /// which the value is the state's, when only in some.
  func::CallOp caseCall;
  SmallVector<int64_t> cases;
  Value flag;              ///< The answer of the question asked for it.
  Operation *at = nullptr; ///< The entry-block op its question precedes.
};

struct TerraCommitInPlacePass
    : public terra::impl::TerraCommitInPlaceBase<TerraCommitInPlacePass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<Attribute> donated;
    for (func::FuncOp func : module.getOps<func::FuncOp>())
      if (!func.isExternal())
        run(module, func, donated);
    if (!donated.empty())
      module->setAttr("terra.donated_states",
                      ArrayAttr::get(module.getContext(), donated));
  }

  void run(ModuleOp module, func::FuncOp func,
           SmallVectorImpl<Attribute> &donated) {
    Block &entry = func.front();
    llvm::DenseMap<Operation *, unsigned> order;
    Roots roots;
    llvm::DenseMap<Value, int64_t> stateRoots;
    llvm::DenseMap<int64_t, func::CallOp>
        stateCalls; // first in the entry block
    llvm::DenseMap<int64_t, func::CallOp> caseCalls; // received once
    SmallVector<func::CallOp> fetches;
    func.walk<WalkOrder::PreOrder>([&](Operation *op) {
      order[op] = order.size();
      roots.add(op);
      auto call = dyn_cast<func::CallOp>(op);
      if (!call)
        return;
      if (call.getCallee().starts_with(terra::kRuntimeState) &&
          call.getNumOperands() > 0 && call.getNumResults() == 1)
        if (auto id = constantI64(call.getOperand(0))) {
          stateRoots[call.getResult(0)] = *id;
          if (call->getBlock() == &entry)
            stateCalls.try_emplace(*id, call);
        }
      if (call.getCallee() == terra::kRuntimeCase && call.getNumOperands() > 0)
        if (auto id = constantI64(call.getOperand(0))) {
          // A selection received once, in the entry block; received twice
          // (anywhere), which receive chose the branch is not known here,
          // so neither is used.
          auto [it, inserted] = caseCalls.try_emplace(
              *id, call->getBlock() == &entry ? call : func::CallOp());
          if (!inserted)
            it->second = nullptr;
        }
      if (call.getCallee().starts_with(terra::kRuntimeFetch) &&
          call->hasAttr(kUpdatesState))
        fetches.push_back(call);
    });
    if (fetches.empty())
      return;
    roots.solve();

    auto topOf = [&](Operation *op) {
      while (op->getBlock() != &entry)
        op = op->getParentOp();
      return op;
    };
    // The op itself, or the outermost loop around it: a loop's ops run
    // again after the later ones in its body.
    auto unitOf = [&](Operation *op) {
      Operation *unit = op;
      for (Operation *p = op->getParentOp(); p && p != func;
           p = p->getParentOp())
        if (isa<LoopLikeOpInterface>(p))
          unit = p;
      return unit;
    };
    auto rootedAt = [&](Value v, Value root) {
      return isMemRef(v) && llvm::is_contained(roots.of(v), root);
    };
    auto rootedAtState = [&](Value v, int64_t state) {
      if (!isMemRef(v))
        return false;
      for (Value r : roots.of(v)) {
        auto it = stateRoots.find(r);
        if (it != stateRoots.end() && it->second == state)
          return true;
      }
      return false;
    };

    // One candidate per state: its last fetch.
    llvm::MapVector<int64_t, Candidate> byState;
    for (func::CallOp fetch : fetches) {
      int64_t state = fetch->getAttrOfType<IntegerAttr>(kUpdatesState).getInt();
      if (fetch.getNumOperands() != 2)
        continue;
      // The buffer, or a reshape of it (collapsed loops).
      Value fetched = stripCasts(fetch.getOperand(1));
      Operation *reshape = fetched.getDefiningOp();
      if (reshape &&
          isa<memref::ExpandShapeOp, memref::CollapseShapeOp>(reshape))
        fetched = reshape->getOperand(0);
      else
        reshape = nullptr;
      auto alloc = fetched.getDefiningOp<memref::AllocOp>();
      if (!alloc || !alloc.getType().getLayout().isIdentity() ||
          (reshape && !alloc.getType().hasStaticShape()))
        continue;
      auto type = reshape ? cast<MemRefType>(reshape->getResult(0).getType())
                          : alloc.getType();
      if (!type.getLayout().isIdentity())
        continue;
      // The state's memory as a buffer of that type, read where the state
      // is (a state only zeroed, never read, has no such cast).
      func::CallOp stateCall = stateCalls.lookup(state);
      if (!stateCall)
        continue;
      Value stateMemRef;
      for (Operation *user : stateCall.getResult(0).getUsers())
        if (auto cast = dyn_cast<memref::CastOp>(user))
          if (cast.getType() == type && cast->getBlock() == &entry) {
            stateMemRef = cast.getResult();
            break;
          }
      // Only in some cases: the selection must be known in the entry block.
      func::CallOp caseCall;
      SmallVector<int64_t> cases;
      if (auto when =
              fetch->getAttrOfType<DenseI64ArrayAttr>(kUpdatesStateCase)) {
        if (when.size() < 2 || !(caseCall = caseCalls.lookup(when[0])))
          continue;
        cases.assign(when.asArrayRef().begin() + 1, when.asArrayRef().end());
      }
      Candidate &c = byState[state];
      if (c.fetch && order[c.fetch] > order[fetch])
        continue;
      c = Candidate{fetch, state, alloc, stateMemRef, reshape, stateCall};
      c.caseCall = caseCall;
      c.cases = std::move(cases);
    }

    // One walk: each candidate buffer's first use (views aside) and, per
    // state, the ops reading it, in program order.
    llvm::DenseMap<Value, int64_t> candidateOf; // allocation -> state
    for (auto &[state, c] : byState)
      if (c.fetch)
        candidateOf.try_emplace(c.alloc.getResult(), state);
    llvm::DenseMap<int64_t, Operation *> firstUse;
    llvm::DenseMap<int64_t, SmallVector<Operation *>> readersOf;
    func.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isView(op) || isa<memref::AllocOp>(op))
        return;
      llvm::SmallSetVector<int64_t, 4> touched, read;
      for (Value v : op->getOperands()) {
        if (!isMemRef(v))
          continue;
        for (Value r : roots.of(v)) {
          if (auto it = candidateOf.find(r); it != candidateOf.end())
            touched.insert(it->second);
          if (auto it = stateRoots.find(r); it != stateRoots.end())
            read.insert(it->second);
        }
      }
      for (int64_t state : touched)
        firstUse.try_emplace(state, op);
      for (int64_t state : read)
        readersOf[state].push_back(op);
    });

    SmallVector<Candidate, 0> accepted;
    llvm::DenseSet<Operation *> allocsTaken;
    for (auto &[state, c] : byState) {
      if (!c.fetch || !allocsTaken.insert(c.alloc).second ||
          candidateOf.lookup(c.alloc.getResult()) != state)
        continue;
      Value buf = c.alloc.getResult();
      Operation *first = firstUse.lookup(state);
      ArrayRef<Operation *> readers = readersOf[state];
      if (!first || !writesBuffer(first, buf, rootedAt))
        continue;
      // A fetch or buffer in a loop: every trip's value would be the
      // state's one memory, and each published instance would show the
      // last.
      if (unitOf(c.fetch) != c.fetch || unitOf(c.alloc) != c.alloc)
        continue;
      bool ok = true;
      for (Operation *r : readers) {
        if (r == first && unitOf(first) == first &&
            isElementwiseUpdate(first, buf, state, rootedAt, rootedAtState,
                                c.updateInit, c.stateInputs, c.checkedInputs)) {
          c.update = first;
          continue;
        }
        if (order[unitOf(r)] >= order[unitOf(first)]) {
          ok = false;
          break;
        }
      }
      if (!ok)
        continue;
      c.top = topOf(first);
      accepted.push_back(c);
    }
    if (accepted.empty())
      return;

    // The entry-block position after which nothing may fail.
    llvm::DenseMap<Operation *, unsigned> position;
    for (Operation &op : entry)
      position[&op] = position.size();
    int64_t lastUnsafe = -1;
    func.walk([&](Operation *op) {
      auto call = dyn_cast<func::CallOp>(op);
      if ((call && mayFail(call)) || isa<cf::AssertOp>(op))
        lastUnsafe = std::max<int64_t>(lastUnsafe, position[topOf(op)]);
    });
    // Each candidate's question goes before the entry-block op holding its
    // buffer's first use (a view of it may come before the first access);
    // drop those whose question would come before an op that can fail.
    for (Candidate &c : accepted) {
      c.at = c.top;
      for (Operation *user : c.alloc->getUsers())
        if (position[topOf(user)] < position[c.at])
          c.at = topOf(user);
    }
    auto before = [&](Value v, Operation *at) {
      Operation *def = v.getDefiningOp();
      return def ? def->getBlock() == &entry && position[def] < position[at]
                 : cast<BlockArgument>(v).getOwner() == &entry;
    };
    llvm::erase_if(accepted, [&](const Candidate &c) {
      return int64_t(position[c.at]) <= lastUnsafe ||
             (c.caseCall && !before(c.caseCall->getResult(0), c.at)) ||
             (!c.checkedInputs.empty() &&
              (c.reshape || !llvm::all_of(c.checkedInputs, [&](Value v) {
                 return before(v, c.at);
               })));
    });
    if (accepted.empty())
      return;
    // The state's memory as each buffer's type (a cast where the state is
    // read: a state only written, never read, has none yet).
    for (Candidate &c : accepted)
      if (!c.stateMemRef) {
        OpBuilder cb(c.stateCall->getBlock(),
                     std::next(Block::iterator(c.stateCall)));
        Type viewType =
            c.reshape ? c.reshape->getResult(0).getType() : c.alloc.getType();
        c.stateMemRef = memref::CastOp::create(
            cb, c.stateCall.getLoc(), viewType, c.stateCall.getResult(0));
      }

    // One question right before each entry-block op holding first accesses:
    // asked as late as possible, it says yes more often (gradients are
    // accumulated long before the optimizer's update, when the host is
    // rarely done yet; the parameters' update comes last).
    OpBuilder b(module.getContext());
    func::FuncOp ready = terra::declareFunction(
        module, nullptr, terra::kRuntimeCommitReady,
        FunctionType::get(module.getContext(), {}, b.getI1Type()),
        /*cInterface=*/false);
    llvm::DenseMap<Operation *, Value> asked;
    for (Candidate &c : accepted) {
      Value &flag = asked[c.at];
      if (!flag) {
        b.setInsertionPoint(c.at);
        flag = func::CallOp::create(b, c.at->getLoc(), ready, ValueRange{})
                   .getResult(0);
      }
      c.flag = flag;
      b.setInsertionPoint(c.at);
      Location loc = c.at->getLoc();
      // In place only in the cases yielding the state: ready and one of them.
      if (c.caseCall) {
        Value chosen = c.caseCall.getResult(0), inCase;
        for (int64_t k : c.cases) {
          Value is =
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, chosen,
                                    arith::ConstantIndexOp::create(b, loc, k));
          inCase = inCase ? arith::OrIOp::create(b, loc, inCase, is) : is;
        }
        c.flag = arith::AndIOp::create(b, loc, c.flag, inCase);
      }
      for (Value in : c.checkedInputs)
        c.flag = arith::AndIOp::create(b, loc, c.flag,
                                       sameView(b, loc, in, c.stateMemRef));
    }
    for (Candidate &c : accepted) {
      b.setInsertionPoint(c.at);
      Location loc = c.at->getLoc();
      Value flag = c.flag;
      MemRefType type = c.alloc.getType();
      Value stateMemRef = c.stateMemRef;
      auto alignment = c.alloc.getAlignmentAttr();
      auto select = scf::IfOp::create(
          b, loc, flag,
          [&](OpBuilder &tb, Location l) {
            // The buffer as the fetch's reshape of it sees the state.
            Value mem = stateMemRef;
            if (auto e = dyn_cast_or_null<memref::ExpandShapeOp>(c.reshape))
              mem = memref::CollapseShapeOp::create(
                  tb, l, type, mem, e.getReassociationIndices());
            else if (auto co =
                         dyn_cast_or_null<memref::CollapseShapeOp>(c.reshape))
              mem = memref::ExpandShapeOp::create(tb, l, type, mem,
                                                  co.getReassociationIndices());
            scf::YieldOp::create(tb, l, mem);
          },
          [&](OpBuilder &eb, Location l) {
            SmallVector<Value> sizes;
            for (int64_t d = 0; d < type.getRank(); ++d)
              if (type.isDynamicDim(d))
                sizes.push_back(memref::DimOp::create(eb, l, stateMemRef, d));
            Value fresh =
                memref::AllocOp::create(eb, l, type, sizes, alignment);
            scf::YieldOp::create(eb, l, fresh);
          });
      c.alloc.getResult().replaceAllUsesWith(select.getResult(0));
      c.alloc.erase();
      // Its fetch publishes the state's memory without a copy.
      OpBuilder fb(c.fetch);
      Value memref = c.fetch.getOperand(1);
      std::string suffix = c.fetch.getCallee()
                               .drop_front(terra::kRuntimeFetch.size())
                               .str(); // "_f32"
      Value id = c.fetch.getOperand(0);
      Value stateId = arith::ConstantOp::create(fb, c.fetch.getLoc(),
                                                fb.getI64IntegerAttr(c.state));
      func::FuncOp f = terra::declareFunction(
          module, nullptr, (terra::kRuntimeFetchState + suffix).str(),
          fb.getFunctionType(
              {id.getType(), stateId.getType(), memref.getType()}, {}),
          /*cInterface=*/true);
      func::CallOp::create(fb, c.fetch.getLoc(), f,
                           ValueRange{id, stateId, memref});
      c.fetch.erase();
      donated.push_back(b.getI64IntegerAttr(c.state));
      ++numDonated;
    }
    // After every select is in place: a split moves its update (which may
    // be the op the selects were inserted before) into a branch.
    llvm::SmallPtrSet<Operation *, 8> split;
    for (Candidate &c : accepted)
      if (c.update && split.insert(c.update).second)
        splitUpdate(c, c.flag);
  }

  /// Whether memrefs `x` and `y` of one shape view the same elements at each
  /// index: the same aligned pointer, offset, sizes and strides.
  static Value sameView(OpBuilder &b, Location loc, Value x, Value y) {
    auto ptr = [&](Value v) {
      return memref::ExtractAlignedPointerAsIndexOp::create(b, loc, v);
    };
    Value same =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, ptr(x), ptr(y));
    auto mx = memref::ExtractStridedMetadataOp::create(b, loc, x);
    auto my = memref::ExtractStridedMetadataOp::create(b, loc, y);
    SmallVector<std::pair<Value, Value>> pairs{
        {mx.getOffset(), my.getOffset()}};
    for (auto [p, q] : llvm::zip(mx.getSizes(), my.getSizes()))
      pairs.push_back({p, q});
    for (auto [p, q] : llvm::zip(mx.getStrides(), my.getStrides()))
      pairs.push_back({p, q});
    for (auto [p, q] : pairs)
      same = arith::AndIOp::create(
          b, loc, same,
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, p, q));
    return same;
  }

  /// Whether `op` writes `buf` (or may write any buffer).
  template <typename RootedAt>
  static bool writesBuffer(Operation *op, Value buf, RootedAt rootedAt) {
    std::optional<SmallVector<Value>> written = terra::writtenBy(op);
    if (!written)
      return true;
    return llvm::any_of(*written, [&](Value v) { return rootedAt(v, buf); });
  }

  /// `op` writes `buf` elementwise and reads the state only at the position
  /// it writes: a linalg op on buffers whose only output rooted at `buf` is
  /// all of it under a permutation map, and whose operands rooted at the
  /// state are inputs of the same type under the same map.
  template <typename RootedAt, typename RootedAtState>
  static bool isElementwiseUpdate(Operation *op, Value buf, int64_t state,
                                  RootedAt rootedAt,
                                  RootedAtState rootedAtState,
                                  unsigned &outIndex,
                                  SmallVectorImpl<unsigned> &stateInputs,
                                  SmallVectorImpl<Value> &checked) {
    auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
    if (!linalgOp || !linalgOp.hasPureBufferSemantics())
      return false;
    OpOperand *out = nullptr;
    for (OpOperand &init : linalgOp.getDpsInitsMutable()) {
      if (rootedAtState(init.get(), state))
        return false;
      if (rootedAt(init.get(), buf)) {
        if (out)
          return false;
        out = &init;
        outIndex = init.getOperandNumber() - linalgOp.getNumDpsInputs();
      }
    }
    stateInputs.clear();
    checked.clear();
    if (!out)
      return false;
    auto outView = wholeView(out->get(), cast<MemRefType>(buf.getType()));
    AffineMap map = linalgOp.getMatchingIndexingMap(out);
    if (!outView || !map.isPermutation())
      return false;
    for (OpOperand *in : linalgOp.getDpsInputOperands()) {
      if (!rootedAtState(in->get(), state))
        continue;
      if (linalgOp.getMatchingIndexingMap(in) != map)
        return false;
      stateInputs.push_back(in->getOperandNumber());
      if (in->get().getType() == out->get().getType() &&
          wholeView(in->get(), cast<MemRefType>(buf.getType())) == outView)
        continue;
      // The same shape in another layout, read where the buffer itself is
      // written: the position written iff it views the state's memory as
      // the buffer does (checked at run time).
      auto inType = dyn_cast<MemRefType>(in->get().getType());
      if (!inType || !outView->empty() || out->get() != buf ||
          inType.getShape() != cast<MemRefType>(buf.getType()).getShape() ||
          inType.getElementType() != getElementTypeOrSelf(buf.getType()))
        return false;
      checked.push_back(in->get());
    }
    return true;
  }

  /// Gives the elementwise update `c.update` (a linalg.generic) an in-place
  /// twin that reads the state through its output operand, taken when
  /// `ready`: as a separate input, the state's memory is the output's, and
  /// LLVM's vectorizer, finding the two ranges overlapping at run time,
  /// took the scalar loop (YOLOv3's Adam updates: 7 ms more a step).
  static void splitUpdate(Candidate &c, Value ready) {
    auto generic = dyn_cast_or_null<linalg::GenericOp>(c.update);
    if (!generic || generic.getNumResults() != 0)
      return;
    Location loc = generic.getLoc();
    OpBuilder b(generic);
    auto branch = scf::IfOp::create(b, loc, TypeRange{}, ready,
                                    /*withElseRegion=*/true);
    unsigned numInputs = generic.getNumDpsInputs();
    SmallVector<Value> inputs;
    SmallVector<AffineMap> maps;
    for (OpOperand *in : generic.getDpsInputOperands())
      if (!llvm::is_contained(c.stateInputs, in->getOperandNumber())) {
        inputs.push_back(in->get());
        maps.push_back(generic.getMatchingIndexingMap(in));
      }
    for (OpOperand &init : generic.getDpsInitsMutable())
      maps.push_back(generic.getMatchingIndexingMap(&init));
    OpBuilder tb = branch.getThenBodyBuilder();
    Block &body = generic.getRegion().front();
    linalg::GenericOp::create(
        tb, loc, TypeRange{}, inputs, generic.getDpsInits(), maps,
        generic.getIteratorTypesArray(),
        [&](OpBuilder &nb, Location l, ValueRange args) {
          IRMapping mapping;
          unsigned next = 0;
          for (unsigned i = 0; i < numInputs; ++i)
            if (!llvm::is_contained(c.stateInputs, i))
              mapping.map(body.getArgument(i), args[next++]);
          unsigned firstInit = next;
          for (unsigned i = numInputs; i < body.getNumArguments(); ++i)
            mapping.map(body.getArgument(i), args[next++]);
          for (unsigned i : c.stateInputs)
            mapping.map(body.getArgument(i), args[firstInit + c.updateInit]);
          for (Operation &op : body)
            nb.clone(op, mapping);
        });
    generic->moveBefore(branch.elseBlock()->getTerminator());
  }

  /// How `v` views a whole buffer of type `whole`: through casts, as it is
  /// (no reassociation) or collapsed (its reassociation); nullopt for any
  /// other view.
  static std::optional<SmallVector<ReassociationIndices>>
  wholeView(Value v, MemRefType whole) {
    // Casts between ranked types.
    auto base = [&](Value x) {
      while (x.getType() != whole)
        if (auto cast = x.getDefiningOp<memref::CastOp>();
            cast && isa<MemRefType>(cast.getSource().getType()))
          x = cast.getSource();
        else
          break;
      return x;
    };
    v = base(v);
    if (v.getType() == whole)
      return SmallVector<ReassociationIndices>{};
    if (auto collapse = v.getDefiningOp<memref::CollapseShapeOp>())
      if (base(collapse.getSrc()).getType() == whole)
        return collapse.getReassociationIndices();
    return std::nullopt;
  }
};

} // namespace

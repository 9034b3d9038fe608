//===- TypedTraceGraph.cpp - TraceGraph <-> IR ----------------------------===//
#include "terra/Merge/TypedTraceGraph.h"

#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace terra;

Type terra::relaxType(Type a, Type b) {
  if (!a)
    return b;
  auto ta = cast<RankedTensorType>(a), tb = cast<RankedTensorType>(b);
  if (ta == tb)
    return a;
  SmallVector<int64_t> shape(ta.getShape());
  for (auto [i, d] : llvm::enumerate(tb.getShape()))
    if (shape[i] != d)
      shape[i] = ShapedType::kDynamic;
  return RankedTensorType::get(shape, ta.getElementType());
}

TypedTraceGraph::TypedTraceGraph(MLIRContext *ctx) : ctx(ctx) {
  // Key 0 belongs to the start/end sentinels.
  keys.push_back(KeyInfo{TGKind::Start, nullptr, nullptr, UnknownLoc::get(ctx)});
}

uint32_t TypedTraceGraph::typeClass(Type type) {
  auto t = cast<RankedTensorType>(type);
  auto key = std::make_pair(t.getElementType().getAsOpaquePointer(),
                            int64_t(t.getRank()));
  auto it = classIndex.try_emplace(key, classIndex.size()).first;
  return it->second;
}

KeyId TypedTraceGraph::internKey(TGKind kind, StringAttr name,
                                 DictionaryAttr args, Location loc,
                                 TypeRange resultTypes) {
  std::vector<uint32_t> classes;
  for (Type t : resultTypes)
    classes.push_back(typeClass(t));
  // State is identified by name; everything else by its site too.
  const void *site = kind == TGKind::State ? nullptr : loc.getAsOpaquePointer();
  auto key = std::make_tuple(int(kind), name.getAsOpaquePointer(),
                             args.getAsOpaquePointer(), site, classes);
  auto [it, inserted] = keyIndex.try_emplace(key, keys.size());
  if (inserted)
    keys.push_back(KeyInfo{kind, name, args, loc});
  return it->second;
}

Location TypedTraceGraph::nodeLoc(NodeId id) const {
  return keys[tg.node(id).key].loc;
}

void TypedTraceGraph::relax(NodeId id, TypeRange observed) {
  if (id >= types.size())
    types.resize(id + 1);
  auto &known = types[id];
  if (known.empty()) {
    known.assign(observed.begin(), observed.end());
    return;
  }
  for (auto [k, t] : llvm::zip(known, observed))
    k = relaxType(k, t);
}

FailureOr<MergeOutcome> TypedTraceGraph::addTrace(TraceOp traceOp) {
  Trace trace;
  llvm::DenseMap<Value, TraceValue> values;
  SmallVector<Operation *> eventOps;
  llvm::DenseMap<KeyId, Type> stateTypes;
  for (Operation &op : traceOp.getBody().front()) {
    TraceEvent ev;
    auto valuesOf = [&](ValueRange operands) -> LogicalResult {
      for (Value v : operands) {
        auto it = values.find(v);
        if (it == values.end())
          return op.emitOpError("uses a value that no earlier op of the "
                                "trace produced");
        ev.inputs.push_back(it->second);
      }
      return success();
    };
    if (auto state = dyn_cast<StateOp>(op)) {
      Type t = state.getType();
      KeyId key = internKey(TGKind::State, state.getNameAttr(), nullptr,
                            state.getLoc(), {});
      auto [it, inserted] = stateTypes.try_emplace(key, t);
      uint32_t cls = typeClass(t);
      if (!inserted && typeClass(it->second) != cls)
        return state.emitOpError("reads state '")
               << state.getName() << "' with a different dtype or rank";
      it->second = relaxType(it->second, t);
      values[state.getResult()] = TraceValue{TraceValue::State, key, cls};
      continue;
    }
    if (auto dl = dyn_cast<DLOp>(op)) {
      ev.kind = TraceEvent::Kind::Op;
      ev.key = internKey(TGKind::Op, dl.getNameAttr(), dl.getArgsAttr(),
                         dl.getLoc(), dl.getResultTypes());
      if (failed(valuesOf(dl.getInputs())))
        return failure();
      for (Type t : dl.getResultTypes())
        ev.resultClasses.push_back(typeClass(t));
    } else if (auto feed = dyn_cast<FeedOp>(op)) {
      ev.kind = TraceEvent::Kind::Feed;
      ev.key = internKey(TGKind::Feed, nullptr, nullptr, feed.getLoc(),
                         feed.getType());
      ev.resultClasses.push_back(typeClass(feed.getType()));
    } else if (auto fetch = dyn_cast<FetchOp>(op)) {
      ev.kind = TraceEvent::Kind::Fetch;
      if (failed(valuesOf(fetch.getValue())))
        return failure();
    } else if (isa<LoopBeginOp>(op)) {
      ev.kind = TraceEvent::Kind::LoopBegin;
      ev.key = internKey(TGKind::Loop, nullptr, nullptr, op.getLoc(), {});
    } else if (isa<LoopIterOp>(op)) {
      ev.kind = TraceEvent::Kind::LoopIter;
    } else if (isa<LoopEndOp>(op)) {
      ev.kind = TraceEvent::Kind::LoopEnd;
    } else {
      return op.emitOpError("is not allowed in a terra.trace");
    }
    uint32_t index = trace.size();
    for (unsigned r = 0; r < op.getNumResults(); ++r)
      values[op.getResult(r)] = TraceValue{TraceValue::Event, index, r};
    trace.push_back(std::move(ev));
    eventOps.push_back(&op);
  }

  MergeOutcome out = tg.merge(trace);
  if (!out.error.empty())
    return traceOp.emitOpError("could not be merged: ") << out.error;
  if (!out.coverable) {
    traceOp.emitWarning("reads a value in a way no single graph can route "
                        "(a stale value on a path-dependent slot); it is "
                        "not merged and its function should run eagerly");
    return out;
  }
  for (auto [i, op] : llvm::enumerate(eventOps))
    if (out.nodeOfEvent[i] != kNoNode && op->getNumResults())
      relax(out.nodeOfEvent[i], op->getResultTypes());
  for (auto [key, type] : stateTypes)
    relax(tg.stateNode(key), type);
  return out;
}

//===----------------------------------------------------------------------===//
// To IR
//===----------------------------------------------------------------------===//

TraceGraphOp TypedTraceGraph::emit(OpBuilder &b, Location loc,
                                   StringRef name) const {
  llvm::DenseMap<NodeId, SmallVector<NodeId>> levels;
  for (NodeId id = 0; id < tg.size(); ++id)
    levels[tg.node(id).parent].push_back(id);

  auto graph = TraceGraphOp::create(b, loc, b.getStringAttr(name),
                                    b.getI64IntegerAttr(tg.numTraces()));
  Block *top = new Block();
  graph.getBody().push_back(top);

  std::function<void(NodeId, Block *)> emitLevel = [&](NodeId level,
                                                       Block *block) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(block);
    for (NodeId id : levels[level]) {
      const Node &n = tg.node(id);
      SmallVector<int64_t> succ(n.succ.begin(), n.succ.end());
      if (n.kind == TGKind::Loop) {
        SmallVector<int64_t> trips(n.trips.begin(), n.trips.end());
        auto loop = LoopNodeOp::create(b, nodeLoc(id), id, trips, succ);
        Block *body = new Block();
        loop.getBody().push_back(body);
        emitLevel(id, body);
        continue;
      }
      OperationState state(n.kind == TGKind::Start || n.kind == TGKind::End
                               ? loc
                               : nodeLoc(id),
                           NodeOp::getOperationName());
      const KeyInfo &info = keys[n.key];
      state.addAttribute("id", b.getI64IntegerAttr(id));
      state.addAttribute("kind",
                         NodeKindAttr::get(ctx, static_cast<NodeKind>(n.kind)));
      if (n.kind == TGKind::Op || n.kind == TGKind::State)
        state.addAttribute("name", info.name);
      if (n.kind == TGKind::Op && info.args)
        state.addAttribute("args", info.args);
      SmallVector<Attribute> typeAttrs;
      for (Type t : nodeTypes(id))
        typeAttrs.push_back(TypeAttr::get(t));
      state.addAttribute("result_types", b.getArrayAttr(typeAttrs));
      SmallVector<Attribute> sources;
      for (const auto &set : n.sources) {
        SmallVector<int64_t> flat;
        for (const Source &s : set)
          flat.append({int64_t(s.node), int64_t(s.result), int64_t(s.age)});
        sources.push_back(b.getDenseI64ArrayAttr(flat));
      }
      state.addAttribute("sources", b.getArrayAttr(sources));
      state.addAttribute("succ", b.getDenseI64ArrayAttr(succ));
      SmallVector<int64_t> fetch(n.fetchIds.begin(), n.fetchIds.end());
      state.addAttribute("fetch_ids", b.getDenseI64ArrayAttr(fetch));
      b.create(state);
    }
  };
  emitLevel(kNoNode, top);
  return graph;
}

//===----------------------------------------------------------------------===//
// From IR
//===----------------------------------------------------------------------===//

FailureOr<std::unique_ptr<TypedTraceGraph>>
TypedTraceGraph::fromIR(TraceGraphOp op) {
  auto result = std::make_unique<TypedTraceGraph>(op.getContext());
  TypedTraceGraph &self = *result;
  TraceGraph &g = self.tg;
  llvm::DenseMap<int64_t, NodeId> idMap;
  llvm::DenseMap<NodeId, Operation *> opOf;

  // Pass 1: give every node a dense id, top-level start/end first.
  std::function<LogicalResult(Block &, NodeId)> number =
      [&](Block &block, NodeId level) -> LogicalResult {
    for (Operation &o : block) {
      NodeId id;
      if (auto node = dyn_cast<NodeOp>(o)) {
        bool sentinel = node.getKind() == NodeKind::Start ||
                        node.getKind() == NodeKind::End;
        if (sentinel && level == kNoNode) {
          id = node.getKind() == NodeKind::Start ? TraceGraph::start()
                                                 : TraceGraph::end();
          g.mutableNode(id).succ.clear();
        } else {
          Node n;
          n.kind = static_cast<TGKind>(node.getKind());
          n.parent = level;
          id = g.addNode(std::move(n));
          if (sentinel) {
            Node &loop = g.mutableNode(level);
            (node.getKind() == NodeKind::Start ? loop.bodyStart
                                               : loop.bodyEnd) = id;
          }
        }
        idMap[node.getId()] = id;
        opOf[id] = node;
        continue;
      }
      auto loop = cast<LoopNodeOp>(o);
      Node n;
      n.kind = TGKind::Loop;
      n.parent = level;
      id = g.addNode(std::move(n));
      idMap[loop.getId()] = id;
      opOf[id] = loop;
      if (failed(number(loop.getBody().front(), id)))
        return failure();
    }
    return success();
  };
  if (failed(number(op.getBody().front(), kNoNode)))
    return failure();

  // Pass 2: keys, types, edges and sources.
  for (NodeId id = 0; id < g.size(); ++id) {
    Operation *o = opOf.lookup(id);
    if (!o)
      return op.emitOpError("is missing its top-level start or end node");
    Node &n = g.mutableNode(id);
    ArrayRef<int64_t> succ;
    if (auto loop = dyn_cast<LoopNodeOp>(o)) {
      n.key = self.internKey(TGKind::Loop, nullptr, nullptr, loop.getLoc(), {});
      for (int64_t t : loop.getTrips())
        n.trips.push_back(uint32_t(t));
      succ = loop.getSucc();
    } else {
      auto node = cast<NodeOp>(o);
      SmallVector<Type> resultTypes;
      for (Attribute a : node.getResultTypes())
        resultTypes.push_back(cast<TypeAttr>(a).getValue());
      if (n.kind == TGKind::Op || n.kind == TGKind::Feed ||
          n.kind == TGKind::State) {
        n.key = self.internKey(n.kind, node.getNameAttr(), node.getArgsAttr(),
                               node.getLoc(),
                               n.kind == TGKind::State ? TypeRange()
                                                       : TypeRange(resultTypes));
        for (Type t : resultTypes)
          n.resultClasses.push_back(self.typeClass(t));
        self.relax(id, resultTypes);
      }
      for (int64_t f : node.getFetchIds())
        n.fetchIds.push_back(int32_t(f));
      succ = node.getSucc();
    }
    for (int64_t s : succ)
      n.succ.push_back(idMap.lookup(s));
  }
  for (NodeId id = 0; id < g.size(); ++id) {
    auto node = dyn_cast<NodeOp>(opOf.lookup(id));
    if (!node)
      continue;
    Node &n = g.mutableNode(id);
    for (Attribute slot : node.getSources()) {
      ArrayRef<int64_t> flat = cast<DenseI64ArrayAttr>(slot).asArrayRef();
      SmallVector<Source, 1> set;
      for (size_t i = 0; i + 2 < flat.size(); i += 3) {
        NodeId producer = idMap.lookup(flat[i]);
        const Node &p = g.node(producer);
        if (flat[i + 1] >= int64_t(p.resultClasses.size()))
          return node.emitOpError("input source ")
                 << flat[i] << ":" << flat[i + 1]
                 << " names a result its producer does not have";
        set.push_back(Source{producer, uint32_t(flat[i + 1]),
                             uint32_t(flat[i + 2])});
      }
      n.sources.push_back(std::move(set));
    }
  }
  g.setNumTraces(op.getNumTraces());
  g.reindex();
  return result;
}

//===- CaseAssignment.cpp - TraceGraph to one terra.graph -----------------===//
//
// Structured-region construction with node duplication (docs/case-assignment.md):
//
//  * Per level, post-dominators are computed over the DAG with `end` as the
//    exit. Walking from `start`, a node with one successor is emitted in
//    sequence; a divergence `b` becomes an `scf.index_switch` whose case k
//    emits the paths from successor k up to ipdom(b), which post-dominates
//    every successor. A sub-DAG reachable from several cases is emitted in
//    each of them (duplication), which is what makes any DAG work.
//  * Data flow follows the TraceGraph's provenance sets: each distinct set
//    is a variable; a node that runs assigns every variable containing one
//    of its results, and a slot reads its variable. Variables changed in a
//    case and read after the switch become switch results; variables
//    assigned in a loop body become scf.while operands. Aged sources
//    ("the value this node produced k executions ago") are shift registers.
//
//===----------------------------------------------------------------------===//
#include "terra/CaseAssignment/CaseAssignment.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <map>

using namespace mlir;
using namespace terra;

namespace {

using VarId = uint32_t;

struct Var {
  SmallVector<Source, 1> set;
  Type type;
  /// Nodes whose input slots read this variable (directly or, for the
  /// younger stages of a shift register, through an older stage).
  SmallVector<NodeId, 2> readers;
};

class Emitter {
public:
  Emitter(const TypedTraceGraph &tg, OpBuilder &b, unsigned budget)
      : tg(tg), g(tg.graph()), b(b), budget(budget) {}

  FailureOr<GraphOp> run(Location loc, StringRef name);

private:
  using Env = std::vector<Value>;

  VarId varFor(ArrayRef<Source> set);
  void buildVariables();
  void analyzeLevel(NodeId level, NodeId start);
  NodeId ancestorAt(NodeId node, NodeId level) const;
  bool readAfter(VarId v, NodeId level, NodeId join) const;
  void collectAssigned(NodeId level, SmallVectorImpl<VarId> &out);

  Value valueOf(Env &env, VarId v, Location loc);
  void assign(Env &env, NodeId node, ValueRange results);
  LogicalResult emitRegion(NodeId level, NodeId from, NodeId stop, Env &env);
  LogicalResult emitNode(NodeId id, Env &env);
  LogicalResult emitSwitch(NodeId level, NodeId div, NodeId join, Env &env);
  LogicalResult emitLoop(NodeId id, Env &env);

  const TypedTraceGraph &tg;
  const TraceGraph &g;
  OpBuilder &b;
  uint64_t budget;
  uint64_t emitted = 0;
  Location graphLoc = UnknownLoc::get(b.getContext());

  std::vector<Var> vars;
  std::map<std::vector<std::tuple<NodeId, uint32_t, uint32_t>>, VarId> varIndex;
  /// Per node, per input slot: the variable it reads.
  std::vector<SmallVector<VarId, 2>> slotVar;
  /// Per node: (result, age, variable) triples it assigns when it runs.
  std::vector<SmallVector<std::tuple<uint32_t, uint32_t, VarId>, 2>> assigns;
  /// Per node: its immediate post-dominator and topological index.
  std::vector<NodeId> ipdom;
  std::vector<uint32_t> depth, topo;
  std::vector<bool> visited;
  std::vector<SmallVector<int64_t, 2>> unrolled;
};

} // namespace

VarId Emitter::varFor(ArrayRef<Source> set) {
  std::vector<std::tuple<NodeId, uint32_t, uint32_t>> key;
  for (const Source &s : set)
    key.emplace_back(s.node, s.result, s.age);
  llvm::sort(key);
  auto [it, inserted] = varIndex.try_emplace(key, vars.size());
  if (!inserted)
    return it->second;
  Var var;
  for (auto [n, r, a] : key) {
    var.set.push_back(Source{n, r, a});
    var.type = relaxType(var.type, tg.nodeTypes(n)[r]);
    assigns[n].emplace_back(r, a, it->second);
  }
  vars.push_back(std::move(var));
  return it->second;
}

void Emitter::buildVariables() {
  slotVar.resize(g.size());
  assigns.resize(g.size());
  for (NodeId id = 0; id < g.size(); ++id) {
    for (const auto &set : g.node(id).sources) {
      VarId v = varFor(set);
      slotVar[id].push_back(v);
      vars[v].readers.push_back(id);
      // A shift register needs all younger stages, read by the same node.
      if (set.size() == 1 && set[0].age > 0)
        for (uint32_t a = 0; a < set[0].age; ++a) {
          VarId stage = varFor(Source{set[0].node, set[0].result, a});
          vars[stage].readers.push_back(id);
        }
    }
  }
}

/// Topological order and post-dominators of one level; recurses into loops.
void Emitter::analyzeLevel(NodeId level, NodeId start) {
  SmallVector<NodeId> post;
  SmallVector<std::pair<NodeId, unsigned>> stack{{start, 0}};
  std::vector<bool> &seen = visited;
  seen[start] = true;
  while (!stack.empty()) {
    auto &[n, i] = stack.back();
    if (i < g.node(n).succ.size()) {
      NodeId s = g.node(n).succ[i++];
      if (!seen[s]) {
        seen[s] = true;
        stack.push_back({s, 0});
      }
      continue;
    }
    post.push_back(n);
    stack.pop_back();
  }
  // post is a reverse topological order: `end` comes first.
  for (auto [i, n] : llvm::enumerate(llvm::reverse(post)))
    topo[n] = i;
  for (NodeId n : post) {
    const Node &node = g.node(n);
    if (node.succ.empty()) {
      ipdom[n] = kNoNode;
      depth[n] = 0;
      continue;
    }
    NodeId cur = node.succ[0];
    for (NodeId s : ArrayRef<NodeId>(node.succ).drop_front()) {
      NodeId other = s;
      while (cur != other) {
        if (depth[cur] > depth[other])
          cur = ipdom[cur];
        else if (depth[other] > depth[cur])
          other = ipdom[other];
        else {
          cur = ipdom[cur];
          other = ipdom[other];
        }
      }
    }
    ipdom[n] = cur;
    depth[n] = depth[cur] + 1;
    if (node.kind == TGKind::Loop)
      analyzeLevel(n, node.bodyStart);
  }
}

NodeId Emitter::ancestorAt(NodeId node, NodeId level) const {
  while (g.node(node).parent != level) {
    node = g.node(node).parent;
    if (node == kNoNode)
      return kNoNode;
  }
  return node;
}

/// Must variable `v`, changed inside the switch that ends at `join` in
/// `level`, survive the switch? Conservatively yes inside loop bodies (the
/// next iteration may read it) and for readers outside this level.
bool Emitter::readAfter(VarId v, NodeId level, NodeId join) const {
  if (level != kNoNode)
    return true;
  for (NodeId r : vars[v].readers) {
    NodeId at = ancestorAt(r, level);
    if (at == kNoNode || topo[at] >= topo[join])
      return true;
  }
  return false;
}

void Emitter::collectAssigned(NodeId level, SmallVectorImpl<VarId> &out) {
  for (NodeId id = 0; id < g.size(); ++id) {
    if (ancestorAt(id, level) == kNoNode)
      continue;
    for (auto [r, a, v] : assigns[id])
      out.push_back(v);
  }
  llvm::sort(out);
  out.erase(llvm::unique(out), out.end());
}

Value Emitter::valueOf(Env &env, VarId v, Location loc) {
  if (!env[v])
    return UndefOp::create(b, loc, vars[v].type);
  // A variable's type is the join of its producers' types (a dim that
  // differs between paths is dynamic); a producer with a more static type
  // is cast, so switch and loop yields match their results.
  Value value = env[v];
  if (value.getType() != vars[v].type && isa<RankedTensorType>(value.getType()))
    return tensor::CastOp::create(b, loc, vars[v].type, value);
  return value;
}

void Emitter::assign(Env &env, NodeId node, ValueRange results) {
  // Shift registers first read their younger stage, then all stages are
  // written at once.
  SmallVector<std::pair<VarId, Value>, 4> updates;
  for (auto [r, a, v] : assigns[node]) {
    if (a == 0) {
      updates.push_back({v, results[r]});
      continue;
    }
    VarId younger = varIndex.at({{node, r, a - 1}});
    updates.push_back({v, env[younger]});
  }
  for (auto [v, value] : updates)
    env[v] = value;
}

LogicalResult Emitter::emitNode(NodeId id, Env &env) {
  const Node &n = g.node(id);
  if (n.kind == TGKind::Start || n.kind == TGKind::End)
    return success();
  if (++emitted > budget)
    return emitError(graphLoc)
           << "case assignment would duplicate the TraceGraph beyond "
           << budget << " node copies; the program's control flow is too "
           << "entangled to structure (raise max-duplication)";
  Location loc = tg.nodeLoc(id);
  if (n.kind == TGKind::Loop)
    return emitLoop(id, env);
  if (n.kind == TGKind::Feed) {
    auto feed = FeedOp::create(b, loc, tg.nodeTypes(id)[0],
                               b.getI64IntegerAttr(id));
    assign(env, id, feed->getResults());
    return success();
  }
  const TypedTraceGraph::KeyInfo &info = tg.keyInfo(n.key);
  SmallVector<Value> operands;
  for (VarId v : slotVar[id])
    operands.push_back(valueOf(env, v, loc));
  auto op = DLOp::create(b, loc, tg.nodeTypes(id), info.name, info.args,
                         operands);
  for (auto [r, fetchId] : llvm::enumerate(n.fetchIds))
    if (fetchId >= 0)
      FetchOp::create(b, loc, b.getI64IntegerAttr(fetchId), op.getResult(r));
  assign(env, id, op.getResults());
  return success();
}

LogicalResult Emitter::emitRegion(NodeId level, NodeId from, NodeId stop,
                                  Env &env) {
  NodeId n = from;
  while (n != stop) {
    if (failed(emitNode(n, env)))
      return failure();
    const Node &node = g.node(n);
    if (node.succ.size() == 1) {
      n = node.succ[0];
      continue;
    }
    if (failed(emitSwitch(level, n, ipdom[n], env)))
      return failure();
    n = ipdom[n];
  }
  return success();
}

LogicalResult Emitter::emitSwitch(NodeId level, NodeId div, NodeId join,
                                  Env &env) {
  const Node &node = g.node(div);
  Location loc = div == TraceGraph::start() ? graphLoc : tg.nodeLoc(div);
  if (node.kind == TGKind::Start)
    loc = graphLoc;
  unsigned numCases = node.succ.size();
  Value selector = CaseSelectOp::create(b, loc, b.getIndexType(),
                                        b.getI64IntegerAttr(div),
                                        b.getI64IntegerAttr(numCases));

  // Emit each case into a detached block first: the switch's result types
  // are known only afterwards.
  SmallVector<std::unique_ptr<Block>> blocks;
  SmallVector<Env> outs;
  OpBuilder::InsertPoint ip = b.saveInsertionPoint();
  for (NodeId s : node.succ) {
    blocks.push_back(std::make_unique<Block>());
    b.setInsertionPointToEnd(blocks.back().get());
    Env caseEnv = env;
    if (failed(emitRegion(level, s, join, caseEnv)))
      return failure();
    outs.push_back(std::move(caseEnv));
  }
  b.restoreInsertionPoint(ip);

  SmallVector<VarId> results;
  for (VarId v = 0; v < vars.size(); ++v)
    if (llvm::any_of(outs, [&](const Env &e) { return e[v] != env[v]; }) &&
        readAfter(v, level, join))
      results.push_back(v);
  SmallVector<Type> types;
  for (VarId v : results)
    types.push_back(vars[v].type);
  SmallVector<int64_t> caseValues =
      llvm::to_vector(llvm::seq<int64_t>(0, numCases));
  auto sw = scf::IndexSwitchOp::create(b, loc, types, selector, caseValues,
                                       numCases);
  for (unsigned k = 0; k < numCases; ++k) {
    Block *blk = blocks[k].release();
    sw.getCaseRegions()[k].push_back(blk);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(blk);
    SmallVector<Value> yields;
    for (VarId v : results)
      yields.push_back(valueOf(outs[k], v, loc));
    scf::YieldOp::create(b, loc, yields);
  }
  {
    // The host only reports indices of real successors; the default case
    // is never taken.
    OpBuilder::InsertionGuard guard(b);
    b.createBlock(&sw.getDefaultRegion());
    SmallVector<Value> yields;
    for (VarId v : results)
      yields.push_back(UndefOp::create(b, loc, vars[v].type));
    scf::YieldOp::create(b, loc, yields);
  }
  for (auto [i, v] : llvm::enumerate(results))
    env[v] = sw.getResult(i);
  return success();
}

LogicalResult Emitter::emitLoop(NodeId id, Env &env) {
  const Node &loop = g.node(id);
  Location loc = tg.nodeLoc(id);
  if (loop.isUnrolled()) {
    unrolled.push_back({int64_t(id), int64_t(loop.trips[0])});
    for (uint32_t i = 0; i < loop.trips[0]; ++i)
      if (failed(emitRegion(id, loop.bodyStart, loop.bodyEnd, env)))
        return failure();
    return success();
  }
  SmallVector<VarId> carried;
  collectAssigned(id, carried);
  SmallVector<Value> inits;
  SmallVector<Type> types;
  SmallVector<Location> locs(carried.size(), loc);
  for (VarId v : carried) {
    inits.push_back(valueOf(env, v, loc));
    types.push_back(vars[v].type);
  }
  auto whileOp = scf::WhileOp::create(b, loc, types, inits);
  {
    OpBuilder::InsertionGuard guard(b);
    Block *before = b.createBlock(&whileOp.getBefore(), {}, types, locs);
    Value cond = LoopCondOp::create(b, loc, b.getI1Type(),
                                    b.getI64IntegerAttr(id));
    scf::ConditionOp::create(b, loc, cond, before->getArguments());

    Block *after = b.createBlock(&whileOp.getAfter(), {}, types, locs);
    Env bodyEnv = env;
    for (auto [v, arg] : llvm::zip(carried, after->getArguments()))
      bodyEnv[v] = arg;
    if (failed(emitRegion(id, loop.bodyStart, loop.bodyEnd, bodyEnv)))
      return failure();
    SmallVector<Value> yields;
    for (VarId v : carried)
      yields.push_back(valueOf(bodyEnv, v, loc));
    scf::YieldOp::create(b, loc, yields);
  }
  for (auto [v, res] : llvm::zip(carried, whileOp.getResults()))
    env[v] = res;
  return success();
}

FailureOr<GraphOp> Emitter::run(Location loc, StringRef name) {
  graphLoc = loc;
  uint64_t real = 0;
  for (NodeId id = 0; id < g.size(); ++id)
    real += g.node(id).kind != TGKind::Start && g.node(id).kind != TGKind::End;
  budget = budget * std::max<uint64_t>(real, 1);
  buildVariables();
  ipdom.assign(g.size(), kNoNode);
  depth.assign(g.size(), 0);
  topo.assign(g.size(), 0);
  visited.assign(g.size(), false);
  analyzeLevel(kNoNode, TraceGraph::start());

  auto graph = GraphOp::create(b, loc, b.getStringAttr(name), nullptr);
  Block *body = new Block();
  graph.getBody().push_back(body);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(body);

  Env env(vars.size());
  for (NodeId id = 0; id < g.size(); ++id) {
    const Node &n = g.node(id);
    if (n.kind != TGKind::State)
      continue;
    auto state = StateOp::create(b, tg.nodeLoc(id), tg.nodeTypes(id)[0],
                                 tg.keyInfo(n.key).name);
    assign(env, id, state->getResults());
  }
  if (failed(emitRegion(kNoNode, TraceGraph::start(), TraceGraph::end(), env))) {
    graph.erase();
    return failure();
  }
  llvm::sort(unrolled);
  unrolled.erase(llvm::unique(unrolled), unrolled.end());
  if (!unrolled.empty()) {
    SmallVector<Attribute> pairs;
    for (auto &p : unrolled)
      pairs.push_back(b.getDenseI64ArrayAttr(p));
    graph.setUnrolledLoopsAttr(b.getArrayAttr(pairs));
  }
  return graph;
}

FailureOr<GraphOp> terra::assignCases(const TypedTraceGraph &graph,
                                      OpBuilder &b, Location loc,
                                      StringRef name,
                                      const CaseAssignmentOptions &options) {
  Emitter emitter(graph, b, options.maxDuplication);
  return emitter.run(loc, name);
}

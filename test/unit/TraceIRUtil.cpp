//===- TraceIRUtil.cpp - MLIR helpers for the unit tests ------------------===//
#include "TraceIRUtil.h"

#include "terra/Dialect/TerraDialect.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Parser/Parser.h"

#include <deque>

using namespace mlir;
using namespace terra;
using namespace terra::testing;

IRHarness::IRHarness() {
  ctx.disableMultithreading();
  ctx.loadDialect<TerraDialect, scf::SCFDialect>();
}

OwningOpRef<ModuleOp> IRHarness::parse(StringRef source) {
  return parseSourceString<ModuleOp>(source, &ctx);
}

OwningOpRef<ModuleOp> IRHarness::newModule() {
  return ModuleOp::create(UnknownLoc::get(&ctx));
}

Type IRHarness::typeOfClass(uint32_t cls) {
  Builder b(&ctx);
  switch (cls) {
  case 0:
    return RankedTensorType::get({4}, b.getF32Type());
  case 1:
    return RankedTensorType::get({}, b.getF32Type());
  case 2:
    return RankedTensorType::get({4}, b.getI32Type());
  default:
    return RankedTensorType::get({2, int64_t(cls)}, b.getF32Type());
  }
}

TraceOp IRHarness::buildTrace(ModuleOp module, const Trace &trace,
                              StringRef name) {
  OpBuilder b(&ctx);
  b.setInsertionPointToEnd(module.getBody());
  auto traceOp = TraceOp::create(b, UnknownLoc::get(&ctx), name);
  b.setInsertionPointToEnd(&traceOp.getBody().front());
  auto locOf = [&](KeyId key) -> Location {
    return FileLineColLoc::get(&ctx, "p.py", key, 1);
  };
  std::vector<SmallVector<Value, 2>> results(trace.size());
  std::map<uint32_t, Value> states;
  auto valueOf = [&](const TraceValue &v) -> Value {
    if (v.kind == TraceValue::State) {
      Value &s = states[v.index];
      if (!s)
        s = StateOp::create(b, locOf(v.index), typeOfClass(v.result),
                            b.getStringAttr("s" + std::to_string(v.index)));
      return s;
    }
    return results[v.index][v.result];
  };
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceEvent &e = trace[i];
    switch (e.kind) {
    case TraceEvent::Kind::Op: {
      SmallVector<Value> operands;
      for (const TraceValue &v : e.inputs)
        operands.push_back(valueOf(v));
      SmallVector<Type> types;
      for (uint32_t c : e.resultClasses)
        types.push_back(typeOfClass(c));
      auto op = DLOp::create(b, locOf(e.key), types,
                             b.getStringAttr("p.k" + std::to_string(e.key)),
                             DictionaryAttr(), operands);
      results[i].assign(op->result_begin(), op->result_end());
      break;
    }
    case TraceEvent::Kind::Feed: {
      auto op = FeedOp::create(b, locOf(e.key),
                               typeOfClass(e.resultClasses[0]), IntegerAttr());
      results[i].push_back(op.getResult());
      break;
    }
    case TraceEvent::Kind::Fetch:
      FetchOp::create(b, UnknownLoc::get(&ctx), IntegerAttr(),
                      valueOf(e.inputs[0]));
      break;
    case TraceEvent::Kind::LoopBegin:
      LoopBeginOp::create(b, locOf(e.key));
      break;
    case TraceEvent::Kind::LoopIter:
      LoopIterOp::create(b, UnknownLoc::get(&ctx));
      break;
    case TraceEvent::Kind::LoopEnd:
      LoopEndOp::create(b, UnknownLoc::get(&ctx));
      break;
    }
  }
  return traceOp;
}

FailureOr<GraphOp> IRHarness::assign(const TypedTraceGraph &tg,
                                     ModuleOp module,
                                     unsigned maxDuplication) {
  OpBuilder b(&ctx);
  b.setInsertionPointToEnd(module.getBody());
  CaseAssignmentOptions options;
  options.maxDuplication = maxDuplication;
  return assignCases(tg, b, UnknownLoc::get(&ctx), "g", options);
}

GraphCounts terra::testing::countGraph(GraphOp graph) {
  GraphCounts c;
  graph->walk([&](Operation *op) {
    if (auto sw = dyn_cast<scf::IndexSwitchOp>(op)) {
      ++c.switches;
      c.switchCases += sw.getNumCases();
    } else if (isa<scf::WhileOp>(op)) {
      ++c.whiles;
    } else if (isa<DLOp>(op)) {
      ++c.dlOps;
    } else if (isa<FeedOp>(op)) {
      ++c.feeds;
    } else if (isa<FetchOp>(op)) {
      ++c.fetches;
    } else if (isa<StateOp>(op)) {
      ++c.states;
    } else if (auto cs = dyn_cast<CaseSelectOp>(op)) {
      c.caseSelectIds.push_back(int64_t(cs.getId()));
    } else if (auto lc = dyn_cast<LoopCondOp>(op)) {
      c.loopCondIds.push_back(int64_t(lc.getId()));
    }
  });
  for (auto *v : {&c.caseSelectIds, &c.loopCondIds}) {
    llvm::sort(*v);
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  return c;
}

SimNames SimNames::fig3() {
  // kInp = 1, kRval, kOp0, kOp1, kOp2a, kOp2b, kOp3, kLoop, kOp4 and their
  // lines in the parsed worked example.
  static const std::map<KeyId, int64_t> lines{
      {1, 2}, {2, 5}, {3, 3}, {4, 5}, {5, 6}, {6, 9}, {7, 10}, {8, 12}, {9, 13}};
  return {[](KeyId k) { return lines.at(k); }};
}

namespace {

struct Sym {
  enum Kind { Undef, Event, State, Index, Bool } kind = Undef;
  int64_t a = 0, b = 0;
  bool operator==(const Sym &o) const {
    return kind == o.kind && a == o.a && b == o.b;
  }
};

std::string str(const Sym &s) {
  static const char *names[] = {"undef", "event", "state", "index", "bool"};
  return std::string(names[s.kind]) + "(" + std::to_string(s.a) + "," +
         std::to_string(s.b) + ")";
}

class Simulator {
public:
  Simulator(const Trace &trace, const Replay &replay, const SimNames &names)
      : trace(trace), replay(replay), names(names) {
    for (size_t i = 0; i < trace.size(); ++i)
      if (trace[i].kind == TraceEvent::Kind::Op ||
          trace[i].kind == TraceEvent::Kind::Feed)
        order.push_back(i);
    for (const Signal &s : replay.signals)
      (s.kind == Signal::Case ? cases : loops)[s.point].push_back(s.value);
  }

  std::string run(GraphOp graph) {
    SmallVector<Sym> term;
    if (!runBlock(graph.getBody().front(), term))
      return err;
    if (next != order.size())
      return "the graph stopped after " + std::to_string(next) + " of " +
             std::to_string(order.size()) + " ops/feeds";
    for (auto *q : {&cases, &loops})
      for (auto &[point, values] : *q)
        if (!values.empty())
          return "unconsumed signals at point " + std::to_string(point);
    for (size_t i = 0; i < trace.size(); ++i) {
      const TraceEvent &e = trace[i];
      if (e.kind != TraceEvent::Kind::Fetch ||
          e.inputs[0].kind != TraceValue::Event ||
          trace[e.inputs[0].index].kind != TraceEvent::Kind::Op)
        continue;
      Sym want{Sym::Event, e.inputs[0].index, e.inputs[0].result};
      if (!llvm::is_contained(published, want))
        return "event " + std::to_string(i) + ": fetched value " + str(want) +
               " is never published by the graph";
    }
    return "";
  }

private:
  bool fail(Operation *op, const std::string &msg) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << msg << " at ";
    op->print(os, OpPrintingFlags().skipRegions());
    err = s;
    return false;
  }

  Sym expected(const TraceValue &v) {
    if (v.kind == TraceValue::State)
      return Sym{Sym::State, v.index, 0};
    return Sym{Sym::Event, v.index, v.result};
  }

  bool runRegion(Region &r, ValueRange args, SmallVectorImpl<Sym> &argSyms,
                 SmallVectorImpl<Sym> &term) {
    Block &block = r.front();
    for (auto [arg, s] : llvm::zip(block.getArguments(), argSyms))
      env[arg] = s;
    return runBlock(block, term);
  }

  bool runBlock(Block &block, SmallVectorImpl<Sym> &term) {
    for (Operation &op : block) {
      if (++steps > 1000000)
        return fail(&op, "step limit");
      if (isa<scf::YieldOp, scf::ConditionOp>(op)) {
        term.clear();
        for (Value v : op.getOperands())
          term.push_back(env.lookup(v));
        return true;
      }
      if (!runOp(op))
        return false;
    }
    term.clear();
    return true;
  }

  bool runOp(Operation &op) {
    if (auto dl = dyn_cast<DLOp>(op)) {
      if (next >= order.size())
        return fail(&op, "the graph runs more ops than the trace");
      size_t idx = order[next++];
      const TraceEvent &e = trace[idx];
      auto loc = dyn_cast<FileLineColLoc>(op.getLoc());
      if (e.kind != TraceEvent::Kind::Op || !loc ||
          int64_t(loc.getLine()) != names.lineOf(e.key))
        return fail(&op, "event " + std::to_string(idx) +
                             " is not this op");
      if (dl.getInputs().size() != e.inputs.size())
        return fail(&op, "operand count differs from event " +
                             std::to_string(idx));
      for (auto [k, v] : llvm::enumerate(dl.getInputs())) {
        Sym got = env.lookup(v), want = expected(e.inputs[k]);
        if (!(got == want))
          return fail(&op, "event " + std::to_string(idx) + " operand " +
                               std::to_string(k) + ": graph routes " +
                               str(got) + ", trace read " + str(want));
      }
      for (unsigned r = 0; r < op.getNumResults(); ++r)
        env[op.getResult(r)] = Sym{Sym::Event, int64_t(idx), r};
      return true;
    }
    if (auto feed = dyn_cast<FeedOp>(op)) {
      if (next >= order.size())
        return fail(&op, "the graph runs more feeds than the trace");
      size_t idx = order[next++];
      if (trace[idx].kind != TraceEvent::Kind::Feed || !feed.getId() ||
          int64_t(*feed.getId()) != int64_t(replay.nodes[idx]))
        return fail(&op, "event " + std::to_string(idx) +
                             " is not this feed");
      env[feed.getResult()] = Sym{Sym::Event, int64_t(idx), 0};
      return true;
    }
    if (auto state = dyn_cast<StateOp>(op)) {
      StringRef name = state.getName();
      int64_t key = -1;
      if (!name.consume_front("s") || name.getAsInteger(10, key))
        return fail(&op, "unexpected state name");
      env[state.getResult()] = Sym{Sym::State, key, 0};
      return true;
    }
    if (auto fetch = dyn_cast<FetchOp>(op)) {
      published.push_back(env.lookup(fetch.getValue()));
      return true;
    }
    if (isa<UndefOp>(op)) {
      env[op.getResult(0)] = Sym{Sym::Undef};
      return true;
    }
    if (auto cs = dyn_cast<CaseSelectOp>(op)) {
      auto &q = cases[int64_t(cs.getId())];
      if (q.empty())
        return fail(&op, "no case signal left for this divergence");
      uint32_t v = q.front();
      q.pop_front();
      if (v >= cs.getCases())
        return fail(&op, "case index out of range");
      env[cs.getResult()] = Sym{Sym::Index, v, 0};
      return true;
    }
    if (auto lc = dyn_cast<LoopCondOp>(op)) {
      auto &q = loops[int64_t(lc.getId())];
      if (q.empty())
        return fail(&op, "no loop signal left for this loop");
      uint32_t v = q.front();
      q.pop_front();
      env[lc.getResult()] = Sym{Sym::Bool, v, 0};
      return true;
    }
    if (auto sw = dyn_cast<scf::IndexSwitchOp>(op)) {
      Sym sel = env.lookup(sw.getArg());
      if (sel.kind != Sym::Index)
        return fail(&op, "switch on a non-index value");
      Region *region = &sw.getDefaultRegion();
      for (auto [k, v] : llvm::enumerate(sw.getCases()))
        if (v == sel.a)
          region = &sw.getCaseRegions()[k];
      if (region == &sw.getDefaultRegion())
        return fail(&op, "the default case was taken");
      SmallVector<Sym> none, term;
      if (!runRegion(*region, {}, none, term))
        return false;
      for (auto [res, s] : llvm::zip(sw.getResults(), term))
        env[res] = s;
      return true;
    }
    if (auto w = dyn_cast<scf::WhileOp>(op)) {
      SmallVector<Sym> args, term;
      for (Value v : w.getInits())
        args.push_back(env.lookup(v));
      for (unsigned iter = 0;; ++iter) {
        if (iter > 100000)
          return fail(&op, "while does not terminate");
        if (!runRegion(w.getBefore(), {}, args, term))
          return false;
        if (term.empty() || term[0].kind != Sym::Bool)
          return fail(&op, "while condition is not a loop_cond");
        bool go = term[0].a != 0;
        SmallVector<Sym> passed(term.begin() + 1, term.end());
        if (!go) {
          for (auto [res, s] : llvm::zip(w.getResults(), passed))
            env[res] = s;
          return true;
        }
        if (!runRegion(w.getAfter(), {}, passed, term))
          return false;
        args = term;
      }
    }
    return fail(&op, "unexpected op in a terra.graph");
  }

  const Trace &trace;
  const Replay &replay;
  const SimNames &names;
  std::vector<size_t> order;
  size_t next = 0;
  uint64_t steps = 0;
  std::map<int64_t, std::deque<uint32_t>> cases, loops;
  llvm::DenseMap<Value, Sym> env;
  std::vector<Sym> published;
  std::string err;
};

} // namespace

std::string terra::testing::simulateGraph(GraphOp graph, const Trace &trace,
                                          const Replay &replay,
                                          const SimNames &names) {
  if (!replay.accepted)
    return "the trace is not accepted";
  Simulator sim(trace, replay, names);
  return sim.run(graph);
}

//===- TraceGraphTest.cpp - Hand-written TraceGraph/Cursor tests ----------===//
//
// Each test builds traces event by event (TraceEvent/TraceValue), merges
// them and checks the exact graph, the validator's verdicts and the
// control-flow signals (spec sections 2, 4.3, 4.4 and 9).
//
//===----------------------------------------------------------------------===//
#include "TraceIRUtil.h"
#include "TraceTestUtil.h"

#include "mlir/IR/Verifier.h"

#include "gtest/gtest.h"

using namespace terra;
using namespace terra::testing;

namespace {

std::vector<Source> srcs(std::initializer_list<Source> l) { return l; }
std::vector<Source> slot(const TraceGraph &g, NodeId n, size_t i) {
  const auto &s = g.node(n).sources.at(i);
  return std::vector<Source>(s.begin(), s.end());
}
std::vector<NodeId> succ(const TraceGraph &g, NodeId n) {
  return std::vector<NodeId>(g.node(n).succ.begin(), g.node(n).succ.end());
}
std::vector<uint32_t> trips(const TraceGraph &g, NodeId n) {
  return std::vector<uint32_t>(g.node(n).trips.begin(), g.node(n).trips.end());
}
Source S(NodeId n, uint32_t r = 0, uint32_t age = 0) { return {n, r, age}; }

/// Merges and checks that nothing went wrong.
MergeOutcome mergeOk(TraceGraph &g, const Trace &t) {
  MergeOutcome out = g.merge(t);
  EXPECT_EQ(out.error, "");
  EXPECT_TRUE(out.coverable);
  EXPECT_TRUE(g.accepts(t));
  return out;
}

/// Nodes of a given kind and key.
std::vector<NodeId> nodesWithKey(const TraceGraph &g, KeyId key) {
  std::vector<NodeId> out;
  for (NodeId id = 0; id < g.size(); ++id) {
    TGKind k = g.node(id).kind;
    if (k != TGKind::Start && k != TGKind::End && k != TGKind::State &&
        g.node(id).key == key)
      out.push_back(id);
  }
  return out;
}

std::vector<Signal> sig(std::initializer_list<Signal> l) { return l; }
constexpr Signal::Kind Case = Signal::Case;
constexpr Signal::Kind Loop = Signal::Loop;

/// Replays with the Cursor and checks signals against both `want` and the
/// independent model in replay().
void expectSignals(const TraceGraph &g, const Trace &t,
                   const std::vector<Signal> &want) {
  Replay r = replay(g, t);
  ASSERT_TRUE(r.accepted) << "rejected at event " << r.failedAt;
  EXPECT_TRUE(r.problems.empty()) << r.problems.front();
  EXPECT_EQ(str(r.signals), str(want));
  EXPECT_EQ(str(r.signals), str(r.expected));
}

//===----------------------------------------------------------------------===//
// The paper's worked example (spec section 2.8, Terra Fig. 3)
//===----------------------------------------------------------------------===//

enum : KeyId {
  kInp = 1, kRval, kOp0, kOp1, kOp2a, kOp2b, kOp3, kLoop, kOp4
};

/// cond = true, N = 2: Op0, Op1, Op2, Op3, [Loop: Op4, Op4].
Trace fig3Trace1() {
  TraceBuilder b;
  uint32_t inp = b.feed(kInp);
  uint32_t x0 = b.op(kOp0, {ev(inp)});
  uint32_t r = b.feed(kRval, 1);
  uint32_t x1 = b.op(kOp1, {ev(x0), ev(r)});
  uint32_t z = b.op(kOp2a, {ev(inp)}, {0, 0});
  uint32_t x2 = b.op(kOp3, {ev(x1), ev(z, 1)});
  b.fetch(ev(x2));
  b.loopBegin(kLoop);
  b.loopIter();
  uint32_t a = b.op(kOp4, {ev(x2)});
  b.loopIter();
  b.op(kOp4, {ev(a)});
  b.loopEnd();
  return b.take();
}

/// cond = false, N = 1: Op0, Op2', Op3, [Loop: Op4].
Trace fig3Trace2() {
  TraceBuilder b;
  uint32_t inp = b.feed(kInp);
  uint32_t x0 = b.op(kOp0, {ev(inp)});
  uint32_t z = b.op(kOp2b, {ev(inp)}, {0, 0});
  uint32_t x2 = b.op(kOp3, {ev(x0), ev(z, 0)});
  b.fetch(ev(x2));
  b.loopBegin(kLoop);
  b.loopIter();
  b.op(kOp4, {ev(x2)});
  b.loopEnd();
  return b.take();
}

TEST(TraceGraph, WorkedExampleFirstTraceIsAChain) {
  TraceGraph g;
  MergeOutcome out = mergeOk(g, fig3Trace1());
  EXPECT_TRUE(out.changed);
  // start, end, inp, op0, rval, op1, op2, op3, loop{start, end, op4}.
  ASSERT_EQ(g.size(), 12u);
  EXPECT_EQ(succ(g, TraceGraph::start()), (std::vector<NodeId>{2}));
  for (NodeId n = 2; n < 7; ++n)
    EXPECT_EQ(succ(g, n), (std::vector<NodeId>{n + 1})) << n;
  EXPECT_EQ(g.node(8).kind, TGKind::Loop);
  // The second op4 merged into the first: same loop.
  EXPECT_EQ(nodesWithKey(g, kOp4), (std::vector<NodeId>{11}));
  EXPECT_TRUE(g.node(8).isUnrolled());
  EXPECT_EQ(trips(g, 8), (std::vector<uint32_t>{2}));
  EXPECT_EQ(out.nodeOfEvent[11], 11u);
  EXPECT_EQ(out.nodeOfEvent[9], 11u);
  EXPECT_EQ(out.nodeOfEvent[7], 8u);
  EXPECT_EQ(out.nodeOfEvent[6], kNoNode); // the fetch
}

TEST(TraceGraph, WorkedExample) {
  TraceGraph g;
  Trace t1 = fig3Trace1(), t2 = fig3Trace2();
  EXPECT_TRUE(mergeOk(g, t1).changed);
  EXPECT_TRUE(mergeOk(g, t2).changed);

  // start -> inp -> op0 -> {rval -> op1 -> op2 | op2'} -> op3 -> Loop{op4}
  //   -> end, with the ids the lit test test/lit/Merge/worked-example.mlir
  // checks for the IR form.
  enum : NodeId { Inp = 2, Op0, Rval, Op1, Op2, Op3, L, BS, BE, Op4, Op2b };
  ASSERT_EQ(g.size(), 13u);
  EXPECT_EQ(g.numTraces(), 2u);
  EXPECT_EQ(succ(g, TraceGraph::start()), (std::vector<NodeId>{Inp}));
  EXPECT_EQ(succ(g, TraceGraph::end()), (std::vector<NodeId>{}));
  EXPECT_EQ(g.node(Inp).kind, TGKind::Feed);
  EXPECT_EQ(g.node(Rval).kind, TGKind::Feed);
  EXPECT_EQ(succ(g, Inp), (std::vector<NodeId>{Op0}));
  EXPECT_EQ(succ(g, Op0), (std::vector<NodeId>{Rval, Op2b}));
  EXPECT_EQ(succ(g, Rval), (std::vector<NodeId>{Op1}));
  EXPECT_EQ(succ(g, Op1), (std::vector<NodeId>{Op2}));
  EXPECT_EQ(succ(g, Op2), (std::vector<NodeId>{Op3}));
  EXPECT_EQ(succ(g, Op2b), (std::vector<NodeId>{Op3}));
  EXPECT_EQ(succ(g, Op3), (std::vector<NodeId>{L}));
  EXPECT_EQ(succ(g, L), (std::vector<NodeId>{TraceGraph::end()}));
  // The two op2 sites stay apart; op3 is shared (merge-back).
  EXPECT_EQ(g.node(Op2).key, kOp2a);
  EXPECT_EQ(g.node(Op2b).key, kOp2b);
  EXPECT_EQ(nodesWithKey(g, kOp3), (std::vector<NodeId>{Op3}));

  // Path-aware provenance (spec section 2.2): op3 reads op1 / op2#1 on the
  // first path and op0 / op2'#0 on the second.
  EXPECT_EQ(slot(g, Op3, 0), srcs({S(Op1), S(Op0)}));
  EXPECT_EQ(slot(g, Op3, 1), srcs({S(Op2, 1), S(Op2b, 0)}));
  EXPECT_EQ(slot(g, Op1, 0), srcs({S(Op0)}));
  EXPECT_EQ(slot(g, Op1, 1), srcs({S(Rval)}));
  EXPECT_EQ(slot(g, Op2, 0), srcs({S(Inp)}));
  EXPECT_EQ(slot(g, Op2b, 0), srcs({S(Inp)}));
  // Feed points and the fetch point.
  EXPECT_EQ(g.node(Op3).fetchIds[0], 0);
  for (NodeId n : {Op0, Op1, Op2, Op2b, Op4})
    for (int32_t f : g.node(n).fetchIds)
      EXPECT_EQ(f, -1) << n;

  // The loop: one op4 node reading op3 first, then itself; trips 2 and 1,
  // so it is not unrolled.
  EXPECT_EQ(g.node(L).kind, TGKind::Loop);
  EXPECT_EQ(g.node(L).bodyStart, NodeId(BS));
  EXPECT_EQ(g.node(L).bodyEnd, NodeId(BE));
  EXPECT_EQ(succ(g, BS), (std::vector<NodeId>{Op4}));
  EXPECT_EQ(succ(g, Op4), (std::vector<NodeId>{BE}));
  EXPECT_EQ(g.node(Op4).parent, NodeId(L));
  EXPECT_EQ(slot(g, Op4, 0), srcs({S(Op3), S(Op4)}));
  EXPECT_EQ(trips(g, L), (std::vector<uint32_t>{2, 1}));
  EXPECT_FALSE(g.node(L).isUnrolled());

  // Both traces are now covered: merging them again changes nothing.
  TraceGraph before = g;
  MergeOutcome again1 = g.merge(t1), again2 = g.merge(t2);
  EXPECT_FALSE(again1.changed);
  EXPECT_FALSE(again2.changed);
  EXPECT_TRUE(again1.error.empty() && again2.error.empty());
  g.setNumTraces(before.numTraces());
  EXPECT_EQ(diffGraphs(before, g), "");

  // Cursor signals: a Case signal at op0 (index of the successor taken) and
  // Loop signals 1 per iteration, then 0.
  expectSignals(g, t1, sig({{Case, Op0, 0}, {Loop, L, 1}, {Loop, L, 1},
                            {Loop, L, 0}}));
  expectSignals(g, t2, sig({{Case, Op0, 1}, {Loop, L, 1}, {Loop, L, 0}}));

  // A path no trace took, but the graph routes correctly: true branch with
  // three loop iterations.
  {
    TraceBuilder b;
    uint32_t inp = b.feed(kInp);
    uint32_t x0 = b.op(kOp0, {ev(inp)});
    uint32_t r = b.feed(kRval, 1);
    uint32_t x1 = b.op(kOp1, {ev(x0), ev(r)});
    uint32_t z = b.op(kOp2a, {ev(inp)}, {0, 0});
    uint32_t x = b.op(kOp3, {ev(x1), ev(z, 1)});
    b.loopBegin(kLoop);
    for (int i = 0; i < 3; ++i) {
      b.loopIter();
      x = b.op(kOp4, {ev(x)});
    }
    b.loopEnd();
    expectSignals(g, b.get(),
                  sig({{Case, Op0, 0}, {Loop, L, 1}, {Loop, L, 1},
                       {Loop, L, 1}, {Loop, L, 0}}));
  }
  // The false path mixed with the true path's op3 input: op3 must read
  // op2'#0 here, not op2'#1.
  {
    Trace t = fig3Trace2();
    t[3].inputs[1].result = 1;
    EXPECT_FALSE(g.accepts(t));
  }
  // op3 fed op1's input on the false path: op1 never ran, rejected.
  {
    Trace t = fig3Trace2();
    t[3].inputs[0] = ev(0); // inp instead of op0
    EXPECT_FALSE(g.accepts(t));
  }
  // Reading the fetched value is allowed; reading an unfetched one is not.
  {
    Trace t = fig3Trace2();
    TraceEvent f;
    f.kind = TraceEvent::Kind::Fetch;
    f.inputs.push_back(ev(1)); // op0's output: not a fetch point
    t.insert(t.begin() + 5, f);
    EXPECT_FALSE(g.accepts(t));
  }
}

TEST(TraceGraph, WorkedExampleIsIndependentOfTraceOrder) {
  TraceGraph g;
  mergeOk(g, fig3Trace2());
  mergeOk(g, fig3Trace1());
  EXPECT_TRUE(g.accepts(fig3Trace1()));
  EXPECT_TRUE(g.accepts(fig3Trace2()));
  EXPECT_EQ(nodesWithKey(g, kOp3).size(), 1u);
  EXPECT_EQ(nodesWithKey(g, kOp4).size(), 1u);
  NodeId op3 = nodesWithKey(g, kOp3)[0];
  EXPECT_EQ(g.node(op3).sources[0].size(), 2u);
  EXPECT_EQ(g.node(op3).sources[1].size(), 2u);
  NodeId loop = nodesWithKey(g, kLoop)[0];
  EXPECT_EQ(trips(g, loop), (std::vector<uint32_t>{1, 2}));
}

//===----------------------------------------------------------------------===//
// Divergence and merge-back
//===----------------------------------------------------------------------===//

enum : KeyId { kA = 1, kB, kC, kD, kE, kF, kL1, kL2, kX, kY, kZ, kW };

/// A; if: B else C; D(A). `arm` 0 = B, 1 = C, 2 = neither.
Trace branchy(int arm, bool withE = false) {
  TraceBuilder b;
  uint32_t a = b.op(kA, {});
  if (arm == 0)
    b.op(kB, {ev(a)});
  if (arm == 1)
    b.op(kC, {ev(a)});
  uint32_t d = b.op(kD, {ev(a)});
  if (withE)
    b.op(kE, {ev(d)});
  return b.take();
}

TEST(TraceGraph, MergeBackAfterDivergence) {
  TraceGraph g;
  mergeOk(g, branchy(0));
  size_t chain = g.size();
  EXPECT_EQ(chain, 5u);
  EXPECT_TRUE(mergeOk(g, branchy(1)).changed);
  // Only C is new; D is shared.
  EXPECT_EQ(g.size(), chain + 1);
  NodeId A = 2, B = 3, D = 4, C = 5;
  EXPECT_EQ(g.node(C).key, kC);
  EXPECT_EQ(succ(g, A), (std::vector<NodeId>{B, C}));
  EXPECT_EQ(succ(g, C), (std::vector<NodeId>{D}));
  EXPECT_EQ(slot(g, D, 0), srcs({S(A)}));
  // An empty arm: a direct edge A -> D, no new node.
  EXPECT_TRUE(mergeOk(g, branchy(2)).changed);
  EXPECT_EQ(g.size(), chain + 1);
  EXPECT_EQ(succ(g, A), (std::vector<NodeId>{B, C, D}));
  EXPECT_FALSE(g.merge(branchy(2)).changed);
  expectSignals(g, branchy(0), sig({{Case, A, 0}}));
  expectSignals(g, branchy(1), sig({{Case, A, 1}}));
  expectSignals(g, branchy(2), sig({{Case, A, 2}}));
  // A longer tail is not covered yet; a prefix of a path is not a path.
  EXPECT_FALSE(g.accepts(branchy(0, true)));
  TraceBuilder prefix;
  prefix.op(kA, {});
  EXPECT_FALSE(g.accepts(prefix.get()));
  // The tail is learnt once, on arm 0: arm 1 with the tail is then an
  // unseen combination of seen paths, already covered.
  EXPECT_TRUE(mergeOk(g, branchy(0, true)).changed);
  size_t n = g.size();
  EXPECT_EQ(n, chain + 2);
  EXPECT_TRUE(g.accepts(branchy(1, true)));
  EXPECT_FALSE(mergeOk(g, branchy(1, true)).changed);
  EXPECT_EQ(g.size(), n);
  // D now diverges to E or end.
  expectSignals(g, branchy(1, true), sig({{Case, A, 1}, {Case, D, 1}}));
  expectSignals(g, branchy(1), sig({{Case, A, 1}, {Case, D, 0}}));
}

TEST(TraceGraph, SwappedOrderDuplicatesInsteadOfCycling) {
  // A B, then B A: B merges back into the existing B, but A is then an
  // ancestor of B; merging back into it would make a cycle, so the level
  // gets a second A node (spec section 2.4, notes).
  TraceGraph g;
  TraceBuilder t1, t2;
  t1.op(kA, {});
  t1.op(kB, {});
  t2.op(kB, {});
  t2.op(kA, {});
  mergeOk(g, t1.get());
  mergeOk(g, t2.get());
  ASSERT_EQ(nodesWithKey(g, kA).size(), 2u);
  ASSERT_EQ(nodesWithKey(g, kB).size(), 1u);
  NodeId A = 2, B = 3, A2 = 4;
  EXPECT_EQ(succ(g, TraceGraph::start()), (std::vector<NodeId>{A, B}));
  EXPECT_EQ(succ(g, B), (std::vector<NodeId>{TraceGraph::end(), A2}));
  EXPECT_EQ(succ(g, A2), (std::vector<NodeId>{TraceGraph::end()}));
  EXPECT_TRUE(g.accepts(t1.get()));
  TraceBuilder justB;
  justB.op(kB, {});
  EXPECT_TRUE(g.accepts(justB.get())); // B alone: both edges exist
  TraceBuilder t3;
  t3.op(kA, {});
  t3.op(kA, {});
  EXPECT_FALSE(g.accepts(t3.get()));
}

//===----------------------------------------------------------------------===//
// Loops
//===----------------------------------------------------------------------===//

/// A; for N: X(prev); B(last)
Trace loopTrace(unsigned n, bool markers = true) {
  TraceBuilder b;
  uint32_t x = b.op(kA, {});
  if (markers || n > 0) {
    b.loopBegin(kL1);
    for (unsigned i = 0; i < n; ++i) {
      b.loopIter();
      x = b.op(kX, {ev(x)});
    }
    b.loopEnd();
  }
  b.op(kB, {ev(x)});
  return b.take();
}

TEST(TraceGraph, ConstantTripLoopIsUnrolled) {
  TraceGraph g;
  mergeOk(g, loopTrace(3));
  EXPECT_FALSE(g.merge(loopTrace(3)).changed);
  NodeId L = nodesWithKey(g, kL1).at(0);
  EXPECT_TRUE(g.node(L).isUnrolled());
  EXPECT_EQ(trips(g, L), (std::vector<uint32_t>{3}));
  // X reads A in the first iteration and itself afterwards; B reads X.
  NodeId A = nodesWithKey(g, kA)[0], X = nodesWithKey(g, kX)[0],
         B = nodesWithKey(g, kB)[0];
  EXPECT_EQ(slot(g, X, 0), srcs({S(A), S(X)}));
  EXPECT_EQ(slot(g, B, 0), srcs({S(X)}));
  // No signals for an unrolled loop.
  expectSignals(g, loopTrace(3), sig({}));
  // A different trip count is a deviation: too few iterations fail at
  // loop_end, too many at the extra loop_iter.
  for (unsigned n : {0u, 1u, 2u, 4u, 5u}) {
    EXPECT_FALSE(g.accepts(loopTrace(n))) << n;
    Replay r = replay(g, loopTrace(n));
    EXPECT_FALSE(r.accepted);
    Trace t = loopTrace(n);
    size_t want = 0;
    if (n < 3) {
      while (t[want].kind != TraceEvent::Kind::LoopEnd)
        ++want;
    } else {
      unsigned iters = 0;
      while (t[want].kind != TraceEvent::Kind::LoopIter || ++iters <= 3)
        ++want;
    }
    EXPECT_EQ(r.failedAt, want) << n;
  }
  // After a second trip count, the loop becomes a while and takes any.
  EXPECT_TRUE(mergeOk(g, loopTrace(2)).changed);
  EXPECT_FALSE(g.node(L).isUnrolled());
  EXPECT_EQ(trips(g, L), (std::vector<uint32_t>{3, 2}));
  for (unsigned n : {1u, 2u, 3u, 4u, 7u})
    EXPECT_TRUE(g.accepts(loopTrace(n))) << n;
  expectSignals(g, loopTrace(2),
                sig({{Loop, L, 1}, {Loop, L, 1}, {Loop, L, 0}}));
  // Zero trips: B would read A, a source B never had.
  EXPECT_FALSE(g.accepts(loopTrace(0)));
}

TEST(TraceGraph, ZeroTripLoopWithMarkers) {
  TraceGraph g;
  mergeOk(g, loopTrace(0));
  NodeId L = nodesWithKey(g, kL1).at(0);
  EXPECT_TRUE(g.node(L).isUnrolled());
  EXPECT_EQ(trips(g, L), (std::vector<uint32_t>{0}));
  EXPECT_TRUE(succ(g, g.node(L).bodyStart).empty());
  EXPECT_FALSE(g.accepts(loopTrace(1)));
  expectSignals(g, loopTrace(0), sig({}));
  mergeOk(g, loopTrace(2));
  EXPECT_EQ(trips(g, L), (std::vector<uint32_t>{0, 2}));
  NodeId A = nodesWithKey(g, kA)[0], X = nodesWithKey(g, kX)[0],
         B = nodesWithKey(g, kB)[0];
  // After the loop B reads A (zero trips) or X: a path-dependent set.
  EXPECT_EQ(slot(g, B, 0), srcs({S(A), S(X)}));
  for (unsigned n : {0u, 1u, 2u, 3u})
    EXPECT_TRUE(g.accepts(loopTrace(n))) << n;
  expectSignals(g, loopTrace(0), sig({{Loop, L, 0}}));
  expectSignals(g, loopTrace(1), sig({{Loop, L, 1}, {Loop, L, 0}}));
}

TEST(TraceGraph, ZeroTripLoopWithoutMarkersBypassesTheLoopNode) {
  TraceGraph g;
  mergeOk(g, loopTrace(2, /*markers=*/false));
  mergeOk(g, loopTrace(0, /*markers=*/false));
  NodeId A = nodesWithKey(g, kA)[0], L = nodesWithKey(g, kL1)[0],
         B = nodesWithKey(g, kB)[0];
  EXPECT_EQ(succ(g, A), (std::vector<NodeId>{L, B}));
  EXPECT_EQ(nodesWithKey(g, kB).size(), 1u);
  expectSignals(g, loopTrace(0, false), sig({{Case, A, 1}}));
  // The loop node is still unrolled (only trip count 2 was seen inside it).
  EXPECT_TRUE(g.node(L).isUnrolled());
  expectSignals(g, loopTrace(2, false), sig({{Case, A, 0}}));
  EXPECT_FALSE(g.accepts(loopTrace(1, false)));
}

/// for i in 0..outer: for j in inner[i]: X; (Y if pick else Z); W
/// arms[i][j]: 0 -> Y, 1 -> Z.
Trace nestedTrace(const std::vector<std::vector<int>> &arms) {
  TraceBuilder b;
  uint32_t acc = b.feed(kA);
  b.loopBegin(kL1);
  for (const auto &inner : arms) {
    b.loopIter();
    b.loopBegin(kL2);
    for (int arm : inner) {
      b.loopIter();
      uint32_t x = b.op(kX, {ev(acc)});
      uint32_t y = b.op(arm == 0 ? kY : kZ, {ev(x)});
      acc = b.op(kW, {ev(y)});
    }
    b.loopEnd();
  }
  b.loopEnd();
  b.fetch(ev(acc));
  return b.take();
}

TEST(TraceGraph, NestedLoopsWithABranchInTheInnerBody) {
  TraceGraph g;
  Trace t1 = nestedTrace({{0, 1}, {1, 1}});
  Trace t2 = nestedTrace({{1}});
  mergeOk(g, t1);
  mergeOk(g, t2);
  NodeId L1 = nodesWithKey(g, kL1).at(0), L2 = nodesWithKey(g, kL2).at(0);
  ASSERT_EQ(nodesWithKey(g, kL1).size(), 1u);
  ASSERT_EQ(nodesWithKey(g, kL2).size(), 1u);
  ASSERT_EQ(nodesWithKey(g, kX).size(), 1u);
  ASSERT_EQ(nodesWithKey(g, kW).size(), 1u);
  NodeId X = nodesWithKey(g, kX)[0], Y = nodesWithKey(g, kY)[0],
         Z = nodesWithKey(g, kZ)[0], W = nodesWithKey(g, kW)[0],
         A = nodesWithKey(g, kA)[0];
  EXPECT_EQ(g.node(L2).parent, L1);
  EXPECT_EQ(g.node(X).parent, L2);
  EXPECT_EQ(succ(g, g.node(L1).bodyStart), (std::vector<NodeId>{L2}));
  EXPECT_EQ(succ(g, X), (std::vector<NodeId>{Y, Z}));
  EXPECT_EQ(succ(g, Y), (std::vector<NodeId>{W}));
  EXPECT_EQ(succ(g, Z), (std::vector<NodeId>{W}));
  EXPECT_EQ(slot(g, W, 0), srcs({S(Y), S(Z)}));
  EXPECT_EQ(slot(g, X, 0), srcs({S(A), S(W)}));
  EXPECT_EQ(trips(g, L1), (std::vector<uint32_t>{2, 1}));
  EXPECT_EQ(trips(g, L2), (std::vector<uint32_t>{2, 1}));
  EXPECT_GE(g.node(W).fetchIds[0], 0);

  expectSignals(g, t2,
                sig({{Loop, L1, 1}, {Loop, L2, 1}, {Case, X, 1},
                     {Loop, L2, 0}, {Loop, L1, 0}}));
  expectSignals(g, t1,
                sig({{Loop, L1, 1}, {Loop, L2, 1}, {Case, X, 0},
                     {Loop, L2, 1}, {Case, X, 1}, {Loop, L2, 0},
                     {Loop, L1, 1}, {Loop, L2, 1}, {Case, X, 1},
                     {Loop, L2, 1}, {Case, X, 1}, {Loop, L2, 0},
                     {Loop, L1, 0}}));
  // Unseen combinations of seen paths are accepted.
  for (auto arms : std::vector<std::vector<std::vector<int>>>{
           {{0}}, {{0, 0, 0}}, {{1}, {0}, {1, 0}}, {{0}, {}}}) {
    // (The last one has a zero-trip inner loop: L2 is a while, so any trip
    // count is fine, and the fetch reads W, the latest writer.)
    Trace t = nestedTrace(arms);
    Replay r = replay(g, t);
    EXPECT_TRUE(r.accepted);
    EXPECT_TRUE(r.problems.empty());
    EXPECT_EQ(str(r.signals), str(r.expected));
  }
}

//===----------------------------------------------------------------------===//
// Provenance (spec section 2.2 and test T6)
//===----------------------------------------------------------------------===//

/// p = feed; a = A(p); b = B(p); y = a if flag else b; C(y)
/// which: 0 -> y = a, 1 -> y = b, 2 -> y = p (some other value).
Trace trap(int which) {
  TraceBuilder b;
  uint32_t p = b.feed(kF);
  uint32_t a = b.op(kA, {ev(p)});
  uint32_t bb = b.op(kB, {ev(p)});
  TraceValue y = which == 0 ? ev(a) : which == 1 ? ev(bb) : ev(p);
  b.op(kC, {y});
  return b.take();
}

TEST(TraceGraph, ProvenanceTrapDoesNotShareTheOpNode) {
  for (bool aFirst : {false, true}) {
    SCOPED_TRACE(aFirst ? "op(a) first" : "op(b) first");
    TraceGraph g;
    Trace ta = trap(0), tb = trap(1);
    mergeOk(g, aFirst ? ta : tb);
    EXPECT_TRUE(mergeOk(g, aFirst ? tb : ta).changed);
    // Two C nodes, each with a single source: a shared node would route
    // the later writer (b) also on the path that read a.
    std::vector<NodeId> cs = nodesWithKey(g, kC);
    ASSERT_EQ(cs.size(), 2u);
    for (NodeId c : cs)
      EXPECT_EQ(g.node(c).sources[0].size(), 1u);
    NodeId A = nodesWithKey(g, kA)[0], B = nodesWithKey(g, kB)[0];
    std::vector<std::vector<Source>> got{slot(g, cs[0], 0), slot(g, cs[1], 0)};
    std::sort(got.begin(), got.end(), [](auto &x, auto &y) {
      return x[0].node < y[0].node;
    });
    EXPECT_EQ(got[0], srcs({S(A)}));
    EXPECT_EQ(got[1], srcs({S(B)}));
    EXPECT_TRUE(g.accepts(ta));
    EXPECT_TRUE(g.accepts(tb));
    // The two C nodes hang off B: a divergence by provenance alone, and
    // the Case signal tells the graph which C runs.
    EXPECT_EQ(succ(g, B), cs);
    Replay ra = replay(g, ta), rb = replay(g, tb);
    ASSERT_EQ(ra.signals.size(), 1u);
    ASSERT_EQ(rb.signals.size(), 1u);
    EXPECT_EQ(ra.signals[0].point, B);
    EXPECT_EQ(rb.signals[0].point, B);
    EXPECT_NE(ra.signals[0].value, rb.signals[0].value);
    EXPECT_EQ(g.node(cs[ra.signals[0].value]).sources[0][0].node, A);
    EXPECT_EQ(str(ra.signals), str(ra.expected));
    EXPECT_EQ(str(rb.signals), str(rb.expected));
    // Any other value at that slot is a deviation, detected at C.
    Replay rp = replay(g, trap(2));
    EXPECT_FALSE(rp.accepted);
    EXPECT_EQ(rp.failedAt, 3u);
    EXPECT_FALSE(g.accepts(trap(2)));
    TraceBuilder other;
    uint32_t p = other.feed(kF);
    other.op(kA, {ev(p)});
    other.op(kB, {ev(p)});
    other.op(kC, {st(7)});
    EXPECT_FALSE(g.accepts(other.get()));
    EXPECT_FALSE(g.merge(ta).changed);
    EXPECT_FALSE(g.merge(tb).changed);
  }
}

TEST(TraceGraph, StrictRemerge) {
  // test/lit/Merge/strict-remerge.mlir: trace 1 runs op1 and then
  // op3(op0); extending op3's slot with op1 would make the graph route op1
  // on trace 1's path too, so trace 2 gets its own op3.
  TraceBuilder b1, b2;
  uint32_t x0 = b1.op(kA, {});
  b1.op(kB, {ev(x0)});
  b1.op(kC, {ev(x0)});
  x0 = b2.op(kA, {});
  uint32_t x1 = b2.op(kB, {ev(x0)});
  b2.op(kC, {ev(x1)});
  TraceGraph g;
  mergeOk(g, b1.get());
  EXPECT_TRUE(mergeOk(g, b2.get()).changed);
  EXPECT_TRUE(g.accepts(b1.get()));
  EXPECT_TRUE(g.accepts(b2.get()));
  NodeId A = 2, B = 3;
  std::vector<NodeId> cs = nodesWithKey(g, kC);
  ASSERT_EQ(cs.size(), 2u);
  EXPECT_EQ(succ(g, B), cs);
  EXPECT_EQ(slot(g, cs[0], 0), srcs({S(A)}));
  EXPECT_EQ(slot(g, cs[1], 0), srcs({S(B)}));
  expectSignals(g, b1.get(), sig({{Case, B, 0}}));
  expectSignals(g, b2.get(), sig({{Case, B, 1}}));
}

TEST(TraceGraph, ExtensionKeepsEarlierTraces) {
  // The opposite order of the strict case is a legal extension: trace 1
  // reads op1, trace 2 skips op1 and reads op0.
  TraceBuilder b1, b2;
  uint32_t x0 = b1.op(kA, {});
  uint32_t x1 = b1.op(kB, {ev(x0)});
  b1.op(kC, {ev(x1)});
  x0 = b2.op(kA, {});
  b2.op(kC, {ev(x0)});
  TraceGraph g;
  mergeOk(g, b1.get());
  mergeOk(g, b2.get());
  std::vector<NodeId> cs = nodesWithKey(g, kC);
  ASSERT_EQ(cs.size(), 1u);
  EXPECT_EQ(slot(g, cs[0], 0), srcs({S(3), S(2)}));
  EXPECT_TRUE(g.accepts(b1.get()));
  // On B's path, C must read B: reading A there is rejected.
  TraceBuilder b3;
  x0 = b3.op(kA, {});
  b3.op(kB, {ev(x0)});
  b3.op(kC, {ev(x0)});
  EXPECT_FALSE(g.accepts(b3.get()));
}

TEST(TraceGraph, CoveredTraceDoesNotChangeTheGraph) {
  // Spec section 2.4: a trace is covered exactly when merge returns false.
  // After t1..t3, P has two C successors: C1 reading X and C2 reading the
  // state S. t4 (P, C(S), X not run) is accepted through C2; merging it
  // must not extend C1 with S instead (C1 comes first and its extension
  // would be legal, but it is not needed).
  TraceBuilder t1, t2, t3, t4;
  uint32_t x = t1.op(kX, {});
  t1.op(kA, {});
  t1.op(kC, {ev(x)});
  t2.op(kX, {});
  t2.op(kA, {});
  t2.op(kC, {st(50)});
  t3.op(kA, {});
  t4.op(kA, {});
  t4.op(kC, {st(50)});
  TraceGraph g;
  mergeOk(g, t1.get());
  mergeOk(g, t2.get());
  mergeOk(g, t3.get());
  NodeId A = nodesWithKey(g, kA).at(0);
  std::vector<NodeId> cs = nodesWithKey(g, kC);
  ASSERT_EQ(cs.size(), 2u);
  EXPECT_EQ(succ(g, A), (std::vector<NodeId>{cs[0], cs[1], TraceGraph::end()}));
  ASSERT_TRUE(g.accepts(t4.get()));
  TraceGraph before = g;
  MergeOutcome out = g.merge(t4.get());
  EXPECT_FALSE(out.changed);
  g.setNumTraces(before.numTraces());
  EXPECT_EQ(diffGraphs(before, g), "");
  EXPECT_EQ(out.nodeOfEvent[1], cs[1]);
  expectSignals(g, t4.get(), sig({{Case, 0, 1}, {Case, A, 1}}));
}

/// f = feed; [p = P(f)]; for: [R(f)]; then C(x) or D(f).
Trace lostPath(bool runP, unsigned rTrips, int tail /*0 C(p) 1 C(r) 2 D*/) {
  TraceBuilder b;
  uint32_t f = b.feed(kF);
  uint32_t p = runP ? b.op(kA, {ev(f)}) : 0;
  uint32_t r = 0;
  b.loopBegin(kL1);
  for (unsigned i = 0; i < rTrips; ++i) {
    b.loopIter();
    r = b.op(kB, {ev(f)});
  }
  b.loopEnd();
  if (tail == 2)
    b.op(kD, {ev(f)});
  else
    b.op(kC, {ev(tail == 0 ? p : r)});
  return b.take();
}

// Known limitation, disabled: a lenient extension is checked against the
// merged traces only, so a path that only a combination of merged paths
// takes can stop being accepted. Here t7 (P, then R in the loop, then
// C(P)) is accepted after t1 and t2; merging t3 extends C's slot {P} with
// R (legal for t1 and t2), after which R shadows P on t7's path. Strict
// merging of t3 (a second C node) would have kept t7.
TEST(TraceGraph, DISABLED_AcceptedPathsStayAcceptedAfterLaterMerges) {
  Trace t1 = lostPath(true, 0, 0), t2 = lostPath(false, 1, 2),
        t3 = lostPath(false, 1, 1), t7 = lostPath(true, 1, 0);
  TraceGraph g;
  mergeOk(g, t1);
  mergeOk(g, t2);
  ASSERT_TRUE(g.accepts(t7));
  mergeOk(g, t3);
  EXPECT_TRUE(g.accepts(t7));
}

//===----------------------------------------------------------------------===//
// Stale values across loop iterations (aged sources)
//===----------------------------------------------------------------------===//

/// p = feed; x0 = x1 = p
/// for n: t = x1; x1 = x0; x0 = X(t)      -- X reads its own output from
///                                           two iterations back
/// B(x0)
Trace ageTrace(unsigned n) {
  TraceBuilder b;
  uint32_t p = b.feed(kA);
  TraceValue x0 = ev(p), x1 = ev(p);
  b.loopBegin(kL1);
  for (unsigned i = 0; i < n; ++i) {
    b.loopIter();
    TraceValue t = x1;
    x1 = x0;
    x0 = ev(b.op(kX, {t}));
  }
  b.loopEnd();
  b.op(kB, {x0});
  return b.take();
}

TEST(TraceGraph, StaleValuesAcrossIterations) {
  TraceGraph g;
  Trace t = ageTrace(5);
  MergeOutcome out = g.merge(t);
  ASSERT_EQ(out.error, "");
  ASSERT_TRUE(out.coverable);
  EXPECT_TRUE(g.accepts(t));
  // Some X node reads "X's output one execution before the latest" (age 1)
  // as a singleton set.
  bool aged = false;
  for (NodeId x : nodesWithKey(g, kX))
    for (const auto &set : g.node(x).sources)
      for (const Source &s : set)
        if (s.age > 0) {
          aged = true;
          EXPECT_EQ(set.size(), 1u);
          EXPECT_EQ(g.node(s.node).key, kX);
        }
  EXPECT_TRUE(aged);
  // Iteration 3 reading X's newest output instead of the stale one is
  // legitimately routed (another X node reads exactly that), but the
  // program then diverges: iteration 5 reads that iteration-3 value, now
  // one execution old, which no X node routes.
  Trace fresh = t;
  {
    // Event layout: 0 feed, 1 begin, then (iter, X) pairs.
    size_t thirdX = 1 + 3 * 2;
    ASSERT_EQ(fresh[thirdX].kind, TraceEvent::Kind::Op);
    fresh[thirdX].inputs[0] = ev(thirdX - 2); // X of iteration 2
    Replay r = replay(g, fresh);
    EXPECT_FALSE(r.accepted);
    EXPECT_EQ(r.failedAt, 1u + 5 * 2);
  }
  EXPECT_FALSE(g.merge(t).changed);
  Replay r = replay(g, t);
  EXPECT_TRUE(r.accepted);
  EXPECT_EQ(str(r.signals), str(r.expected));
}

TEST(TraceGraph, StaleValueMixedWithExtensionIsStillCovered) {
  // A shorter variant: iteration 2 reads p again, iteration 3 reads X's
  // first output (age 1), iteration 4 reads X's second output. A lenient
  // merge would extend X's slot {p} with X itself, which breaks iteration
  // 2 of this very trace; the merge must fall back to strict merging
  // rather than give up on the trace.
  TraceGraph g;
  Trace t = ageTrace(4);
  MergeOutcome out = g.merge(t);
  EXPECT_EQ(out.error, "");
  EXPECT_TRUE(out.coverable);
  EXPECT_TRUE(out.changed);
  EXPECT_TRUE(g.accepts(t));
  EXPECT_EQ(g.numTraces(), 1u);
}

/// for 4 iterations: C reads state, then its own output, then D's output
/// from the previous iteration, then its own output again; D runs after C.
Trace shadowTrace() {
  TraceBuilder b;
  b.loopBegin(kL1);
  b.loopIter();
  uint32_t c1 = b.op(kC, {st(60)});
  b.op(kD, {});
  b.loopIter();
  b.op(kC, {ev(c1)});
  uint32_t d2 = b.op(kD, {});
  b.loopIter();
  uint32_t c3 = b.op(kC, {ev(d2)});
  b.op(kD, {});
  b.loopIter();
  b.op(kC, {ev(c3)});
  b.op(kD, {});
  b.loopEnd();
  return b.take();
}

TEST(TraceGraph, NodeOfEventIsTheValidatedPath) {
  // Lenient merging extends C's slot with D in iteration 3; in iteration
  // 2, D then shadows C's own output, and the validator routes iteration 2
  // through the second C node that iteration 4 created. MergeOutcome's
  // nodeOfEvent (used to relax node types) must name the nodes the
  // validator, and hence the runtime, actually uses.
  TraceGraph g;
  Trace t = shadowTrace();
  MergeOutcome out = mergeOk(g, t);
  ASSERT_EQ(nodesWithKey(g, kC).size(), 2u);
  Replay r = replay(g, t);
  ASSERT_TRUE(r.accepted);
  EXPECT_EQ(r.nodes[5], nodesWithKey(g, kC)[1]);
  for (size_t i = 0; i < t.size(); ++i)
    EXPECT_EQ(out.nodeOfEvent[i], r.nodes[i]) << "event " << i;
}

TEST(TraceGraph, NodeOfEventRelaxesTheValidatedNodesTypes) {
  // The same trace as IR, where C's output has 5 elements in iteration 2
  // and 3 otherwise: the node that runs in iteration 2 must get a dynamic
  // dimension (spec section 2.2: shapes relax, they do not split nodes).
  IRHarness h;
  mlir::OwningOpRef<mlir::ModuleOp> module = h.parse(R"mlir(
#L = loc("shadow.py":1:1)
#C = loc("shadow.py":2:1)
#D = loc("shadow.py":3:1)
terra.trace @t {
  %s = terra.state "s" : tensor<3xf32>
  terra.loop_begin loc(#L)
  terra.loop_iter
  %c1 = terra.op "p.C"(%s) : (tensor<3xf32>) -> tensor<3xf32> loc(#C)
  %d1 = terra.op "p.D"() : () -> tensor<3xf32> loc(#D)
  terra.loop_iter
  %c2 = terra.op "p.C"(%c1) : (tensor<3xf32>) -> tensor<5xf32> loc(#C)
  %d2 = terra.op "p.D"() : () -> tensor<3xf32> loc(#D)
  terra.loop_iter
  %c3 = terra.op "p.C"(%d2) : (tensor<3xf32>) -> tensor<3xf32> loc(#C)
  %d3 = terra.op "p.D"() : () -> tensor<3xf32> loc(#D)
  terra.loop_iter
  %c4 = terra.op "p.C"(%c3) : (tensor<3xf32>) -> tensor<3xf32> loc(#C)
  %d4 = terra.op "p.D"() : () -> tensor<3xf32> loc(#D)
  terra.loop_end
}
)mlir");
  ASSERT_TRUE(module);
  TypedTraceGraph tg(&h.ctx);
  TraceOp trace = *module->getOps<TraceOp>().begin();
  mlir::FailureOr<MergeOutcome> out = tg.addTrace(trace);
  ASSERT_TRUE(mlir::succeeded(out) && out->coverable);
  const TraceGraph &g = tg.graph();
  std::vector<NodeId> cs;
  for (NodeId id = 0; id < g.size(); ++id)
    if (g.node(id).kind == TGKind::Op && tg.keyInfo(g.node(id).key).name &&
        tg.keyInfo(g.node(id).key).name.getValue() == "p.C")
      cs.push_back(id);
  ASSERT_EQ(cs.size(), 2u);
  // Plain-trace twin: which C node runs in iteration 2?
  TraceGraph plain;
  mergeOk(plain, shadowTrace());
  Replay r = replay(plain, shadowTrace());
  ASSERT_TRUE(r.accepted);
  NodeId second = r.nodes[5];
  ASSERT_TRUE(second == cs[0] || second == cs[1]);
  auto type = mlir::cast<mlir::RankedTensorType>(tg.nodeTypes(second)[0]);
  EXPECT_TRUE(type.isDynamicDim(0)) << "node " << second;
}

//===----------------------------------------------------------------------===//
// Feeds, state and fetches
//===----------------------------------------------------------------------===//

TEST(TraceGraph, StateAndFetchAnnotations) {
  TraceGraph g;
  TraceBuilder b;
  uint32_t x = b.op(kA, {st(100, 0), st(101, 1)});
  b.fetch(st(100, 0));
  uint32_t y = b.op(kB, {ev(x), st(100, 0)}, {0, 1});
  b.fetch(ev(y, 1));
  MergeOutcome out = mergeOk(g, b.get());
  NodeId s100 = g.stateNode(100), s101 = g.stateNode(101);
  ASSERT_NE(s100, kNoNode);
  ASSERT_NE(s101, kNoNode);
  EXPECT_EQ(g.stateNode(102), kNoNode);
  EXPECT_EQ(g.node(s100).kind, TGKind::State);
  NodeId A = out.nodeOfEvent[x], B = out.nodeOfEvent[y];
  EXPECT_EQ(slot(g, A, 0), srcs({S(s100)}));
  EXPECT_EQ(slot(g, A, 1), srcs({S(s101)}));
  EXPECT_EQ(g.node(B).fetchIds[0], -1);
  EXPECT_EQ(g.node(B).fetchIds[1], 0);
  EXPECT_EQ(g.node(A).fetchIds[0], -1);
  // Fetching a new point changes the graph; an old one does not.
  TraceBuilder c = b;
  c.fetch(ev(x));
  EXPECT_FALSE(g.accepts(c.get()));
  EXPECT_TRUE(mergeOk(g, c.get()).changed);
  EXPECT_EQ(g.node(A).fetchIds[0], 1);
  EXPECT_FALSE(g.merge(c.get()).changed);
  // An unknown state is rejected.
  TraceBuilder d;
  d.op(kA, {st(100, 0), st(102, 1)});
  EXPECT_FALSE(g.accepts(d.get()));
}

//===----------------------------------------------------------------------===//
// Malformed and uncoverable traces
//===----------------------------------------------------------------------===//

void expectMalformed(const Trace &bad, const char *what) {
  SCOPED_TRACE(what);
  TraceGraph g;
  mergeOk(g, fig3Trace1());
  TraceGraph before = g;
  MergeOutcome out = g.merge(bad);
  EXPECT_NE(out.error, "");
  EXPECT_FALSE(out.changed);
  EXPECT_EQ(diffGraphs(before, g), "");
  EXPECT_EQ(g.numTraces(), 1u);
  // (The bad traces follow the false path, which the graph does not have,
  // so merging them creates nodes before the error is found: they must be
  // rolled back.)
  EXPECT_FALSE(g.accepts(bad));
  // The graph still works.
  EXPECT_TRUE(g.accepts(fig3Trace1()));
  EXPECT_FALSE(g.merge(fig3Trace1()).changed);
}

TEST(TraceGraph, MalformedTracesLeaveTheGraphUnchanged) {
  {
    // Merged far enough to create new nodes before the error.
    Trace t = fig3Trace2();
    t[3].inputs[0] = ev(5); // op3 reads a later event
    expectMalformed(t, "forward reference");
  }
  {
    Trace t = fig3Trace2();
    t[3].inputs[0] = ev(3); // op3 reads itself
    expectMalformed(t, "self reference");
  }
  {
    Trace t = fig3Trace2();
    t[3].inputs[1] = ev(2, 2); // op2' has only two results
    expectMalformed(t, "result out of range");
  }
  {
    Trace t = fig3Trace2();
    t.pop_back(); // no loop_end
    expectMalformed(t, "loop left open");
  }
  {
    Trace t = fig3Trace2();
    TraceEvent e;
    e.kind = TraceEvent::Kind::LoopEnd;
    t.push_back(e); // one loop_end too many
    expectMalformed(t, "unbalanced loop_end");
  }
  {
    Trace t = fig3Trace2();
    TraceEvent e;
    e.kind = TraceEvent::Kind::LoopIter;
    t.insert(t.begin() + 3, e); // loop_iter outside any loop
    expectMalformed(t, "loop_iter outside of a loop");
  }
  {
    Trace t = fig3Trace2();
    std::swap(t[6], t[7]); // op4 before the first loop_iter
    expectMalformed(t, "body event before loop_iter");
  }
  {
    Trace t = fig3Trace2();
    t[4].inputs.clear(); // fetch of nothing
    expectMalformed(t, "fetch of nothing");
  }
  {
    Trace t = fig3Trace2();
    t[4].inputs.push_back(ev(1)); // fetch of two values
    expectMalformed(t, "fetch of two values");
  }
  {
    Trace t = fig3Trace2();
    TraceEvent f;
    f.kind = TraceEvent::Kind::Fetch;
    f.inputs.push_back(ev(5)); // the loop_begin event
    t.push_back(f);
    expectMalformed(t, "fetch of a marker");
  }
  {
    Trace t = fig3Trace2();
    t[0].inputs.push_back(st(3)); // a feed with an input
    expectMalformed(t, "feed with inputs");
  }
  {
    Trace t = fig3Trace2();
    t[0].resultClasses.push_back(0); // a feed with two results
    expectMalformed(t, "feed with two results");
  }
}

TEST(TraceGraph, CursorRejectsEventsBeforeTheFirstLoopIter) {
  // After loop_begin the cursor has no position in the body until the
  // first loop_iter; an op, feed or nested loop_begin there must be
  // rejected (it used to read the node array at index kNoNode).
  TraceGraph g;
  mergeOk(g, fig3Trace1());
  for (int what = 0; what < 3; ++what) {
    SCOPED_TRACE(what);
    Cursor c(g);
    NodeId node;
    uint32_t inst;
    ASSERT_TRUE(c.feed(kInp, node, inst));
    Handle inp{node, 0, inst};
    ASSERT_TRUE(c.op(kOp0, {inp}, node, inst));
    Handle x0{node, 0, inst};
    ASSERT_TRUE(c.feed(kRval, node, inst));
    Handle r{node, 0, inst};
    ASSERT_TRUE(c.op(kOp1, {x0, r}, node, inst));
    Handle x1{node, 0, inst};
    ASSERT_TRUE(c.op(kOp2a, {inp}, node, inst));
    Handle z{node, 1, inst};
    ASSERT_TRUE(c.op(kOp3, {x1, z}, node, inst));
    Handle x2{node, 0, inst};
    ASSERT_TRUE(c.loopBegin(kLoop));
    if (what == 0)
      EXPECT_FALSE(c.op(kOp4, {x2}, node, inst));
    if (what == 1)
      EXPECT_FALSE(c.feed(kInp, node, inst));
    if (what == 2)
      EXPECT_FALSE(c.loopBegin(kLoop));
  }
  // The same through accepts(): fig3Trace1 without its first loop_iter.
  Trace t = fig3Trace1();
  ASSERT_EQ(t[8].kind, TraceEvent::Kind::LoopIter);
  t.erase(t.begin() + 8);
  for (TraceEvent &e : t)
    for (TraceValue &v : e.inputs)
      if (v.kind == TraceValue::Event && v.index > 8)
        --v.index;
  EXPECT_FALSE(g.accepts(t));
}

TEST(TraceGraph, UncoverableTraceLeavesTheGraphUnchanged) {
  // A key whose result classes differ from the node of the same key (the
  // TypedTraceGraph never does this: classes are part of its keys). The
  // merge grows a second node, but the validator cannot tell the two apart
  // and routes the value from the first, so no graph covers the trace.
  TraceGraph g;
  TraceBuilder b1, b2;
  uint32_t a = b1.op(kA, {}, {0});
  b1.op(kB, {ev(a)});
  a = b2.op(kA, {}, {1, 1});
  b2.op(kB, {ev(a, 1)});
  mergeOk(g, b1.get());
  TraceGraph before = g;
  MergeOutcome out = g.merge(b2.get());
  EXPECT_EQ(out.error, "");
  EXPECT_FALSE(out.coverable);
  EXPECT_FALSE(out.changed);
  EXPECT_EQ(diffGraphs(before, g), "");
  EXPECT_FALSE(g.accepts(b2.get()));
}

//===----------------------------------------------------------------------===//
// Case assignment smoke test (MLIR)
//===----------------------------------------------------------------------===//

TEST(CaseAssignment, WorkedExampleSmoke) {
  IRHarness h;
  mlir::OwningOpRef<mlir::ModuleOp> module = h.parse(R"mlir(
#inp  = loc("fig3.py":2:4)
#rval = loc("fig3.py":5:20)
#op0  = loc("fig3.py":3:12)
#op1  = loc("fig3.py":5:30)
#op2a = loc("fig3.py":6:40)
#op2b = loc("fig3.py":9:50)
#op3  = loc("fig3.py":10:60)
#prt  = loc("fig3.py":11:70)
#loop = loc("fig3.py":12:80)
#op4  = loc("fig3.py":13:90)
module {
  terra.trace @iter0 {
    %inp = terra.feed : tensor<4xf32> loc(#inp)
    %x0 = terra.op "toy.op0"(%inp) : (tensor<4xf32>) -> tensor<4xf32> loc(#op0)
    %r = terra.feed : tensor<f32> loc(#rval)
    %x1 = terra.op "toy.op1"(%x0, %r) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32> loc(#op1)
    %z:2 = terra.op "toy.op2"(%inp) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) loc(#op2a)
    %x2 = terra.op "toy.op3"(%x1, %z#1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc(#op3)
    terra.fetch %x2 : tensor<4xf32> loc(#prt)
    terra.loop_begin loc(#loop)
    terra.loop_iter
    %a = terra.op "toy.op4"(%x2) : (tensor<4xf32>) -> tensor<4xf32> loc(#op4)
    terra.loop_iter
    %b = terra.op "toy.op4"(%a) : (tensor<4xf32>) -> tensor<4xf32> loc(#op4)
    terra.loop_end
  }
  terra.trace @iter1 {
    %inp = terra.feed : tensor<4xf32> loc(#inp)
    %x0 = terra.op "toy.op0"(%inp) : (tensor<4xf32>) -> tensor<4xf32> loc(#op0)
    %z:2 = terra.op "toy.op2"(%inp) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) loc(#op2b)
    %x2 = terra.op "toy.op3"(%x0, %z#0) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc(#op3)
    terra.fetch %x2 : tensor<4xf32> loc(#prt)
    terra.loop_begin loc(#loop)
    terra.loop_iter
    %a = terra.op "toy.op4"(%x2) : (tensor<4xf32>) -> tensor<4xf32> loc(#op4)
    terra.loop_end
  }
}
)mlir");
  ASSERT_TRUE(module);
  TypedTraceGraph tg(&h.ctx);
  for (TraceOp t : module->getOps<TraceOp>()) {
    mlir::FailureOr<MergeOutcome> out = tg.addTrace(t);
    ASSERT_TRUE(mlir::succeeded(out));
    EXPECT_TRUE(out->coverable);
  }
  // Same structure as the MLIR-free example.
  TraceGraph plain;
  mergeOk(plain, fig3Trace1());
  mergeOk(plain, fig3Trace2());
  ASSERT_EQ(tg.graph().size(), plain.size());
  for (NodeId n = 0; n < plain.size(); ++n) {
    EXPECT_EQ(succ(tg.graph(), n), succ(plain, n)) << n;
    EXPECT_EQ(tg.graph().node(n).trips, plain.node(n).trips) << n;
    EXPECT_EQ(tg.graph().node(n).fetchIds, plain.node(n).fetchIds) << n;
  }

  mlir::FailureOr<GraphOp> graph = h.assign(tg, *module);
  ASSERT_TRUE(mlir::succeeded(graph));
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*module)));
  GraphCounts c = countGraph(*graph);
  EXPECT_EQ(c.switches, 1u);
  EXPECT_EQ(c.switchCases, 2u);
  EXPECT_EQ(c.whiles, 1u);
  EXPECT_EQ(c.dlOps, 6u); // op0 op1 op2 op2' op3 op4
  EXPECT_EQ(c.feeds, 2u);
  EXPECT_EQ(c.fetches, 1u);
  EXPECT_EQ(c.caseSelectIds, (std::vector<int64_t>{3}));
  EXPECT_EQ(c.loopCondIds, (std::vector<int64_t>{8}));

  // Run the generated graph symbolically on both traces with the cursor's
  // signals: the graph must issue the traces' ops in order, each reading
  // exactly the values the trace read.
  Trace t1 = fig3Trace1(), t2 = fig3Trace2();
  for (const Trace *t : {&t1, &t2}) {
    Replay r = replay(plain, *t);
    ASSERT_TRUE(r.accepted);
    std::string err = simulateGraph(*graph, *t, r, SimNames::fig3());
    EXPECT_EQ(err, "");
  }
  // The simulator itself catches a wrong signal or a wrong trace.
  {
    Replay r = replay(plain, t2);
    ASSERT_EQ(r.signals[0].kind, Signal::Case);
    r.signals[0].value = 0; // take the true case on the false path
    EXPECT_NE(simulateGraph(*graph, t2, r, SimNames::fig3()), "");
    r = replay(plain, t2);
    r.signals.pop_back(); // no loop exit
    EXPECT_NE(simulateGraph(*graph, t2, r, SimNames::fig3()), "");
    r = replay(plain, t1);
    Trace rewired = t1;
    rewired[5].inputs[1].result = 0; // op3 reads op2#0 instead of op2#1
    EXPECT_NE(simulateGraph(*graph, rewired, r, SimNames::fig3()), "");
  }
}

TEST(CaseAssignment, UnrolledLoopAndEmptyCase) {
  IRHarness h;
  TraceGraph plain;
  std::vector<Trace> traces{branchy(0), branchy(2), loopTrace(3)};
  // Different programs would normally not share keys; the graph below only
  // has the A/B/C/D traces and a separate loop program.
  TypedTraceGraph tg(&h.ctx);
  mlir::OwningOpRef<mlir::ModuleOp> module = h.newModule();
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(plain.merge(traces[i]).error, "");
    TraceOp op = h.buildTrace(*module, traces[i], "t" + std::to_string(i));
    ASSERT_TRUE(mlir::succeeded(tg.addTrace(op)));
  }
  mlir::FailureOr<GraphOp> graph = h.assign(tg, *module);
  ASSERT_TRUE(mlir::succeeded(graph));
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*module)));
  GraphCounts c = countGraph(*graph);
  EXPECT_EQ(c.switches, 1u);
  EXPECT_EQ(c.switchCases, 2u); // B, and the empty pass-through case
  EXPECT_EQ(c.whiles, 0u);
  for (int i = 0; i < 2; ++i) {
    Replay r = replay(plain, traces[i]);
    ASSERT_TRUE(r.accepted);
    EXPECT_EQ(simulateGraph(*graph, traces[i], r, SimNames::generic()), "");
  }

  // An unrolled loop: three copies of X, no while, recorded trip count.
  TraceGraph plainLoop;
  TypedTraceGraph tgLoop(&h.ctx);
  mlir::OwningOpRef<mlir::ModuleOp> m2 = h.newModule();
  ASSERT_EQ(plainLoop.merge(traces[2]).error, "");
  ASSERT_TRUE(mlir::succeeded(
      tgLoop.addTrace(h.buildTrace(*m2, traces[2], "loop")))); 
  mlir::FailureOr<GraphOp> g2 = h.assign(tgLoop, *m2);
  ASSERT_TRUE(mlir::succeeded(g2));
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*m2)));
  GraphCounts c2 = countGraph(*g2);
  EXPECT_EQ(c2.whiles, 0u);
  EXPECT_EQ(c2.switches, 0u);
  EXPECT_EQ(c2.dlOps, 5u); // A, X x3, B
  ASSERT_TRUE(g2->getUnrolledLoops().has_value());
  Replay r = replay(plainLoop, traces[2]);
  EXPECT_EQ(simulateGraph(*g2, traces[2], r, SimNames::generic()), "");
}

/// Merges `traces` into a plain and a typed graph, runs case assignment
/// and simulates every trace on the generated graph.
void assignAndSimulate(const std::vector<Trace> &traces,
                       GraphCounts *counts = nullptr) {
  IRHarness h;
  TraceGraph plain;
  TypedTraceGraph tg(&h.ctx);
  mlir::OwningOpRef<mlir::ModuleOp> module = h.newModule();
  for (size_t i = 0; i < traces.size(); ++i) {
    mergeOk(plain, traces[i]);
    TraceOp op = h.buildTrace(*module, traces[i], "t" + std::to_string(i));
    mlir::FailureOr<MergeOutcome> out = tg.addTrace(op);
    ASSERT_TRUE(mlir::succeeded(out) && out->coverable);
  }
  ASSERT_EQ(tg.graph().size(), plain.size());
  mlir::FailureOr<GraphOp> graph = h.assign(tg, *module);
  ASSERT_TRUE(mlir::succeeded(graph));
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*module)));
  for (size_t i = 0; i < traces.size(); ++i) {
    Replay r = replay(plain, traces[i]);
    ASSERT_TRUE(r.accepted);
    EXPECT_EQ(simulateGraph(*graph, traces[i], r, SimNames::generic()), "")
        << "trace " << i;
  }
  if (counts)
    *counts = countGraph(*graph);
}

TEST(CaseAssignment, ProvenanceTrapRoutesTheRightValue) {
  // Spec test T6: the generated graph must feed C with a on one path and
  // b on the other, never silently the wrong one.
  GraphCounts c;
  assignAndSimulate({trap(0), trap(1)}, &c);
  EXPECT_EQ(c.switches, 1u);
  EXPECT_EQ(c.dlOps, 4u); // A, B, and C in each case
}

TEST(CaseAssignment, StaleValuesBecomeShiftRegisters) {
  GraphCounts c;
  assignAndSimulate({ageTrace(5), ageTrace(2)}, &c);
  EXPECT_EQ(c.whiles, 1u);
  assignAndSimulate({shadowTrace()});
  assignAndSimulate({nestedTrace({{0, 1}, {1, 1}}), nestedTrace({{1}}),
                     nestedTrace({{0}, {}, {1, 0, 0}})});
  assignAndSimulate({fig3Trace1(), fig3Trace2()});
}

} // namespace

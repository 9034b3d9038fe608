//===- TraceTestUtil.h - Helpers for the TraceGraph unit tests ---*- C++ -*-===//
//
// MLIR-free helpers shared by TraceGraphTest.cpp and
// TraceGraphPropertyTest.cpp:
//  * TraceBuilder: builds a flat Trace event by event;
//  * replay(): walks a trace with the public Cursor API and records, per
//    event, the node it matched and the signals the cursor produced, next to
//    the signals an independent model of the spec (section 4.3) expects;
//  * sameGraph(): field-by-field comparison of two TraceGraphs.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_TEST_UNIT_TRACETESTUTIL_H
#define TERRA_TEST_UNIT_TRACETESTUTIL_H

#include "terra/Merge/TraceGraph.h"

#include <sstream>
#include <string>
#include <vector>

namespace terra::testing {

inline TraceValue ev(uint32_t index, uint32_t result = 0) {
  return TraceValue{TraceValue::Event, index, result};
}
inline TraceValue st(uint32_t stateKey, uint32_t cls = 0) {
  return TraceValue{TraceValue::State, stateKey, cls};
}

/// Appends events to a trace; value-producing calls return the event index.
class TraceBuilder {
public:
  uint32_t feed(KeyId key, uint32_t cls = 0) {
    TraceEvent e;
    e.kind = TraceEvent::Kind::Feed;
    e.key = key;
    e.resultClasses.push_back(cls);
    return push(std::move(e));
  }
  uint32_t op(KeyId key, std::vector<TraceValue> inputs,
              std::vector<uint32_t> resultClasses = {0}) {
    TraceEvent e;
    e.kind = TraceEvent::Kind::Op;
    e.key = key;
    e.inputs.assign(inputs.begin(), inputs.end());
    e.resultClasses.assign(resultClasses.begin(), resultClasses.end());
    return push(std::move(e));
  }
  void fetch(TraceValue v) {
    TraceEvent e;
    e.kind = TraceEvent::Kind::Fetch;
    e.inputs.push_back(v);
    push(std::move(e));
  }
  void loopBegin(KeyId key) {
    TraceEvent e;
    e.kind = TraceEvent::Kind::LoopBegin;
    e.key = key;
    push(std::move(e));
  }
  void loopIter() {
    TraceEvent e;
    e.kind = TraceEvent::Kind::LoopIter;
    push(std::move(e));
  }
  void loopEnd() {
    TraceEvent e;
    e.kind = TraceEvent::Kind::LoopEnd;
    push(std::move(e));
  }
  /// Index the next event will get.
  uint32_t next() const { return uint32_t(trace.size()); }
  Trace take() { return std::move(trace); }
  const Trace &get() const { return trace; }

private:
  uint32_t push(TraceEvent e) {
    trace.push_back(std::move(e));
    return uint32_t(trace.size() - 1);
  }
  Trace trace;
};

inline bool operator==(const Signal &a, const Signal &b) {
  return a.kind == b.kind && a.point == b.point && a.value == b.value;
}

inline std::string str(const Signal &s) {
  std::ostringstream os;
  os << (s.kind == Signal::Case ? "Case(" : "Loop(") << s.point << ","
     << s.value << ")";
  return os.str();
}
inline std::string str(const std::vector<Signal> &v) {
  std::string out = "[";
  for (const Signal &s : v)
    out += str(s) + " ";
  return out + "]";
}

/// The outcome of replaying one trace with a Cursor.
struct Replay {
  bool accepted = false;
  /// Index of the first rejected event (trace.size() when finish() failed).
  size_t failedAt = 0;
  /// Node matched by each Op/Feed/LoopBegin event (kNoNode otherwise).
  std::vector<NodeId> nodes;
  /// Signals as the cursor produced them.
  std::vector<Signal> signals;
  /// Signals expected from the spec's model (section 4.3): a Case signal
  /// with the successor's index whenever the path leaves a node with more
  /// than one successor; Loop 1 per iteration and Loop 0 at the exit of
  /// every loop that is not unrolled.
  std::vector<Signal> expected;
  /// Structural problems found while checking the cursor's answers (a
  /// matched node that is not a successor, a key mismatch, ...).
  std::vector<std::string> problems;
};

/// Replays `trace` event by event through the public Cursor API. Unlike
/// TraceGraph::accepts() it also records signals and checks every answer of
/// the cursor against the graph's structure.
inline Replay replay(const TraceGraph &g, const Trace &trace) {
  Replay r;
  r.nodes.assign(trace.size(), kNoNode);
  Cursor cursor(g);
  std::vector<Handle> handles(trace.size(), Handle{kNoNode, 0, 0});
  struct Level {
    NodeId loop, latest;
    uint32_t trips;
  };
  std::vector<Level> levels{{kNoNode, TraceGraph::start(), 0}};
  auto problem = [&](size_t i, const std::string &what) {
    r.problems.push_back("event " + std::to_string(i) + ": " + what);
  };
  // Expected Case signal when the path goes from `from` to `to`.
  auto edge = [&](size_t i, NodeId from, NodeId to) {
    const Node &n = g.node(from);
    size_t k = 0;
    while (k < n.succ.size() && n.succ[k] != to)
      ++k;
    if (k == n.succ.size()) {
      problem(i, "node " + std::to_string(to) + " is not a successor of " +
                     std::to_string(from));
      return;
    }
    if (n.succ.size() > 1)
      r.expected.push_back(Signal{Signal::Case, from, uint32_t(k)});
  };
  auto value = [&](const TraceValue &v, Handle &h) {
    if (v.kind == TraceValue::State)
      return cursor.state(v.index, h);
    if (v.index >= trace.size() || handles[v.index].node == kNoNode)
      return false;
    h = handles[v.index];
    h.result = v.result;
    return true;
  };
  auto reject = [&](size_t i) {
    r.failedAt = i;
    r.signals.assign(cursor.signals().begin(), cursor.signals().end());
    return r;
  };
  for (size_t i = 0; i < trace.size(); ++i) {
    const TraceEvent &e = trace[i];
    NodeId node = kNoNode;
    uint32_t inst = 0;
    switch (e.kind) {
    case TraceEvent::Kind::Op: {
      std::vector<Handle> ins(e.inputs.size());
      for (size_t k = 0; k < e.inputs.size(); ++k)
        if (!value(e.inputs[k], ins[k]))
          return reject(i);
      if (!cursor.op(e.key, ins, node, inst))
        return reject(i);
      [[fallthrough]];
    }
    case TraceEvent::Kind::Feed: {
      if (e.kind == TraceEvent::Kind::Feed && !cursor.feed(e.key, node, inst))
        return reject(i);
      const Node &n = g.node(node);
      TGKind want =
          e.kind == TraceEvent::Kind::Op ? TGKind::Op : TGKind::Feed;
      if (n.kind != want || n.key != e.key)
        problem(i, "matched a node of another kind or key");
      if (n.parent != levels.back().loop)
        problem(i, "matched a node of another level");
      edge(i, levels.back().latest, node);
      levels.back().latest = node;
      handles[i] = Handle{node, 0, inst};
      r.nodes[i] = node;
      break;
    }
    case TraceEvent::Kind::LoopBegin: {
      size_t before = cursor.signals().size();
      if (!cursor.loopBegin(e.key))
        return reject(i);
      // The cursor does not report the loop node: take it from the signal
      // if there was a divergence, else from the unique successor.
      const Node &cur = g.node(levels.back().latest);
      NodeId loop = kNoNode;
      if (cursor.signals().size() > before)
        loop = cur.succ[cursor.signals().back().value];
      else
        for (NodeId s : cur.succ)
          if (g.node(s).kind == TGKind::Loop && g.node(s).key == e.key)
            loop = s;
      if (loop == kNoNode) {
        problem(i, "loop node not found");
        return reject(i);
      }
      edge(i, levels.back().latest, loop);
      levels.back().latest = loop;
      levels.push_back({loop, kNoNode, 0});
      r.nodes[i] = loop;
      break;
    }
    case TraceEvent::Kind::LoopIter: {
      if (!cursor.loopIter())
        return reject(i);
      Level &l = levels.back();
      const Node &loop = g.node(l.loop);
      if (l.trips > 0)
        edge(i, l.latest, loop.bodyEnd);
      ++l.trips;
      if (!loop.isUnrolled())
        r.expected.push_back(Signal{Signal::Loop, l.loop, 1});
      l.latest = loop.bodyStart;
      break;
    }
    case TraceEvent::Kind::LoopEnd: {
      if (!cursor.loopEnd())
        return reject(i);
      Level &l = levels.back();
      const Node &loop = g.node(l.loop);
      if (l.trips > 0)
        edge(i, l.latest, loop.bodyEnd);
      if (!loop.isUnrolled())
        r.expected.push_back(Signal{Signal::Loop, l.loop, 0});
      else if (l.trips != loop.trips[0])
        problem(i, "unrolled loop left after the wrong trip count");
      levels.pop_back();
      break;
    }
    case TraceEvent::Kind::Fetch: {
      Handle h;
      if (e.inputs.size() != 1 || !value(e.inputs[0], h) ||
          !cursor.fetchable(h))
        return reject(i);
      break;
    }
    }
  }
  r.signals.assign(cursor.signals().begin(), cursor.signals().end());
  if (!cursor.finish()) {
    r.failedAt = trace.size();
    return r;
  }
  edge(trace.size(), levels.back().latest, TraceGraph::end());
  r.signals.assign(cursor.signals().begin(), cursor.signals().end());
  r.accepted = true;
  return r;
}

/// Field-by-field comparison; returns a description of the first difference.
/// With `ignoreWhileTrips`, the trip-count sets of loops that are not
/// unrolled in either graph are not compared (a new count of a while loop
/// changes nothing the generated graph or the validator depends on).
inline std::string diffGraphs(const TraceGraph &a, const TraceGraph &b,
                              bool ignoreWhileTrips = false) {
  if (a.size() != b.size())
    return "sizes differ: " + std::to_string(a.size()) + " vs " +
           std::to_string(b.size());
  for (NodeId id = 0; id < a.size(); ++id) {
    const Node &x = a.node(id), &y = b.node(id);
    auto at = [&](const char *what) {
      return "node " + std::to_string(id) + ": " + what + " differ";
    };
    if (x.kind != y.kind)
      return at("kinds");
    if (x.key != y.key)
      return at("keys");
    if (x.parent != y.parent)
      return at("parents");
    if (x.succ != y.succ)
      return at("successors");
    if (x.sources.size() != y.sources.size())
      return at("slot counts");
    for (size_t s = 0; s < x.sources.size(); ++s)
      if (x.sources[s] != y.sources[s])
        return at("sources");
    if (x.resultClasses != y.resultClasses)
      return at("result classes");
    if (x.fetchIds != y.fetchIds)
      return at("fetch ids");
    if (x.bodyStart != y.bodyStart || x.bodyEnd != y.bodyEnd)
      return at("loop bodies");
    bool whiles = x.kind == TGKind::Loop && !x.isUnrolled() && !y.isUnrolled();
    if (x.trips != y.trips && !(ignoreWhileTrips && whiles))
      return at("trips");
  }
  if (a.numTraces() != b.numTraces())
    return "trace counts differ";
  return "";
}

} // namespace terra::testing

#endif // TERRA_TEST_UNIT_TRACETESTUTIL_H

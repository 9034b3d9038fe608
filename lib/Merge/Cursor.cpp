//===- Cursor.cpp - The runtime validator ---------------------------------===//
//
// Follows one iteration through the TraceGraph. Called by the co-execution
// runtime for every DL op, so the common path (one successor, one or two
// inputs) touches a handful of cache lines and allocates nothing.
//
//===----------------------------------------------------------------------===//
#include "Provenance.h"

using namespace terra;
using namespace terra::detail;

Cursor::Cursor(const TraceGraph &graph) : graph(graph) {
  exec.stamps.resize(graph.size());
  reset();
}

void Cursor::reset() {
  exec.reset();
  stack.clear();
  stack.push_back(Frame{kNoNode, TraceGraph::start(), 0});
  pending.clear();
}

bool Cursor::step(TGKind kind, KeyId key, llvm::ArrayRef<Handle> inputs,
                  NodeId &matched) {
  if (stack.empty())
    return false;
  Frame &frame = stack.back();
  // Fix (test/unit TraceGraph.CursorRejectsEventsBeforeTheFirstLoopIter):
  // between loop_begin and the first loop_iter a frame has no position
  // (latest == kNoNode); reading graph.nodes[kNoNode] was out of bounds.
  if (frame.latest == kNoNode)
    return false;
  const Node &cur = graph.nodes[frame.latest];
  for (size_t k = 0, e = cur.succ.size(); k != e; ++k) {
    NodeId c = cur.succ[k];
    const Node &cand = graph.nodes[c];
    if (cand.kind != kind || cand.key != key)
      continue;
    if (kind == TGKind::Op &&
        checkInputs(graph.nodes, exec, cand, inputs, /*allowExtend=*/false) !=
            Prov::Match)
      continue;
    if (e > 1)
      pending.push_back(Signal{Signal::Case, frame.latest, uint32_t(k)});
    frame.latest = c;
    matched = c;
    return true;
  }
  return false;
}

bool Cursor::op(KeyId key, llvm::ArrayRef<Handle> inputs, NodeId &node,
                uint32_t &instance) {
  for (const Handle &h : inputs)
    if (h.node >= graph.size())
      return false;
  if (!step(TGKind::Op, key, inputs, node))
    return false;
  instance = exec.execute(node);
  return true;
}

bool Cursor::feed(KeyId key, NodeId &node, uint32_t &instance) {
  if (!step(TGKind::Feed, key, {}, node))
    return false;
  instance = exec.execute(node);
  return true;
}

bool Cursor::state(KeyId stateKey, Handle &handle) const {
  NodeId id = graph.stateNode(stateKey);
  if (id == kNoNode)
    return false;
  handle = Handle{id, 0, 1};
  return true;
}

bool Cursor::loopBegin(KeyId key) {
  NodeId loop;
  if (!step(TGKind::Loop, key, {}, loop))
    return false;
  stack.push_back(Frame{loop, kNoNode, 0});
  return true;
}

bool Cursor::moveToEnd(Frame &frame, NodeId endNode) {
  const Node &cur = graph.nodes[frame.latest];
  for (size_t k = 0, e = cur.succ.size(); k != e; ++k) {
    if (cur.succ[k] != endNode)
      continue;
    if (e > 1)
      pending.push_back(Signal{Signal::Case, frame.latest, uint32_t(k)});
    frame.latest = endNode;
    return true;
  }
  return false;
}

const Node *Cursor::closeIteration() {
  if (stack.size() < 2)
    return nullptr;
  Frame &frame = stack.back();
  const Node &loop = graph.nodes[frame.loop];
  if (frame.trips > 0 && !moveToEnd(frame, loop.bodyEnd))
    return nullptr;
  return &loop;
}

bool Cursor::loopIter() {
  const Node *loop = closeIteration();
  if (!loop)
    return false;
  Frame &frame = stack.back();
  ++frame.trips;
  if (loop->isUnrolled()) {
    if (frame.trips > loop->trips[0])
      return false;
  } else {
    pending.push_back(Signal{Signal::Loop, frame.loop, 1});
  }
  frame.latest = loop->bodyStart;
  return true;
}

bool Cursor::loopEnd() {
  const Node *loop = closeIteration();
  if (!loop)
    return false;
  Frame &frame = stack.back();
  if (loop->isUnrolled()) {
    if (frame.trips != loop->trips[0])
      return false;
  } else {
    pending.push_back(Signal{Signal::Loop, frame.loop, 0});
  }
  stack.pop_back();
  return true;
}

bool Cursor::finish() {
  if (stack.size() != 1)
    return false;
  bool ok = moveToEnd(stack.back(), TraceGraph::end());
  stack.clear();
  return ok;
}

bool Cursor::fetchable(const Handle &value) const {
  if (value.node >= graph.size())
    return false;
  const Node &n = graph.nodes[value.node];
  if (n.kind == TGKind::Feed || n.kind == TGKind::State)
    return true; // The host already holds these values.
  return n.kind == TGKind::Op && value.result < n.fetchIds.size() &&
         n.fetchIds[value.result] >= 0;
}

//===- TraceGraph.h - Merged traces and the runtime validator ---*- C++ -*-===//
//
// The TraceGraph of spec section 2: an execution-order DAG per level (the
// top level and each loop body), with loop nodes, feed/fetch annotations
// and path-aware provenance. It is independent of MLIR types: ops are
// identified by interned keys (see TypedTraceGraph for the MLIR side), so
// the co-execution runtime can validate every op in well under a
// microsecond.
//
// Provenance model. Every input slot of an op node holds a set S of sources
// (producer node, result, age). At run time the slot reads the value of
// the member of S that executed last ("latest-writer" semantics); `age` > 0
// means "the value that node produced `age` executions ago" and only occurs
// in singleton sets. The generated graph implements exactly this rule with
// one variable per distinct S (switch results and loop-carried values), and
// the validator checks it for every op, so the graph and the validator agree
// on every path, including paths no trace took.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_MERGE_TRACEGRAPH_H
#define TERRA_MERGE_TRACEGRAPH_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>
#include <vector>

namespace terra {

using NodeId = uint32_t;
using KeyId = uint32_t;
inline constexpr NodeId kNoNode = ~0u;

enum class TGKind : uint8_t { Start, End, Op, Feed, State, Loop };

/// A producer of a value: result `result` of `node`, produced `age`
/// executions of `node` ago.
struct Source {
  NodeId node;
  uint32_t result;
  uint32_t age;
  bool operator==(const Source &o) const {
    return node == o.node && result == o.result && age == o.age;
  }
};

struct Node {
  TGKind kind;
  KeyId key = 0;
  /// The loop node whose body holds this node; kNoNode at the top level.
  NodeId parent = kNoNode;
  /// Execution-order successors, in the order they were first taken. The
  /// index of a successor is its case index at a divergence.
  llvm::SmallVector<NodeId, 2> succ;
  /// Op nodes: per input slot, the sources seen on the different paths.
  std::vector<llvm::SmallVector<Source, 1>> sources;
  /// Op/Feed/State nodes: per result, an interned (dtype, rank) class.
  llvm::SmallVector<uint32_t, 1> resultClasses;
  /// Per result: the fetch-point id, or -1 when the host never read it.
  llvm::SmallVector<int32_t, 1> fetchIds;
  /// Loop nodes: the body level and the distinct trip counts seen.
  NodeId bodyStart = kNoNode, bodyEnd = kNoNode;
  llvm::SmallVector<uint32_t, 1> trips;

  bool isUnrolled() const { return kind == TGKind::Loop && trips.size() == 1; }
};

/// A value in a recorded trace: an output of an earlier Op/Feed event, or a
/// persistent state tensor.
struct TraceValue {
  enum Kind : uint8_t { Event, State };
  Kind kind;
  /// Event: the index of the producing event. State: the state's key.
  uint32_t index;
  /// Event: the result index. State: the state's (dtype, rank) class.
  uint32_t result;
};

/// One entry of a flat trace, mirroring the ops of a `terra.trace`.
struct TraceEvent {
  enum class Kind : uint8_t { Op, Feed, LoopBegin, LoopIter, LoopEnd, Fetch };
  Kind kind;
  KeyId key = 0; ///< Op, Feed, LoopBegin.
  llvm::SmallVector<TraceValue, 2> inputs;       ///< Op operands; Fetch value.
  llvm::SmallVector<uint32_t, 1> resultClasses;  ///< Op, Feed.
};
using Trace = std::vector<TraceEvent>;

struct MergeOutcome {
  /// Non-empty when the trace is malformed; nothing was merged.
  std::string error;
  /// The graph changed: the trace was not covered yet.
  bool changed = false;
  /// False when the trace reads a value in a way no graph can route (e.g. a
  /// stale value together with path-dependent producers). The graph is left
  /// unchanged and the host should run this function eagerly.
  bool coverable = true;
  /// For Op, Feed and LoopBegin events: the node they were merged into.
  std::vector<NodeId> nodeOfEvent;
};

/// A value handed to the validator: result `result` of the `instance`-th
/// execution (1-based) of `node` in the current iteration.
struct Handle {
  NodeId node;
  uint32_t result;
  uint32_t instance;
};

/// A control decision the host sends to the running graph.
struct Signal {
  enum Kind : uint8_t { Case, Loop };
  Kind kind;
  NodeId point; ///< The divergence node, or the loop node.
  uint32_t value; ///< Case index, or 1 = next iteration / 0 = exit.
};

class TraceGraph {
public:
  TraceGraph();

  /// Merges one trace incrementally (spec section 2.4). Tracing may stop
  /// when this returns `changed == false`.
  MergeOutcome merge(const Trace &trace);

  /// True if the validator accepts `trace` from start to end.
  bool accepts(const Trace &trace) const;

  const Node &node(NodeId id) const { return nodes[id]; }
  size_t size() const { return nodes.size(); }
  static constexpr NodeId start() { return 0; }
  static constexpr NodeId end() { return 1; }
  unsigned numTraces() const { return numMerged; }
  /// The state node for a state key, or kNoNode.
  NodeId stateNode(KeyId key) const;

  /// Low-level construction, for rebuilding a graph from its IR form.
  NodeId addNode(Node node);
  Node &mutableNode(NodeId id) { return nodes[id]; }
  void setNumTraces(unsigned n) { numMerged = n; }
  /// Rebuilds the lookup indexes after addNode/mutableNode edits.
  void reindex();

private:
  friend class Cursor;
  friend struct Merger;
  std::vector<Node> nodes;
  /// (level owner, key) -> nodes of that key in that level.
  llvm::DenseMap<std::pair<NodeId, KeyId>, llvm::SmallVector<NodeId, 1>>
      byKey;
  llvm::DenseMap<KeyId, NodeId> states;
  std::vector<Trace> traces;
  unsigned numMerged = 0;
  int32_t nextFetchId = 0;
};

namespace detail {
/// Per-iteration execution stamps: when each node last ran and how often.
/// An epoch counter makes reset O(1).
struct ExecState {
  struct Stamp {
    uint32_t epoch = 0, seq = 0, count = 0;
  };
  std::vector<Stamp> stamps;
  uint32_t epoch = 1, seq = 1;

  void reset() {
    ++epoch;
    seq = 1;
  }
  /// Sequence number of the node's latest execution (0: not run yet).
  /// Persistent state counts as run once, at the start of the iteration.
  uint32_t seqOf(const Node &node, NodeId id) const {
    if (node.kind == TGKind::State)
      return 1;
    return id < stamps.size() && stamps[id].epoch == epoch ? stamps[id].seq
                                                           : 0;
  }
  uint32_t countOf(const Node &node, NodeId id) const {
    if (node.kind == TGKind::State)
      return 1;
    return id < stamps.size() && stamps[id].epoch == epoch ? stamps[id].count
                                                           : 0;
  }
  /// Records an execution of `id`; returns its instance number.
  uint32_t execute(NodeId id) {
    if (id >= stamps.size())
      stamps.resize(id + 1);
    Stamp &s = stamps[id];
    if (s.epoch != epoch)
      s = Stamp{epoch, 0, 0};
    s.seq = ++seq;
    return ++s.count;
  }
};
} // namespace detail

/// The read-only validator (spec section 4.4): follows one iteration of the
/// host program through the graph, accepting or rejecting each event, and
/// produces the case-select and loop-condition signals for the graph run.
class Cursor {
public:
  explicit Cursor(const TraceGraph &graph);

  /// Starts a new iteration.
  void reset();

  /// Validates a DL op with the given input values. On success sets `node`
  /// and the instance of its outputs.
  bool op(KeyId key, llvm::ArrayRef<Handle> inputs, NodeId &node,
          uint32_t &instance);
  /// Validates a value fed by the host.
  bool feed(KeyId key, NodeId &node, uint32_t &instance);
  /// The handle of persistent state `stateKey` (always instance 1).
  bool state(KeyId stateKey, Handle &handle) const;
  bool loopBegin(KeyId key);
  bool loopIter();
  bool loopEnd();
  /// End of the iteration: the path must end here.
  bool finish();
  /// True if the graph publishes this value (it is a fetch point).
  bool fetchable(const Handle &value) const;

  /// Signals produced so far in this iteration, in order.
  llvm::ArrayRef<Signal> signals() const { return pending; }
  void clearSignals() { pending.clear(); }

private:
  struct Frame {
    NodeId loop;   ///< kNoNode for the top level.
    NodeId latest; ///< Last matched node of this level.
    uint32_t trips;
  };
  bool step(TGKind kind, KeyId key, llvm::ArrayRef<Handle> inputs,
            NodeId &node);
  bool moveToEnd(Frame &frame, NodeId endNode);
  /// Ends the open iteration of the innermost loop, if any; returns the
  /// loop node, or null when the path cannot end the iteration here.
  const Node *closeIteration();

  const TraceGraph &graph;
  llvm::SmallVector<Frame, 4> stack;
  llvm::SmallVector<Signal, 16> pending;
  detail::ExecState exec;
};

} // namespace terra

#endif // TERRA_MERGE_TRACEGRAPH_H

//===- Provenance.h - Path-aware provenance check ---------------*- C++ -*-===//
//
// Shared by trace merging and the runtime validator, so that the two make
// the same decision for the same graph and the same iteration prefix.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_LIB_MERGE_PROVENANCE_H
#define TERRA_LIB_MERGE_PROVENANCE_H

#include "terra/Merge/TraceGraph.h"

namespace terra::detail {

enum class Prov { Match, Extend, Mismatch };

/// The source a handle denotes right now: its age is how many times its
/// producer ran after producing it.
inline Source sourceOf(const std::vector<Node> &nodes, const ExecState &exec,
                       const Handle &h) {
  return Source{h.node, h.result,
                exec.countOf(nodes[h.node], h.node) - h.instance};
}

/// Does slot set `set` route `src` under latest-writer semantics? Returns
/// Extend when `src` could be added to `set` without changing the producer
/// routed on this path (only if `allowExtend`).
inline Prov checkSlot(const std::vector<Node> &nodes, const ExecState &exec,
                      llvm::ArrayRef<Source> set, const Source &src,
                      bool allowExtend) {
  bool member = false;
  for (const Source &s : set)
    member |= s == src;
  if (member) {
    if (src.age != 0)
      return Prov::Match; // Aged sources only live in singleton sets.
    uint32_t mine = exec.seqOf(nodes[src.node], src.node);
    for (const Source &s : set)
      if (s.node != src.node && exec.seqOf(nodes[s.node], s.node) >= mine)
        return Prov::Mismatch;
    return Prov::Match;
  }
  if (!allowExtend || src.age != 0)
    return Prov::Mismatch;
  const Node &producer = nodes[src.node];
  uint32_t cls = producer.resultClasses[src.result];
  uint32_t mine = exec.seqOf(producer, src.node);
  for (const Source &s : set) {
    if (s.age != 0 || s.node == src.node ||
        nodes[s.node].resultClasses[s.result] != cls ||
        exec.seqOf(nodes[s.node], s.node) >= mine)
      return Prov::Mismatch;
  }
  return Prov::Extend;
}

/// Checks every input slot of candidate node `cand`.
inline Prov checkInputs(const std::vector<Node> &nodes, const ExecState &exec,
                        const Node &cand, llvm::ArrayRef<Handle> inputs,
                        bool allowExtend) {
  if (cand.sources.size() != inputs.size())
    return Prov::Mismatch;
  Prov result = Prov::Match;
  for (size_t i = 0, e = inputs.size(); i != e; ++i) {
    Prov p = checkSlot(nodes, exec, cand.sources[i],
                       sourceOf(nodes, exec, inputs[i]), allowExtend);
    if (p == Prov::Mismatch)
      return p;
    if (p == Prov::Extend)
      result = Prov::Extend;
  }
  return result;
}

} // namespace terra::detail

#endif // TERRA_LIB_MERGE_PROVENANCE_H

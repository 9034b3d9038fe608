//===- RandomProgram.h - Random structured programs and their traces -*- C++ -*-===//
//
// A tiny imperative language whose executions produce Terra traces:
//
//   program  := init-feeds/state ; block
//   stmt     := v = op_site(v, ...)      (key drawn from the site's pool)
//             | v = feed_site            | fetch v
//             | v = w                    | v = a if flag else b
//             | if flag: block else: block
//             | for i in range(N or random): block    (loop markers)
//             | break | return           (only inside if-arms)
//             | shuffle: block           (runs its statements in a random
//                                         order, e.g. iteration over a set;
//                                         gives DAGs that are not
//                                         series-parallel)
//
// Variables always hold a value (they are initialised by feeds or state
// reads at the top), so every op input is an earlier value in scope. Sites
// are distinct per statement, as in real programs; a site's pool usually
// holds one key and sometimes two or three (an attribute that varies).
// Everything is deterministic in the seeds.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_TEST_UNIT_RANDOMPROGRAM_H
#define TERRA_TEST_UNIT_RANDOMPROGRAM_H

#include "terra/Merge/TraceGraph.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace terra::testing {

struct Stmt {
  enum Kind { Op, Feed, Fetch, Copy, Select, If, Loop, Break, Return, Shuffle };
  Kind kind;
  /// Op: the site's key pool. Feed/Loop: keys[0].
  std::vector<KeyId> keys;
  /// Op inputs; Copy: {src}; Select: {a, b}; Fetch: {v}.
  std::vector<int> ins;
  /// Op: variables receiving results 0, 1, ... (may be fewer than results).
  /// Feed/Copy/Select: {dst}.
  std::vector<int> outs;
  /// If: probability of the then-arm.
  double pTrue = 0.5;
  /// Loop: constant trip count, or -1 for a random count in [0, maxTrips].
  int trips = -1;
  int maxTrips = 3;
  /// Loop and Shuffle: thenBlock is the body.
  std::vector<Stmt> thenBlock, elseBlock;
};

struct Program {
  unsigned numVars = 0;
  /// Per variable: the feed key or the state key that initialises it.
  struct Init {
    bool isState;
    KeyId key;
    uint32_t cls;
  };
  std::vector<Init> init;
  std::vector<Stmt> body;
  /// Zero-trip loops leave no loop markers (bypass edge) instead of an
  /// empty loop_begin/loop_end pair.
  bool omitZeroTripLoops = false;
  /// Result classes of every op key (all keys of one site have the same
  /// number of results).
  std::map<KeyId, std::vector<uint32_t>> opClasses;
  std::map<KeyId, uint32_t> feedClass;
  /// One past the largest key used.
  KeyId keyLimit = 1;

  std::string dump() const;
};

struct GenOptions {
  unsigned maxDepth = 3;
  unsigned minTop = 3, maxTop = 8;
};

Program generateProgram(uint64_t seed, const GenOptions &options = {});

struct RunOptions {
  /// Forces the trip count of the `forceLoopExec`-th loop execution
  /// (0-based, counting every execution of every loop statement).
  int forceLoopExec = -1;
  unsigned forcedTrips = 0;
};

struct RunInfo {
  /// Per loop execution: the index of its loop_begin event, or -1 when a
  /// zero-trip loop left no markers.
  std::vector<int> loopBeginOfExec;
};

Trace runProgram(const Program &program, uint64_t seed,
                 const RunOptions &options = {}, RunInfo *info = nullptr);

} // namespace terra::testing

#endif // TERRA_TEST_UNIT_RANDOMPROGRAM_H

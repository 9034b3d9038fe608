//===- cursor_bench.cpp - ns per Cursor::op ---------------------------------===//
//
// A small microbenchmark of the runtime validator (spec section 4.4: the
// PythonRunner validates every DL op). Not a test: it prints numbers.
//
//   ninja -C <build> cursor-bench && <build>/bin/cursor-bench [reps]
//
// Graphs:
//   chain    one trace of N ops, each reading its predecessor and a feed:
//            every step has a single successor.
//   branchy  N/4 if/else diamonds (4 arms each, distinct sites per arm),
//            merged from enough traces to cover every arm; each step is at
//            a divergence or a merge point with two-input ops.
//   loop     a loop of N/4 iterations over a 4-op body that is not
//            unrolled, each op reading the previous iteration's value.
//
//===----------------------------------------------------------------------===//
#include "terra/Merge/TraceGraph.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

using namespace terra;

namespace {

TraceEvent opEvent(KeyId key, std::vector<TraceValue> inputs) {
  TraceEvent e;
  e.kind = TraceEvent::Kind::Op;
  e.key = key;
  e.inputs.assign(inputs.begin(), inputs.end());
  e.resultClasses.push_back(0);
  return e;
}
TraceEvent feedEvent(KeyId key) {
  TraceEvent e;
  e.kind = TraceEvent::Kind::Feed;
  e.key = key;
  e.resultClasses.push_back(0);
  return e;
}
TraceEvent marker(TraceEvent::Kind kind, KeyId key = 0) {
  TraceEvent e;
  e.kind = kind;
  e.key = key;
  return e;
}
TraceValue ev(uint32_t i) { return TraceValue{TraceValue::Event, i, 0}; }

Trace chain(unsigned n) {
  Trace t;
  t.push_back(feedEvent(1));
  for (unsigned i = 0; i < n; ++i)
    t.push_back(opEvent(10 + i, {ev(uint32_t(t.size() - 1)), ev(0)}));
  return t;
}

/// Diamond d picks arm arms[d] in 0..3.
Trace branchy(const std::vector<unsigned> &arms) {
  Trace t;
  t.push_back(feedEvent(1));
  uint32_t x = 0;
  KeyId key = 10;
  for (unsigned arm : arms) {
    t.push_back(opEvent(key + arm, {ev(x), ev(0)}));
    uint32_t y = uint32_t(t.size() - 1);
    t.push_back(opEvent(key + 4, {ev(y), ev(x)}));
    x = uint32_t(t.size() - 1);
    key += 5;
  }
  return t;
}

Trace loop(unsigned iters) {
  Trace t;
  t.push_back(feedEvent(1));
  uint32_t x = 0;
  t.push_back(marker(TraceEvent::Kind::LoopBegin, 5));
  for (unsigned i = 0; i < iters; ++i) {
    t.push_back(marker(TraceEvent::Kind::LoopIter));
    for (KeyId k = 10; k < 14; ++k) {
      t.push_back(opEvent(k, {ev(x), ev(0)}));
      x = uint32_t(t.size() - 1);
    }
  }
  t.push_back(marker(TraceEvent::Kind::LoopEnd));
  return t;
}

/// Replays `t` with a Cursor `reps` times; returns ns per validated op.
double measure(const TraceGraph &g, const Trace &t, unsigned reps,
               bool &ok) {
  Cursor cursor(g);
  std::vector<Handle> handles(t.size());
  Handle in[4];
  unsigned ops = 0;
  ok = true;
  auto t0 = std::chrono::steady_clock::now();
  for (unsigned r = 0; r < reps; ++r) {
    cursor.reset();
    for (size_t i = 0; i < t.size(); ++i) {
      const TraceEvent &e = t[i];
      NodeId node;
      uint32_t inst;
      switch (e.kind) {
      case TraceEvent::Kind::Op:
        for (size_t k = 0; k < e.inputs.size(); ++k)
          in[k] = handles[e.inputs[k].index];
        ok &= cursor.op(e.key, llvm::ArrayRef<Handle>(in, e.inputs.size()),
                        node, inst);
        handles[i] = Handle{node, 0, inst};
        ++ops;
        break;
      case TraceEvent::Kind::Feed:
        ok &= cursor.feed(e.key, node, inst);
        handles[i] = Handle{node, 0, inst};
        break;
      case TraceEvent::Kind::LoopBegin:
        ok &= cursor.loopBegin(e.key);
        break;
      case TraceEvent::Kind::LoopIter:
        ok &= cursor.loopIter();
        break;
      case TraceEvent::Kind::LoopEnd:
        ok &= cursor.loopEnd();
        break;
      case TraceEvent::Kind::Fetch:
        break;
      }
    }
    ok &= cursor.finish();
  }
  auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count() / ops;
}

} // namespace

int main(int argc, char **argv) {
  unsigned reps = argc > 1 ? unsigned(std::atoi(argv[1])) : 2000;
  const unsigned n = 1000;
  bool ok;

  TraceGraph gc;
  Trace tc = chain(n);
  gc.merge(tc);
  double chainNs = measure(gc, tc, reps, ok);
  std::printf("chain   %5u ops, %6zu nodes: %7.1f ns/op %s\n", n, gc.size(),
              chainNs, ok ? "" : "(REJECTED!)");

  TraceGraph gb;
  std::mt19937 rng(1);
  std::vector<unsigned> arms(n / 2);
  for (unsigned a = 0; a < 4; ++a) {
    for (unsigned &x : arms)
      x = a;
    gb.merge(branchy(arms));
  }
  for (unsigned &x : arms)
    x = rng() % 4;
  Trace tb = branchy(arms);
  double branchNs = measure(gb, tb, reps, ok);
  std::printf("branchy %5zu ops, %6zu nodes: %7.1f ns/op %s\n", tb.size() - 1,
              gb.size(), branchNs, ok ? "" : "(REJECTED!)");

  TraceGraph gl;
  gl.merge(loop(2));
  gl.merge(loop(3));
  Trace tl = loop(n / 4);
  double loopNs = measure(gl, tl, reps, ok);
  std::printf("loop    %5u ops, %6zu nodes: %7.1f ns/op %s\n", n, gl.size(),
              loopNs, ok ? "" : "(REJECTED!)");
  return 0;
}

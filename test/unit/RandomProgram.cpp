//===- RandomProgram.cpp - Random structured programs and their traces ----===//
#include "RandomProgram.h"

#include <algorithm>
#include <random>
#include <sstream>

using namespace terra;
using namespace terra::testing;

namespace {

class Generator {
public:
  Generator(uint64_t seed, const GenOptions &options)
      : rng(seed), options(options) {}

  Program run() {
    Program &p = prog;
    p.omitZeroTripLoops = coin(0.3);
    p.numVars = uniform(4, 9);
    for (unsigned v = 0; v < p.numVars; ++v) {
      bool isState = coin(0.3);
      KeyId key = p.keyLimit++;
      uint32_t cls = uniform(0, 1);
      p.init.push_back({isState, key, cls});
      if (!isState)
        p.feedClass[key] = cls;
    }
    p.body = block(0, /*inLoop=*/false, /*inArm=*/false,
                   uniform(options.minTop, options.maxTop));
    return p;
  }

private:
  bool coin(double p) { return std::bernoulli_distribution(p)(rng); }
  unsigned uniform(unsigned lo, unsigned hi) {
    return std::uniform_int_distribution<unsigned>(lo, hi)(rng);
  }
  int var() { return int(uniform(0, prog.numVars - 1)); }

  Stmt opStmt() {
    Stmt s;
    s.kind = Stmt::Op;
    unsigned pool = coin(0.85) ? 1 : uniform(2, 3);
    unsigned results = coin(0.8) ? 1 : 2;
    for (unsigned k = 0; k < pool; ++k) {
      KeyId key = prog.keyLimit++;
      std::vector<uint32_t> classes;
      for (unsigned r = 0; r < results; ++r)
        classes.push_back(uniform(0, 1));
      prog.opClasses[key] = classes;
      s.keys.push_back(key);
    }
    unsigned ins = uniform(0, 3);
    for (unsigned i = 0; i < ins; ++i)
      s.ins.push_back(var());
    unsigned outs = results == 1 ? 1 : uniform(1, 2);
    for (unsigned o = 0; o < outs; ++o)
      s.outs.push_back(var());
    return s;
  }

  std::vector<Stmt> block(unsigned depth, bool inLoop, bool inArm,
                          unsigned size) {
    std::vector<Stmt> out;
    for (unsigned i = 0; i < size; ++i) {
      unsigned r = uniform(0, 99);
      bool nest = depth < options.maxDepth;
      Stmt s;
      if (r < 42) {
        s = opStmt();
      } else if (r < 48) {
        s.kind = Stmt::Fetch;
        s.ins.push_back(var());
      } else if (r < 52) {
        s.kind = Stmt::Feed;
        KeyId key = prog.keyLimit++;
        prog.feedClass[key] = uniform(0, 1);
        s.keys.push_back(key);
        s.outs.push_back(var());
      } else if (r < 57) {
        s.kind = Stmt::Copy;
        s.ins.push_back(var());
        s.outs.push_back(var());
      } else if (r < 65) {
        s.kind = Stmt::Select;
        s.ins = {var(), var()};
        s.outs.push_back(var());
      } else if (r < 80 && nest) {
        s.kind = Stmt::If;
        static const double probs[] = {0.2, 0.5, 0.8};
        s.pTrue = probs[uniform(0, 2)];
        s.thenBlock = block(depth + 1, inLoop, true,
                            coin(0.2) ? 0 : uniform(1, 3));
        s.elseBlock = block(depth + 1, inLoop, true,
                            coin(0.4) ? 0 : uniform(1, 3));
      } else if (r < 92 && nest) {
        s.kind = Stmt::Loop;
        s.keys.push_back(prog.keyLimit++);
        if (coin(0.4))
          s.trips = int(uniform(0, 3));
        else
          s.maxTrips = int(uniform(1, 3));
        s.thenBlock = block(depth + 1, true, false, uniform(1, 4));
      } else if (r < 95 && nest) {
        s.kind = Stmt::Shuffle;
        unsigned k = uniform(2, 4);
        for (unsigned j = 0; j < k; ++j)
          s.thenBlock.push_back(opStmt());
      } else if (r < 96 && inLoop && inArm) {
        s.kind = Stmt::Break;
      } else if (r < 98 && inArm) {
        s.kind = Stmt::Return;
      } else {
        s = opStmt();
      }
      out.push_back(std::move(s));
    }
    return out;
  }

  std::mt19937_64 rng;
  GenOptions options;
  Program prog;
};

class Interpreter {
public:
  Interpreter(const Program &p, uint64_t seed, const RunOptions &options,
              RunInfo *info)
      : p(p), rng(seed), options(options), info(info) {}

  Trace run() {
    vars.resize(p.numVars);
    for (unsigned v = 0; v < p.numVars; ++v) {
      const Program::Init &in = p.init[v];
      if (in.isState) {
        vars[v] = TraceValue{TraceValue::State, in.key, in.cls};
      } else {
        vars[v] = TraceValue{TraceValue::Event, emitFeed(in.key), 0};
      }
    }
    exec(p.body);
    return std::move(trace);
  }

private:
  enum class Flow { Normal, Break, Return };

  bool coin(double prob) { return std::bernoulli_distribution(prob)(rng); }

  uint32_t push(TraceEvent e) {
    trace.push_back(std::move(e));
    return uint32_t(trace.size() - 1);
  }
  uint32_t emitFeed(KeyId key) {
    TraceEvent e;
    e.kind = TraceEvent::Kind::Feed;
    e.key = key;
    e.resultClasses.push_back(p.feedClass.at(key));
    return push(std::move(e));
  }
  void marker(TraceEvent::Kind kind, KeyId key = 0) {
    TraceEvent e;
    e.kind = kind;
    e.key = key;
    push(std::move(e));
  }

  Flow exec(const std::vector<Stmt> &block) {
    for (const Stmt &s : block) {
      Flow f = exec(s);
      if (f != Flow::Normal)
        return f;
    }
    return Flow::Normal;
  }

  Flow exec(const Stmt &s) {
    switch (s.kind) {
    case Stmt::Op: {
      KeyId key = s.keys[std::uniform_int_distribution<size_t>(
          0, s.keys.size() - 1)(rng)];
      TraceEvent e;
      e.kind = TraceEvent::Kind::Op;
      e.key = key;
      for (int v : s.ins)
        e.inputs.push_back(vars[v]);
      const std::vector<uint32_t> &classes = p.opClasses.at(key);
      e.resultClasses.assign(classes.begin(), classes.end());
      uint32_t idx = push(std::move(e));
      for (size_t r = 0; r < s.outs.size(); ++r)
        vars[s.outs[r]] = TraceValue{TraceValue::Event, idx, uint32_t(r)};
      return Flow::Normal;
    }
    case Stmt::Feed:
      vars[s.outs[0]] = TraceValue{TraceValue::Event, emitFeed(s.keys[0]), 0};
      return Flow::Normal;
    case Stmt::Fetch: {
      TraceEvent e;
      e.kind = TraceEvent::Kind::Fetch;
      e.inputs.push_back(vars[s.ins[0]]);
      push(std::move(e));
      return Flow::Normal;
    }
    case Stmt::Copy:
      vars[s.outs[0]] = vars[s.ins[0]];
      return Flow::Normal;
    case Stmt::Select:
      vars[s.outs[0]] = coin(0.5) ? vars[s.ins[0]] : vars[s.ins[1]];
      return Flow::Normal;
    case Stmt::If:
      return exec(coin(s.pTrue) ? s.thenBlock : s.elseBlock);
    case Stmt::Break:
      return Flow::Break;
    case Stmt::Return:
      return Flow::Return;
    case Stmt::Shuffle: {
      std::vector<size_t> order(s.thenBlock.size());
      for (size_t i = 0; i < order.size(); ++i)
        order[i] = i;
      std::shuffle(order.begin(), order.end(), rng);
      for (size_t i : order)
        exec(s.thenBlock[i]);
      return Flow::Normal;
    }
    case Stmt::Loop: {
      unsigned trips = s.trips >= 0
                           ? unsigned(s.trips)
                           : std::uniform_int_distribution<unsigned>(
                                 0, unsigned(s.maxTrips))(rng);
      int execIndex = loopExecs++;
      if (execIndex == options.forceLoopExec)
        trips = options.forcedTrips;
      bool markers = trips > 0 || !p.omitZeroTripLoops;
      if (info)
        info->loopBeginOfExec.push_back(markers ? int(trace.size()) : -1);
      if (!markers)
        return Flow::Normal;
      marker(TraceEvent::Kind::LoopBegin, s.keys[0]);
      Flow f = Flow::Normal;
      for (unsigned i = 0; i < trips; ++i) {
        marker(TraceEvent::Kind::LoopIter);
        f = exec(s.thenBlock);
        if (f != Flow::Normal)
          break;
      }
      marker(TraceEvent::Kind::LoopEnd);
      return f == Flow::Return ? Flow::Return : Flow::Normal;
    }
    }
    return Flow::Normal;
  }

  const Program &p;
  std::mt19937_64 rng;
  RunOptions options;
  RunInfo *info;
  std::vector<TraceValue> vars;
  Trace trace;
  int loopExecs = 0;
};

void dumpBlock(std::ostream &os, const std::vector<Stmt> &block,
               unsigned indent) {
  std::string pad(indent * 2, ' ');
  auto v = [](int i) { return "v" + std::to_string(i); };
  for (const Stmt &s : block) {
    os << pad;
    switch (s.kind) {
    case Stmt::Op: {
      for (size_t o = 0; o < s.outs.size(); ++o)
        os << (o ? ", " : "") << v(s.outs[o]);
      os << " = op[";
      for (size_t k = 0; k < s.keys.size(); ++k)
        os << (k ? "|" : "") << s.keys[k];
      os << "](";
      for (size_t i = 0; i < s.ins.size(); ++i)
        os << (i ? ", " : "") << v(s.ins[i]);
      os << ")\n";
      break;
    }
    case Stmt::Feed:
      os << v(s.outs[0]) << " = feed[" << s.keys[0] << "]\n";
      break;
    case Stmt::Fetch:
      os << "fetch " << v(s.ins[0]) << "\n";
      break;
    case Stmt::Copy:
      os << v(s.outs[0]) << " = " << v(s.ins[0]) << "\n";
      break;
    case Stmt::Select:
      os << v(s.outs[0]) << " = " << v(s.ins[0]) << " if flag else "
         << v(s.ins[1]) << "\n";
      break;
    case Stmt::If:
      os << "if p=" << s.pTrue << ":\n";
      dumpBlock(os, s.thenBlock, indent + 1);
      os << pad << "else:\n";
      dumpBlock(os, s.elseBlock, indent + 1);
      break;
    case Stmt::Loop:
      os << "loop[" << s.keys[0] << "] ";
      if (s.trips >= 0)
        os << s.trips << " times:\n";
      else
        os << "0.." << s.maxTrips << " times:\n";
      dumpBlock(os, s.thenBlock, indent + 1);
      break;
    case Stmt::Shuffle:
      os << "in any order:\n";
      dumpBlock(os, s.thenBlock, indent + 1);
      break;
    case Stmt::Break:
      os << "break\n";
      break;
    case Stmt::Return:
      os << "return\n";
      break;
    }
  }
}

} // namespace

std::string Program::dump() const {
  std::ostringstream os;
  os << "# zero-trip loops " << (omitZeroTripLoops ? "leave no markers" : "keep markers") << "\n";
  for (unsigned v = 0; v < numVars; ++v)
    os << "v" << v << " = " << (init[v].isState ? "state[" : "feed[")
       << init[v].key << "]\n";
  dumpBlock(os, body, 0);
  return os.str();
}

Program terra::testing::generateProgram(uint64_t seed,
                                        const GenOptions &options) {
  return Generator(seed, options).run();
}

Trace terra::testing::runProgram(const Program &program, uint64_t seed,
                                 const RunOptions &options, RunInfo *info) {
  return Interpreter(program, seed, options, info).run();
}

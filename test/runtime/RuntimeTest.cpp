//===- RuntimeTest.cpp - Channels, runner, cancellation, stress -----------===//
#include "terra/Dialect/TerraOps.h"
#include "terra/Passes.h"
#include "terra/Runtime/GraphRunner.h"
#include <limits>
#ifdef TERRA_ENABLE_CUDA
#include "terra/Runtime/Cuda.h"
#endif

#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"

#include "llvm/Support/FileSystem.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>

// The graph runtime's buffer entry points and its current run (API.cpp).
extern "C" void *_mlir_memref_to_llvm_aligned_alloc(size_t, size_t);
extern "C" void _mlir_memref_to_llvm_free(void *);
namespace terra::rt::detail {
terra::rt::RunState *&currentRun();
} // namespace terra::rt::detail

using namespace terra::rt;

namespace {

Tensor scalarF32(float v) {
  Tensor t = Tensor::empty(DType::F32, {});
  *static_cast<float *>(t.data) = v;
  return t;
}

Tensor vecF32(std::vector<float> v) {
  Tensor t = Tensor::empty(DType::F32, {int64_t(v.size())});
  std::copy(v.begin(), v.end(), static_cast<float *>(t.data));
  return t;
}

float at(const Tensor &t, int64_t i) {
  return static_cast<const float *>(t.data)[i];
}

//===----------------------------------------------------------------------===//
// Channels
//===----------------------------------------------------------------------===//

TEST(Channels, FeedsAreFifoPerPoint) {
  Channels ch;
  ch.sendFeed(1, scalarF32(1));
  ch.sendFeed(2, scalarF32(20));
  ch.sendFeed(1, scalarF32(2));
  Tensor t;
  ASSERT_TRUE(ch.receiveFeed(1, t));
  EXPECT_EQ(at(t, 0), 1);
  ASSERT_TRUE(ch.receiveFeed(1, t));
  EXPECT_EQ(at(t, 0), 2);
  ASSERT_TRUE(ch.receiveFeed(2, t));
  EXPECT_EQ(at(t, 0), 20);
}

TEST(Channels, FetchInstancesPairUp) {
  Channels ch;
  ch.publishFetch(3, scalarF32(5));
  ch.publishFetch(3, scalarF32(6));
  Tensor t;
  ASSERT_TRUE(ch.waitFetch(3, 2, t));
  EXPECT_EQ(at(t, 0), 6);
  ASSERT_TRUE(ch.waitFetch(3, 1, t));
  EXPECT_EQ(at(t, 0), 5);
  EXPECT_FALSE(ch.waitFetch(3, 0, t));
}

// visitFetches: every (point, instance) in order, the published ones in
// place, one not published yet waited for; a missing one fails the call.
TEST(Channels, VisitFetchesSeesEveryValueInOrderAndWaitsForLateOnes) {
  Channels ch;
  ch.publishFetch(3, scalarF32(5));
  ch.publishFetch(3, scalarF32(6));
  ch.publishFetch(1, scalarF32(7));
  std::thread graph([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ch.publishFetch(2, scalarF32(8)); // the host waits for it
  });
  std::vector<std::pair<size_t, float>> seen;
  auto record = [&](size_t i, const Tensor &t) {
    seen.push_back({i, at(t, 0)});
  };
  ASSERT_TRUE(ch.visitFetches({{3, 2}, {1, 1}, {2, 1}, {3, 1}}, record));
  graph.join();
  std::vector<std::pair<size_t, float>> expected{
      {0, 6}, {1, 7}, {2, 8}, {3, 5}};
  EXPECT_EQ(seen, expected);
  seen.clear();
  EXPECT_FALSE(ch.visitFetches({{1, 1}, {3, 0}}, record)); // instance 0
  ch.close();
  EXPECT_FALSE(ch.visitFetches({{1, 1}, {9, 1}}, record)); // never published
  Channels cancelled;
  cancelled.publishFetch(1, scalarF32(1));
  cancelled.cancel();
  seen.clear();
  EXPECT_FALSE(cancelled.visitFetches({{1, 1}}, record));
  EXPECT_TRUE(seen.empty());
}

extern "C" _Float16 terra_truncsfbf2(float);
extern "C" _Float16 terra_truncdfbf2(double);

static uint16_t bits(_Float16 h) {
  uint16_t b;
  std::memcpy(&b, &h, sizeof b);
  return b;
}

TEST(Runtime, BFloat16TruncationRoundsToNearestEven) {
  // What the JIT calls for f32/f64 -> bf16 on CPUs without AVX512-BF16.
  EXPECT_EQ(bits(terra_truncsfbf2(1.0f)), 0x3f80);
  EXPECT_EQ(bits(terra_truncsfbf2(-2.0f)), 0xc000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even (1).
  EXPECT_EQ(bits(terra_truncsfbf2(1.00390625f)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to even.
  EXPECT_EQ(bits(terra_truncsfbf2(1.01171875f)), 0x3f82);
  EXPECT_EQ(bits(terra_truncsfbf2(1.0f + 0x1p-8f + 0x1p-20f)), 0x3f81);
  EXPECT_EQ(bits(terra_truncsfbf2(std::numeric_limits<float>::infinity())),
            0x7f80);
  EXPECT_EQ(bits(terra_truncsfbf2(std::nanf(""))) & 0x7fc0, 0x7fc0);
  // A double just above a bf16 tie rounds up, though its float is the tie.
  EXPECT_EQ(bits(terra_truncdfbf2(1.0 + 0x1p-8 + 0x1p-40)), 0x3f81);
  EXPECT_EQ(bits(terra_truncdfbf2(1.0 + 0x1p-8 - 0x1p-40)), 0x3f80);
  EXPECT_EQ(bits(terra_truncdfbf2(-(1.0 + 0x1p-8 + 0x1p-40))), 0xbf81);
  EXPECT_EQ(bits(terra_truncdfbf2(1.00390625)), 0x3f80);
}

TEST(Runtime, AGraphBufferFreedTwiceInARowIsFreedOnce) {
  // -terra-split-deallocs frees each memref of a retain-free dealloc on its
  // own: two that alias free their buffer twice in a row, with nothing
  // allocated in between. The second free must do nothing (the caching
  // allocator would otherwise hand the block out twice).
  auto run = std::make_shared<RunState>();
  RunState *&current = terra::rt::detail::currentRun();
  RunState *saved = current;
  current = run.get();
  void *p = _mlir_memref_to_llvm_aligned_alloc(64, 4096);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(run->buffers.size(), 1u);
  _mlir_memref_to_llvm_free(p);
  _mlir_memref_to_llvm_free(p);
  EXPECT_TRUE(run->buffers.empty());
  void *a = _mlir_memref_to_llvm_aligned_alloc(64, 4096);
  void *b = _mlir_memref_to_llvm_aligned_alloc(64, 4096);
  EXPECT_NE(a, b);
  EXPECT_EQ(run->buffers.size(), 2u);
  _mlir_memref_to_llvm_free(a);
  _mlir_memref_to_llvm_free(b);
  EXPECT_TRUE(run->buffers.empty());
  current = saved;
}

TEST(Channels, CommitIsReadyExactlyOnceTheHostHasFinished) {
  // terra_rt_commit_ready never waits: before the host finished, the graph
  // writes the new state into its own buffers (the host copies them).
  Channels ch;
  EXPECT_EQ(ch.commitDecision(), 0);
  ch.publishFetch(1, scalarF32(1));
  EXPECT_EQ(ch.commitDecision(), 0);
  ch.finishHost();
  EXPECT_EQ(ch.commitDecision(), 1);
  ch.cancel();
  EXPECT_EQ(ch.commitDecision(), -1);
}

TEST(Channels, ACommitIsNotReadyAfterAFeedOfAnotherType) {
  // A feed the graph's shape guard will reject: no state may be written
  // in place before that guard fails the run.
  std::map<int64_t, FeedType> types{{3, {DType::F32, {-1, 2}}}};
  Channels ok, bad, badRank;
  for (Channels *ch : {&ok, &bad, &badRank})
    ch->setFeedTypes(&types);
  ok.sendFeed(3, Tensor::empty(DType::F32, {5, 2}));
  ok.sendFeed(9, Tensor::empty(DType::I64, {1})); // a point not listed
  bad.sendFeed(3, Tensor::empty(DType::F32, {5, 3}));
  badRank.sendFeed(3, Tensor::empty(DType::F32, {10}));
  for (Channels *ch : {&ok, &bad, &badRank})
    ch->finishHost();
  EXPECT_EQ(ok.commitDecision(), 1);
  EXPECT_EQ(bad.commitDecision(), 0);
  EXPECT_EQ(badRank.commitDecision(), 0);
}

TEST(Channels, FetchReadyIsTrueExactlyWhenAWaitWouldNotBlock) {
  Channels ch;
  EXPECT_FALSE(ch.fetchReady(3, 1));
  ch.publishFetch(3, scalarF32(5));
  EXPECT_TRUE(ch.fetchReady(3, 1));
  EXPECT_FALSE(ch.fetchReady(3, 2));
  EXPECT_FALSE(ch.fetchReady(4, 1));
  EXPECT_TRUE(ch.fetchReady(3, 0)); // waitFetch fails at once
  ch.close();                       // the run ended: every wait returns
  EXPECT_TRUE(ch.fetchReady(3, 2));
  EXPECT_TRUE(ch.fetchReady(4, 1));
  Channels cancelled;
  cancelled.cancel();
  EXPECT_TRUE(cancelled.fetchReady(1, 1));
}

TEST(Channels, PublishedListsEveryValueByPointThenInstance) {
  Channels ch;
  ch.publishFetch(3, scalarF32(30));
  ch.publishFetch(1, scalarF32(10));
  ch.publishFetch(3, scalarF32(31));
  auto all = ch.published();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].point, 1);
  EXPECT_EQ(all[0].instance, 1u);
  EXPECT_EQ(all[1].point, 3);
  EXPECT_EQ(all[1].instance, 1u);
  EXPECT_EQ(all[2].instance, 2u);
  EXPECT_EQ(at(all[2].value, 0), 31);
}

TEST(Channels, WaitBlocksUntilSent) {
  Channels ch;
  std::atomic<bool> received{false};
  std::thread graph([&] {
    uint32_t index;
    ASSERT_TRUE(ch.receiveCase(9, index));
    EXPECT_EQ(index, 1u);
    received = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(received);
  ch.sendCase(9, 1);
  graph.join();
  EXPECT_TRUE(received);
  EXPECT_GT(ch.graphStallSeconds(), 0.0);
}

// A send wakes the graph only for the value it waits for; two graph threads
// waiting on different points of the same kind each get theirs, whatever
// the order of the sends (other points and kinds first), and a cancel
// wakes them all.
TEST(Channels, WaitersGetTheirOwnPointsWhateverTheOrder) {
  Channels ch;
  std::atomic<int> got{0};
  std::thread a([&] {
    uint32_t index;
    ASSERT_TRUE(ch.receiveCase(7, index));
    EXPECT_EQ(index, 3u);
    ++got;
  });
  std::thread b([&] {
    Tensor t;
    ASSERT_TRUE(ch.receiveFeed(8, t));
    EXPECT_EQ(at(t, 0), 80);
    ++got;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ch.sendFeed(9, scalarF32(90)); // nobody waits for it yet
  ch.sendLoop(7, true);          // same point, another kind
  ch.sendCase(6, 1);
  EXPECT_EQ(got, 0);
  ch.sendFeed(8, scalarF32(80));
  ch.sendCase(7, 3);
  a.join();
  b.join();
  EXPECT_EQ(got, 2);
  std::thread c([&] {
    uint32_t index;
    EXPECT_FALSE(ch.receiveCase(5, index)); // never sent: the cancel ends it
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ch.cancel();
  c.join();
}

// Serialized execution: the host waits until the graph needs more input.
TEST(Channels, WaitGraphIdleReturnsWhenTheGraphBlocks) {
  Channels ch;
  std::atomic<bool> idleSeen{false};
  std::thread host([&] {
    ch.waitGraphIdle();
    idleSeen = true;
    ch.sendFeed(1, Tensor::empty(DType::F32, {1}));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(idleSeen); // the graph has not blocked yet
  Tensor t;
  EXPECT_TRUE(ch.receiveFeed(1, t)); // blocks: the host wakes and feeds
  host.join();
  EXPECT_TRUE(idleSeen);
  // A closed run never blocks the host.
  ch.close();
  ch.waitGraphIdle();
}

TEST(Channels, FinishedHostFailsWaitsForValuesItNeverSent) {
  Channels ch;
  ch.sendCase(4, 1);
  std::thread graph([&] {
    uint32_t index = 0;
    EXPECT_TRUE(ch.receiveCase(4, index)); // sent before the end: delivered
    EXPECT_EQ(index, 1u);
    bool next;
    EXPECT_FALSE(ch.receiveLoop(5, next)); // never sent: fails, no hang
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ch.finishHost();
  graph.join();
  EXPECT_TRUE(ch.hostFinished());
  EXPECT_FALSE(ch.isCancelled());
  Tensor t;
  EXPECT_FALSE(ch.receiveFeed(6, t));
}

TEST(Channels, CancelWakesEveryWaiter) {
  Channels ch;
  std::vector<std::thread> waiters;
  std::atomic<int> woken{0};
  waiters.emplace_back([&] {
    Tensor t;
    EXPECT_FALSE(ch.receiveFeed(1, t));
    ++woken;
  });
  waiters.emplace_back([&] {
    bool b;
    EXPECT_FALSE(ch.receiveLoop(2, b));
    ++woken;
  });
  waiters.emplace_back([&] {
    Tensor t;
    EXPECT_FALSE(ch.waitFetch(3, 1, t));
    ++woken;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ch.cancel();
  for (auto &w : waiters)
    w.join();
  EXPECT_EQ(woken, 3);
  // Later waits fail at once.
  uint32_t i;
  EXPECT_FALSE(ch.receiveCase(1, i));
}

TEST(Channels, CloseReleasesHostWaitingForMissingFetch) {
  Channels ch;
  std::thread host([&] {
    Tensor t;
    EXPECT_FALSE(ch.waitFetch(4, 1, t));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ch.close();
  host.join();
}

// Waits spin before they block (Channels::setSpin). These set a spin far
// longer than the tests take, so each wait below is still spinning when
// the value or flag it waits for arrives: a wait that only noticed it once
// blocked would take the whole spin (10 s) to return.
class SpinningChannels : public ::testing::Test {
protected:
  void SetUp() override {
    saved = Channels::spin();
    Channels::setSpin(std::chrono::seconds(10));
  }
  void TearDown() override { Channels::setSpin(saved); }
  static double secondsSince(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
        .count();
  }
  std::chrono::nanoseconds saved{0};
};

TEST_F(SpinningChannels, WaitsTakeValuesSentWhileTheySpin) {
  Channels ch;
  auto start = std::chrono::steady_clock::now();
  std::thread graph([&] {
    uint32_t index = 0;
    ASSERT_TRUE(ch.receiveCase(9, index));
    EXPECT_EQ(index, 2u);
    ch.publishFetch(4, scalarF32(7));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ch.sendCase(8, 1); // another point first: the graph spins on
  ch.sendCase(9, 2);
  Tensor t;
  ASSERT_TRUE(ch.waitFetch(4, 1, t)); // the host spins for the fetch
  EXPECT_EQ(at(t, 0), 7);
  graph.join();
  EXPECT_LT(secondsSince(start), 5.0);
  EXPECT_GT(ch.graphStallSeconds(), 0.0);
}

TEST_F(SpinningChannels, CancelAndFinishEndSpinningWaits) {
  Channels ch;
  auto start = std::chrono::steady_clock::now();
  std::thread graph([&] {
    Tensor t;
    EXPECT_FALSE(ch.receiveFeed(1, t)); // never sent: finishHost ends it
  });
  std::thread host([&] {
    Tensor t;
    EXPECT_FALSE(ch.waitFetch(2, 1, t)); // never published: cancel ends it
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ch.finishHost();
  graph.join();
  ch.cancel();
  host.join();
  EXPECT_LT(secondsSince(start), 5.0);
}

TEST_F(SpinningChannels, WaitGraphIdleSeesASpinningGraph) {
  Channels ch;
  auto start = std::chrono::steady_clock::now();
  std::thread graph([&] {
    Tensor t;
    EXPECT_TRUE(ch.receiveFeed(1, t));
  });
  ch.waitGraphIdle(); // the graph waits (spinning): serialized mode feeds
  ch.sendFeed(1, scalarF32(1));
  graph.join();
  EXPECT_LT(secondsSince(start), 5.0);
}

TEST_F(SpinningChannels, AWaitPastItsSpinBlocksAndIsWoken) {
  Channels::setSpin(std::chrono::microseconds(100));
  Channels ch;
  std::thread graph([&] {
    uint32_t index = 0;
    ASSERT_TRUE(ch.receiveCase(3, index));
    EXPECT_EQ(index, 5u);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50)); // blocked now
  ch.sendCase(3, 5);
  graph.join();
}

//===----------------------------------------------------------------------===//
// Compiled graphs
//===----------------------------------------------------------------------===//

class GraphTest : public ::testing::Test {
protected:
  /// Parses `text` into `module` and lowers it: convert-to-linalg,
  /// lower-graph (unless `pipeline` adds its own), then `pipeline`.
  void lower(const std::string &text,
             const std::function<void(mlir::PassManager &)> &pipeline,
             bool lowerGraph = true) {
    mlir::DialectRegistry registry;
    mlir::registerAllDialects(registry);
    mlir::registerAllExtensions(registry);
    registry.insert<terra::TerraDialect>();
    // gpu-module-to-binary: the NVVM target and the GPU translations.
    mlir::registerAllGPUToLLVMIRTranslations(registry);
    module = {}; // before the context it lives in (a second compile)
    ctx = std::make_unique<mlir::MLIRContext>(registry);
    ctx->loadAllAvailableDialects();
    module = mlir::parseSourceString<mlir::ModuleOp>(text, ctx.get());
    EXPECT_TRUE(module);
    mlir::PassManager pm(ctx.get());
    pm.addPass(terra::createTerraConvertToLinalg());
    if (lowerGraph)
      pm.addPass(terra::createTerraLowerGraph());
    pipeline(pm);
    EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
  }
  std::unique_ptr<CompiledGraph> compile(const std::string &text,
                                         const std::string &cacheDir = "") {
    lower(text,
          [](mlir::PassManager &pm) { terra::buildCPULoweringPipeline(pm); });
    std::string error;
    auto g = CompiledGraph::compile(*module, "g", cacheDir, error);
    EXPECT_TRUE(g) << error;
    return g;
  }
  /// Through the front end's CPU pipeline (feeds and state as row-major
  /// buffers, read in place).
  std::unique_ptr<CompiledGraph> compileContiguous(const std::string &text) {
    lower(
        text, [](mlir::PassManager &pm) { terra::buildCPUGraphPipeline(pm); },
        /*lowerGraph=*/false);
    std::string error;
    auto g = CompiledGraph::compile(*module, "g", "", error);
    EXPECT_TRUE(g) << error;
    return g;
  }
  /// Through the front end's gpu-loops pipeline: the GPU pipeline's
  /// kernels as loops on the CPU.
  std::unique_ptr<CompiledGraph> compileGPULoops(const std::string &text) {
    lower(
        text,
        [](mlir::PassManager &pm) {
          terra::buildGraphPipeline(pm, "gpu-loops", {});
        },
        /*lowerGraph=*/false);
    std::string error;
    auto g = CompiledGraph::compile(*module, "g", "", error);
    EXPECT_TRUE(g) << error;
    return g;
  }
  /// Through the GPU pipeline (kernels for sm_90 as PTX, cuBLAS).
  std::unique_ptr<CompiledGraph> compileGPU(const std::string &text,
                                            std::string &error) {
    lower(text, [](mlir::PassManager &pm) {
      terra::buildGPULoweringPipeline(pm, terra::GPUPipelineOptions());
    });
    return CompiledGraph::compile(*module, "g", "", error);
  }
  std::unique_ptr<mlir::MLIRContext> ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

// feed 1 -> neg -> fetch 0; switch on case 2; loop 3 doubling; fetch 1;
// host op 0 in the loop's exit path.
const char *kGraph = R"mlir(
module {
  terra.graph @g {
    %x = terra.feed 1 : tensor<4xf32>
    %n = terra.op "aten.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    terra.fetch 0 %n : tensor<4xf32>
    %c = terra.case_select 2 cases 2
    %z = scf.index_switch %c -> tensor<4xf32>
    case 0 {
      %e = terra.op "aten.exp"(%n) : (tensor<4xf32>) -> tensor<4xf32>
      scf.yield %e : tensor<4xf32>
    }
    default {
      scf.yield %n : tensor<4xf32>
    }
    %l = scf.while (%a = %z) : (tensor<4xf32>) -> tensor<4xf32> {
      %k = terra.loop_cond 3
      scf.condition(%k) %a : tensor<4xf32>
    } do {
    ^bb0(%a: tensor<4xf32>):
      %d = terra.op "aten.add.Tensor"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
      scf.yield %d : tensor<4xf32>
    }
    %h = terra.op "test.host_square"(%l) : (tensor<4xf32>) -> tensor<4xf32>
    terra.fetch 1 %h : tensor<4xf32>
  }
}
)mlir";

HostOpFn squareHostOp(std::atomic<int> *calls = nullptr,
                      std::atomic<bool> *block = nullptr) {
  return [=](int64_t id, const std::vector<Tensor> &in,
             std::vector<Tensor> &out, std::string &err) {
    if (calls)
      ++*calls;
    while (block && *block)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (id != 0 || in.size() != 1) {
      err = "unexpected host op";
      return false;
    }
    Tensor r = Tensor::empty(DType::F32, in[0].sizes);
    for (int64_t i = 0; i < r.numel(); ++i)
      static_cast<float *>(r.data)[i] = at(in[0], i) * at(in[0], i);
    out.push_back(r);
    return true;
  };
}

TEST_F(GraphTest, RunsOneIterationWithAllChannels) {
  auto g = compile(kGraph);
  ASSERT_TRUE(g);
  ASSERT_EQ(g->hostOps().size(), 1u);
  EXPECT_EQ(g->hostOps()[0].name, "test.host_square");
  GraphRunner runner(*g);
  auto run = std::make_shared<RunState>();
  run->hostOps = squareHostOp();
  runner.start(run);
  // The host sends while the graph runs.
  run->channels.sendFeed(1, vecF32({1, 2, 3, 4}));
  Tensor neg;
  ASSERT_TRUE(run->channels.waitFetch(0, 1, neg));
  EXPECT_EQ(at(neg, 3), -4);
  run->channels.sendCase(2, 1); // pass-through case
  run->channels.sendLoop(3, true);
  run->channels.sendLoop(3, true);
  run->channels.sendLoop(3, false);
  auto done = runner.wait();
  ASSERT_EQ(done->status, RunState::Status::Ok) << done->error;
  Tensor out;
  ASSERT_TRUE(done->channels.waitFetch(1, 1, out));
  // (-x * 4)^2
  EXPECT_FLOAT_EQ(at(out, 1), 64);
  EXPECT_TRUE(done->buffers.empty());
}

// Several loop nests (each outlined into a function of its own), compiled
// on one and on three threads (ParallelCompile.cpp), then loaded from the
// object cache: every build computes the same values.
const char *kLoopsGraph = R"mlir(
module {
  terra.graph @g {
    %x = terra.feed 1 : tensor<64xf32>
    %a = terra.op "aten.exp"(%x) : (tensor<64xf32>) -> tensor<64xf32>
    %b = terra.op "aten.add.Tensor"(%a, %x) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
    terra.fetch 0 %b : tensor<64xf32>
    %t = terra.op "aten.tanh"(%x) : (tensor<64xf32>) -> tensor<64xf32>
    %c = terra.op "aten.mul.Tensor"(%t, %b) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
    terra.fetch 1 %c : tensor<64xf32>
  }
}
)mlir";

TEST_F(GraphTest, ParallelCompileAndCacheGiveTheSameResults) {
  llvm::SmallString<128> cacheDir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("terra-test-cache", cacheDir));
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i)
    x[i] = 0.05f * float(i - 32);
  // One thread without a cache; three threads, storing the objects; the
  // stored objects read back.
  struct Build {
    const char *threads;
    bool useCache, cached;
  };
  for (Build build : {Build{"1", false, false}, Build{"3", true, false},
                      Build{"3", true, true}}) {
    ::setenv("TERRA_COMPILE_THREADS", build.threads, 1);
    auto g = compile(kLoopsGraph, build.useCache ? cacheDir.str().str() : "");
    ::unsetenv("TERRA_COMPILE_THREADS");
    ASSERT_TRUE(g);
    EXPECT_EQ(g->loadedFromCache(), build.cached);
    GraphRunner runner(*g);
    auto run = std::make_shared<RunState>();
    runner.start(run);
    run->channels.sendFeed(1, vecF32(x));
    auto done = runner.wait();
    ASSERT_EQ(done->status, RunState::Status::Ok) << done->error;
    Tensor b, c;
    ASSERT_TRUE(done->channels.waitFetch(0, 1, b));
    ASSERT_TRUE(done->channels.waitFetch(1, 1, c));
    for (int i = 0; i < 64; ++i) {
      float eb = std::exp(x[i]) + x[i];
      EXPECT_NEAR(at(b, i), eb, 1e-5f * std::abs(eb) + 1e-6f) << i;
      EXPECT_NEAR(at(c, i), std::tanh(x[i]) * eb, 1e-5f * std::abs(eb) + 1e-6f) << i;
    }
  }
  llvm::sys::fs::remove_directories(cacheDir);
}

// The runner spins while it idles, and its host while it waits for a run's
// end (SpinWait.h). With a spin far longer than the test, a start, a
// retire and the runner's destruction each arrive while someone spins: one
// that did not move the runner's `events` would be seen only when the spin
// ran out (10 s).
TEST_F(GraphTest, ASpinningRunnerSeesStartsRetiresAndItsEnd) {
  struct SpinFor {
    std::chrono::nanoseconds saved = Channels::spin();
    SpinFor() { Channels::setSpin(std::chrono::seconds(10)); }
    ~SpinFor() { Channels::setSpin(saved); }
  } spinning;
  auto secondsSince = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t)
        .count();
  };
  auto g = compile(kLoopsGraph);
  ASSERT_TRUE(g);
  auto begin = std::chrono::steady_clock::now();
  {
    GraphRunner runner(*g);
    for (int i = 0; i < 3; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5)); // idle: spins
      auto run = std::make_shared<RunState>();
      runner.start(run);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      run->channels.sendFeed(1, vecF32(std::vector<float>(64, 1.0f)));
      auto done = runner.wait(); // spins until the run ends
      ASSERT_EQ(done->status, RunState::Status::Ok) << done->error;
      std::weak_ptr<RunState> freed = done;
      run.reset();
      runner.retire(std::move(done)); // freed by the spinning runner
      while (!freed.expired() && secondsSince(begin) < 5.0)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      EXPECT_TRUE(freed.expired()) << "run " << i << " not freed";
    }
  } // the destructor ends the runner's idle spin
  EXPECT_LT(secondsSince(begin), 5.0);
}

TEST_F(GraphTest, CancelWhileWaitingForAFeed) {
  auto g = compile(kGraph);
  GraphRunner runner(*g);
  auto run = std::make_shared<RunState>();
  runner.start(run);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  runner.cancel();
  auto done = runner.wait();
  EXPECT_EQ(done->status, RunState::Status::Cancelled);
  EXPECT_TRUE(done->buffers.empty());
}

TEST_F(GraphTest, CancelWhileWaitingForACaseSelect) {
  auto g = compile(kGraph);
  GraphRunner runner(*g);
  auto run = std::make_shared<RunState>();
  run->channels.sendFeed(1, vecF32({1, 2, 3, 4}));
  runner.start(run);
  Tensor t;
  ASSERT_TRUE(run->channels.waitFetch(0, 1, t)); // the graph is past the feed
  runner.cancel();
  auto done = runner.wait();
  EXPECT_EQ(done->status, RunState::Status::Cancelled);
  EXPECT_TRUE(done->buffers.empty());
}

TEST_F(GraphTest, CancelWhileWaitingForALoopCondition) {
  auto g = compile(kGraph);
  GraphRunner runner(*g);
  auto run = std::make_shared<RunState>();
  run->channels.sendFeed(1, vecF32({1, 2, 3, 4}));
  run->channels.sendCase(2, 0);
  run->channels.sendLoop(3, true); // one iteration, then it waits
  runner.start(run);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  runner.cancel();
  auto done = runner.wait();
  EXPECT_EQ(done->status, RunState::Status::Cancelled);
  EXPECT_TRUE(done->buffers.empty());
}

TEST_F(GraphTest, WaitForASignalTheFinishedHostNeverSentIsAnError) {
  auto g = compile(kGraph);
  GraphRunner runner(*g);
  auto run = std::make_shared<RunState>();
  run->channels.sendFeed(1, vecF32({1, 2, 3, 4}));
  run->channels.sendCase(2, 0);
  run->channels.sendLoop(3, true); // one iteration, then it would wait
  runner.start(run);
  run->channels.finishHost(); // ... for a condition that never comes
  auto done = runner.wait();
  EXPECT_EQ(done->status, RunState::Status::Error);
  EXPECT_NE(done->error.find("loop condition 3"), std::string::npos)
      << done->error;
  EXPECT_TRUE(done->buffers.empty());
}

TEST_F(GraphTest, CancelDuringAHostCallback) {
  auto g = compile(kGraph);
  GraphRunner runner(*g);
  std::atomic<int> calls{0};
  std::atomic<bool> block{true};
  auto run = std::make_shared<RunState>();
  run->hostOps = squareHostOp(&calls, &block);
  run->channels.sendFeed(1, vecF32({1, 2, 3, 4}));
  run->channels.sendCase(2, 0);
  run->channels.sendLoop(3, false);
  runner.start(run);
  while (calls == 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  runner.cancel(); // the callback itself finishes; the run still ends cleanly
  block = false;
  auto done = runner.wait();
  EXPECT_NE(done->status, RunState::Status::Pending);
  EXPECT_TRUE(done->buffers.empty());
}

TEST_F(GraphTest, MissingHostExecutorIsAnErrorNotACrash) {
  auto g = compile(kGraph);
  GraphRunner runner(*g);
  auto run = std::make_shared<RunState>();
  run->channels.sendFeed(1, vecF32({1, 2, 3, 4}));
  run->channels.sendCase(2, 1);
  run->channels.sendLoop(3, false);
  runner.start(run);
  auto done = runner.wait();
  EXPECT_EQ(done->status, RunState::Status::Error);
  EXPECT_NE(done->error.find("host executor"), std::string::npos);
}

TEST_F(GraphTest, WrongFeedDtypeIsReported) {
  const char *text = R"mlir(
module {
  terra.graph @g {
    %x = terra.feed 1 : tensor<2xf32>
    terra.fetch 0 %x : tensor<2xf32>
  }
})mlir";
  auto g = compile(text);
  GraphRunner runner(*g);
  auto run = std::make_shared<RunState>();
  Tensor bad = Tensor::empty(DType::I64, {2});
  run->channels.sendFeed(1, bad);
  runner.start(run);
  auto done = runner.wait();
  EXPECT_EQ(done->status, RunState::Status::Error);
  EXPECT_NE(done->error.find("feed 1: expected f32 of rank 1, got i64 of rank 1"),
            std::string::npos)
      << done->error;
}

// torch.uint8 values cross every boundary unchanged: a feed, a host op's
// argument and result (cuDNN's batch-norm reserve on CUDA), and fetches.
TEST_F(GraphTest, Uint8ValuesCrossFeedsHostOpsAndFetches) {
  const char *text = R"mlir(
module {
  terra.graph @g {
    %x = terra.feed 1 : tensor<3xui8>
    %h = terra.op "test.host_invert"(%x) : (tensor<3xui8>) -> tensor<3xui8>
    terra.fetch 0 %h : tensor<3xui8>
    terra.fetch 1 %x : tensor<3xui8>
  }
})mlir";
  auto g = compile(text);
  ASSERT_TRUE(g);
  GraphRunner runner(*g);
  auto run = std::make_shared<RunState>();
  run->hostOps = [](int64_t, const std::vector<Tensor> &in,
                    std::vector<Tensor> &out, std::string &err) {
    if (in.size() != 1 || in[0].dtype != DType::U8) {
      err = "expected one ui8 argument";
      return false;
    }
    Tensor r = Tensor::empty(DType::U8, in[0].sizes);
    for (int64_t i = 0; i < r.numel(); ++i)
      static_cast<uint8_t *>(r.data)[i] =
          255 - static_cast<const uint8_t *>(in[0].data)[i];
    out.push_back(r);
    return true;
  };
  Tensor x = Tensor::empty(DType::U8, {3});
  const uint8_t values[] = {0, 200, 255};
  std::memcpy(x.data, values, 3);
  run->channels.sendFeed(1, x);
  runner.start(run);
  auto done = runner.wait();
  ASSERT_EQ(done->status, RunState::Status::Ok) << done->error;
  Tensor inverted, same;
  ASSERT_TRUE(done->channels.waitFetch(0, 1, inverted));
  ASSERT_TRUE(done->channels.waitFetch(1, 1, same));
  ASSERT_EQ(inverted.dtype, DType::U8);
  EXPECT_EQ(static_cast<uint8_t *>(inverted.data)[1], 55);
  EXPECT_EQ(static_cast<uint8_t *>(same.data)[1], 200);
  DType parsed;
  ASSERT_TRUE(parseDType("ui8", parsed));
  EXPECT_EQ(parsed, DType::U8);
  EXPECT_STREQ(dtypeName(DType::U8), "ui8");
}

TEST_F(GraphTest, FailedRuntimeGuardEndsTheRunWithItsMessage) {
  const char *text = R"mlir(
module {
  terra.graph @g {
    %a = terra.feed 1 : tensor<2x?xf32>
    %b = terra.feed 2 : tensor<?x3xf32>
    %r = terra.op "aten.mm"(%a, %b) : (tensor<2x?xf32>, tensor<?x3xf32>) -> tensor<2x3xf32>
    terra.fetch 0 %r : tensor<2x3xf32>
  }
})mlir";
  auto g = compile(text);
  GraphRunner runner(*g);
  auto run = std::make_shared<RunState>();
  run->channels.sendFeed(1, Tensor::empty(DType::F32, {2, 4}));
  run->channels.sendFeed(2, Tensor::empty(DType::F32, {5, 3}));
  runner.start(run);
  auto done = runner.wait();
  EXPECT_EQ(done->status, RunState::Status::Error);
  EXPECT_EQ(done->error, "mismatched contraction dimensions");
  EXPECT_TRUE(done->buffers.empty());
}

//===----------------------------------------------------------------------===//
// Zero-copy fetches
//===----------------------------------------------------------------------===//

// %n is fetched twice (points 0 and 2) and read again by the graph after
// being fetched; %x, a feed, is fetched as is (point 3).
const char *kFetchGraph = R"mlir(
module {
  terra.graph @g {
    %x = terra.feed 1 : tensor<4xf32>
    %n = terra.op "aten.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    terra.fetch 0 %n : tensor<4xf32>
    terra.fetch 2 %n : tensor<4xf32>
    terra.fetch 3 %x : tensor<4xf32>
    %c = terra.case_select 4 cases 2
    %e = terra.op "aten.exp"(%n) : (tensor<4xf32>) -> tensor<4xf32>
    terra.fetch 1 %e : tensor<4xf32>
  }
}
)mlir";

TEST_F(GraphTest, FetchesOfGraphBuffersAreNotCopied) {
  auto g = compile(kFetchGraph);
  ASSERT_TRUE(g);
  GraphRunner runner(*g);
  auto run = std::make_shared<RunState>();
  run->verifyFetches = true;
  Tensor feed = vecF32({1, 2, 3, 4});
  run->channels.sendFeed(1, feed);
  runner.start(run);
  Tensor a, b, fedBack;
  ASSERT_TRUE(run->channels.waitFetch(0, 1, a));
  ASSERT_TRUE(run->channels.waitFetch(2, 1, b));
  ASSERT_TRUE(run->channels.waitFetch(3, 1, fedBack));
  // One buffer, published twice: no copy was made, and the fetched tensors
  // share the graph's ownership of it.
  EXPECT_EQ(a.data, b.data);
  ASSERT_TRUE(a.owner);
  EXPECT_EQ(a.owner.get(), b.owner.get());
  EXPECT_EQ(at(a, 2), -3);
  // A feed is host memory: its fetch is a copy, never an alias.
  EXPECT_NE(fedBack.data, feed.data);
  EXPECT_EQ(at(fedBack, 3), 4);
  run->channels.sendCase(4, 0);
  auto done = runner.wait();
  ASSERT_EQ(done->status, RunState::Status::Ok) << done->error;
  Tensor e;
  ASSERT_TRUE(done->channels.waitFetch(1, 1, e));
  EXPECT_FLOAT_EQ(at(e, 0), std::exp(-1.0f));
  EXPECT_TRUE(done->buffers.empty());
  EXPECT_TRUE(done->published.empty());
  // The run and everything else referring to it are gone; the fetched
  // buffer is still valid and unchanged (ASan checks the reads).
  done.reset();
  run.reset();
  EXPECT_EQ(a.data, b.data);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(at(a, i), -(i + 1.0f));
  // Another run does not reuse the memory while a fetched tensor holds it.
  auto run2 = std::make_shared<RunState>();
  run2->channels.sendFeed(1, vecF32({5, 6, 7, 8}));
  run2->channels.sendCase(4, 1);
  runner.start(run2);
  ASSERT_EQ(runner.wait()->status, RunState::Status::Ok);
  Tensor again;
  ASSERT_TRUE(run2->channels.waitFetch(0, 1, again));
  EXPECT_NE(again.data, a.data);
  EXPECT_EQ(at(again, 0), -5);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(at(a, i), -(i + 1.0f));
}

// Memory the host must not read directly, standing in for GPU device
// memory (RunState::memory with toDevice/toHost): it tracks every block and
// counts the copies in and out; `failCopies` makes copies out fail.
struct FakeDevice {
  static std::mutex mu;
  static std::set<void *> live;
  static int copiesIn, copiesOut, copiesOnDevice, allocsBeforeError;
  static std::string pendingError;
  static bool failCopies;
  static void *alloc(size_t n, size_t) {
    void *p = std::malloc(n);
    std::lock_guard<std::mutex> lock(mu);
    live.insert(p);
    if (allocsBeforeError > 0 && --allocsBeforeError == 0)
      pendingError = "mgpuLaunchKernel: an illegal memory access";
    return p;
  }
  /// The device's error since the last call (RunState::memory.deviceError);
  /// `allocsBeforeError` allocations in, one appears, as a failed kernel's.
  static std::string deviceError() {
    std::lock_guard<std::mutex> lock(mu);
    return std::exchange(pendingError, std::string());
  }
  static void release(void *p) {
    {
      std::lock_guard<std::mutex> lock(mu);
      EXPECT_EQ(live.erase(p), 1u) << "not a device block";
    }
    std::free(p);
  }
  static bool in(void *dst, const void *src, size_t n) {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(live.count(dst)) << "copy in to host memory";
    ++copiesIn;
    std::memcpy(dst, src, n);
    return true;
  }
  static bool out(void *dst, const void *src, size_t n) {
    std::lock_guard<std::mutex> lock(mu);
    if (failCopies)
      return false;
    ++copiesOut;
    std::memcpy(dst, src, n);
    return true;
  }
  static bool isDevice(const void *p) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = live.upper_bound(const_cast<void *>(p));
    return it != live.begin() && *std::prev(it) == p;
  }
  /// Whether tensor `t` views a device block (a fetch's owner is its block).
  static bool onDevice(const Tensor &t) {
    return isDevice(t.data) || isDevice(t.owner.get());
  }
  static bool onDevice(void *dst, const void *src, size_t n) {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_TRUE(live.count(dst)) << "copy on the device to host memory";
    ++copiesOnDevice;
    std::memcpy(dst, src, n);
    return true;
  }
  static RunState::BufferMemory memory() {
    live.clear();
    copiesIn = copiesOut = copiesOnDevice = allocsBeforeError = 0;
    pendingError.clear();
    failCopies = false;
    return {alloc, release, true, in, out};
  }
  /// The front end's memory on device="cuda": inputs are device tensors.
  static RunState::BufferMemory inputsOnDeviceMemory() {
    RunState::BufferMemory m = memory();
    m.stageInputs = false;
    m.inputsOnDevice = true;
    m.onDevice = onDevice;
    m.deviceError = deviceError;
    return m;
  }
  /// A device tensor holding `values` (as PyTorch's CUDA tensors would be).
  static Tensor tensor(std::vector<float> values) {
    Tensor t = Tensor::empty(DType::F32, {int64_t(values.size())});
    void *p = alloc(values.size() * sizeof(float), 0);
    std::memcpy(p, values.data(), values.size() * sizeof(float));
    t.data = p;
    t.owner = std::shared_ptr<void>(p, release);
    return t;
  }
  /// The same, seen with `sizes` and `strides`.
  static Tensor tensor(std::vector<float> values, std::vector<int64_t> sizes,
                       std::vector<int64_t> strides) {
    Tensor t = tensor(std::move(values));
    t.sizes = std::move(sizes);
    t.strides = std::move(strides);
    return t;
  }
};
std::mutex FakeDevice::mu;
std::set<void *> FakeDevice::live;
int FakeDevice::copiesIn, FakeDevice::copiesOut, FakeDevice::copiesOnDevice,
    FakeDevice::allocsBeforeError;
std::string FakeDevice::pendingError;
bool FakeDevice::failCopies;

/// One run of kGraph in `memory` with `feed`, case 1 and one loop
/// iteration; its host op (squares) notes in `argOnHost` whether every
/// argument it got was host memory.
std::shared_ptr<RunState> runKGraph(const CompiledGraph &g,
                                    RunState::BufferMemory memory, Tensor feed,
                                    bool &argOnHost) {
  GraphRunner runner(g);
  auto run = std::make_shared<RunState>();
  run->memory = memory;
  argOnHost = true;
  run->hostOps = [&argOnHost, square = squareHostOp()](
                     int64_t id, const std::vector<Tensor> &in,
                     std::vector<Tensor> &out, std::string &err) {
    for (const Tensor &t : in)
      argOnHost = argOnHost && !FakeDevice::isDevice(t.data);
    return square(id, in, out, err);
  };
  run->channels.sendFeed(1, std::move(feed));
  run->channels.sendCase(2, 1);
  run->channels.sendLoop(3, true);
  run->channels.sendLoop(3, false);
  runner.start(run);
  return runner.wait();
}

/// One run of `g` in `memory` with `feeds` (point, tensor), to its end;
/// `verifyFetches` turns the check on whatever the environment says.
std::shared_ptr<RunState>
runWithFeeds(const CompiledGraph &g, RunState::BufferMemory memory,
             std::vector<std::pair<int64_t, Tensor>> feeds,
             bool verifyFetches = false) {
  GraphRunner runner(g);
  auto run = std::make_shared<RunState>();
  run->memory = memory;
  if (verifyFetches)
    run->verifyFetches = true;
  for (auto &[point, t] : feeds)
    run->channels.sendFeed(point, std::move(t));
  runner.start(run);
  return runner.wait();
}

TEST_F(GraphTest, DeviceMemoryRunCopiesEveryValueInAndOut) {
  auto g = compile(kGraph);
  ASSERT_TRUE(g);
  bool argOnHost;
  auto done =
      runKGraph(*g, FakeDevice::memory(), vecF32({1, 2, 3, 4}), argOnHost);
  ASSERT_EQ(done->status, RunState::Status::Ok) << done->error;
  Tensor neg, out;
  ASSERT_TRUE(done->channels.waitFetch(0, 1, neg));
  ASSERT_TRUE(done->channels.waitFetch(1, 1, out));
  EXPECT_EQ(at(neg, 3), -4);
  EXPECT_FLOAT_EQ(at(out, 1), 16); // (-2 * 2)^2
  // Fetches and the host op's argument are host copies; the feed and the
  // host op's result were copied in.
  EXPECT_TRUE(argOnHost);
  EXPECT_FALSE(FakeDevice::isDevice(neg.data));
  EXPECT_FALSE(FakeDevice::isDevice(out.data));
  EXPECT_EQ(FakeDevice::copiesIn, 2);
  EXPECT_EQ(FakeDevice::copiesOut, 3);
  // Every device block went back, fetched values included (they are copies).
  EXPECT_TRUE(FakeDevice::live.empty());
  EXPECT_TRUE(done->buffers.empty());
}

// device="cuda" in the front end: feeds are device memory read in place,
// fetches stay on the device (a buffer of the run as is, a feed copied on
// the device), host-op arguments are copied out and their results in.
TEST_F(GraphTest, InputsOnDeviceAreReadInPlaceAndFetchesStayOnTheDevice) {
  auto g = compile(kGraph);
  ASSERT_TRUE(g);
  RunState::BufferMemory memory = FakeDevice::inputsOnDeviceMemory();
  bool argOnHost;
  auto done =
      runKGraph(*g, memory, FakeDevice::tensor({1, 2, 3, 4}), argOnHost);
  ASSERT_EQ(done->status, RunState::Status::Ok) << done->error;
  {
    Tensor neg, out;
    ASSERT_TRUE(done->channels.waitFetch(0, 1, neg));
    ASSERT_TRUE(done->channels.waitFetch(1, 1, out));
    EXPECT_TRUE(FakeDevice::onDevice(neg));
    EXPECT_TRUE(FakeDevice::onDevice(out));
    EXPECT_EQ(at(neg, 3), -4);
    EXPECT_FLOAT_EQ(at(out, 1), 16);
    EXPECT_TRUE(argOnHost);
    // Only the host op's result was copied in, only its argument out.
    EXPECT_EQ(FakeDevice::copiesIn, 1);
    EXPECT_EQ(FakeDevice::copiesOut, 1);
  }
  done->channels.cancel();
  done.reset();
  // The fetches held their blocks; released, every block went back.
  EXPECT_TRUE(FakeDevice::live.empty());
}

// Host code of a GPU graph never touches device memory (a host read of a
// fed scalar was the CUDA co-execution segfault): the fed scalar is read by
// the kernels, index_add's indices, which the host reads to place each
// slice, through one host copy (terra_rt_to_host_i64: the only copy out).
TEST_F(GraphTest, InputsOnDeviceHostCodeReadsIndicesFromOneHostCopy) {
  auto g = compileGPULoops(R"mlir(
module {
  terra.graph @g {
    %x = terra.feed 1 : tensor<2x3xf32>
    %s = terra.feed 2 : tensor<f32>
    %m = terra.op "aten._foreach_mul_.Scalar"(%x, %s) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2x3xf32>
    %i = terra.op "aten.arange.start_step"() args {start = 2 : i64, end = -1 : i64, step = -2 : i64} : () -> tensor<2xi64>
    %src = terra.feed 3 : tensor<2x2xf32>
    %a = terra.op "aten.index_add"(%m, %i, %src) args {dim = 1 : i64, alpha = 1 : i64} : (tensor<2x3xf32>, tensor<2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
    terra.fetch 4 %a : tensor<2x3xf32>
  }
})mlir");
  ASSERT_TRUE(g);
  RunState::BufferMemory memory = FakeDevice::inputsOnDeviceMemory();
  auto done = runWithFeeds(
      *g, memory,
      {{1, FakeDevice::tensor({0, 1, 2, 3, 4, 5}, {2, 3}, {3, 1})},
       {2, FakeDevice::tensor({10}, {}, {})},
       {3, FakeDevice::tensor({100, 200, 300, 400}, {2, 2}, {2, 1})}});
  ASSERT_EQ(done->status, RunState::Status::Ok) << done->error;
  Tensor out;
  ASSERT_TRUE(done->channels.waitFetch(4, 1, out));
  // x * 10, then column 2 += src[:, 0], column 0 += src[:, 1].
  std::vector<float> want = {200, 10, 120, 430, 40, 350};
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(at(out, i), want[i]) << i;
  EXPECT_EQ(FakeDevice::copiesOut, 1);
  EXPECT_EQ(FakeDevice::copiesIn, 0);
}

TEST_F(GraphTest, InputsOnDeviceFetchOfAFeedIsCopiedOnTheDevice) {
  // Row-major inputs: the graph fetches the feed's own buffer.
  auto g = compileContiguous(R"mlir(
module {
  terra.graph @g {
    %x = terra.feed 1 : tensor<4xf32>
    terra.fetch 3 %x : tensor<4xf32>
  }
})mlir");
  ASSERT_TRUE(g);
  RunState::BufferMemory memory = FakeDevice::inputsOnDeviceMemory();
  Tensor feed = FakeDevice::tensor({1, 2, 3, 4});
  // verifyFetches: cannot hash device memory, skipped.
  auto done = runWithFeeds(*g, memory, {{1, feed}}, /*verifyFetches=*/true);
  ASSERT_EQ(done->status, RunState::Status::Ok) << done->error;
  Tensor fedBack;
  ASSERT_TRUE(done->channels.waitFetch(3, 1, fedBack));
  EXPECT_NE(fedBack.data, feed.data);
  EXPECT_TRUE(FakeDevice::onDevice(fedBack));
  EXPECT_EQ(FakeDevice::copiesOnDevice, 1);
  EXPECT_EQ(FakeDevice::copiesIn + FakeDevice::copiesOut, 0);
  EXPECT_EQ(at(fedBack, 2), 3);
}

// A strided device tensor fed to a graph that reads its inputs row-major
// (a transposed CUDA parameter): the host cannot read device memory, so the
// runtime copies the span out, makes it row-major on the host and stages it
// back in; a plain host copy of the device pointer crashed on a GPU.
TEST_F(GraphTest, InputsOnDeviceStridedFeedIsMadeRowMajorThroughTheHost) {
  auto g = compileContiguous(R"mlir(
module {
  terra.graph @g {
    %x = terra.feed 1 : tensor<2x3xf32>
    %y = terra.op "aten.neg"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
    terra.fetch 3 %y : tensor<2x3xf32>
  }
})mlir");
  ASSERT_TRUE(g);
  RunState::BufferMemory memory = FakeDevice::inputsOnDeviceMemory();
  // The transpose of a row-major 3x2 block {0 1; 2 3; 4 5}.
  auto done = runWithFeeds(
      *g, memory,
      {{1, FakeDevice::tensor({0, 1, 2, 3, 4, 5}, {2, 3}, {1, 2})}});
  ASSERT_EQ(done->status, RunState::Status::Ok) << done->error;
  Tensor y;
  ASSERT_TRUE(done->channels.waitFetch(3, 1, y));
  EXPECT_TRUE(FakeDevice::onDevice(y));
  EXPECT_EQ(FakeDevice::copiesOut, 1); // the strided span, out
  EXPECT_EQ(FakeDevice::copiesIn, 1);  // its row-major copy, in
  std::vector<float> want = {-0, -2, -4, -1, -3, -5};
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_EQ(at(y, i), want[i]) << i;
}

// A kernel that fails inside the graph's host code (the CUDA runtime
// records the error) fails the run before the next fetch is published: no
// value computed after it reaches the host.
TEST_F(GraphTest, DeviceErrorInsideTheGraphFailsTheRunBeforeTheNextFetch) {
  auto g = compile(kFetchGraph);
  ASSERT_TRUE(g);
  GraphRunner runner(*g);
  auto run = std::make_shared<RunState>();
  run->memory = FakeDevice::inputsOnDeviceMemory();
  Tensor feed = FakeDevice::tensor({1, 2, 3, 4});
  FakeDevice::pendingError = "stale: an earlier run's";
  FakeDevice::allocsBeforeError = 1; // the first buffer's kernel fails
  run->channels.sendFeed(1, feed);
  run->channels.sendCase(4, 0);
  runner.start(run);
  auto done = runner.wait();
  ASSERT_EQ(done->status, RunState::Status::Error);
  EXPECT_EQ(done->error, "the device failed inside the graph: "
                         "mgpuLaunchKernel: an illegal memory access");
  Tensor neg;
  EXPECT_FALSE(done->channels.waitFetch(0, 1, neg));
}

/// The run's stream as the runtime drives it (RunState::BufferMemory's
/// stream hooks), recorded: which hook ran, in order, on which thread.
struct FakeStream {
  static std::vector<std::string> calls;
  static std::thread::id thread;
  static bool failBegin;
  static void note(const char *what) {
    std::lock_guard<std::mutex> lock(FakeDevice::mu);
    calls.push_back(what);
    thread = std::this_thread::get_id();
  }
  static bool begin() {
    note("begin");
    return !failBegin;
  }
  static bool sync() {
    note("sync");
    return true;
  }
  static void end() { note("end"); }
  static RunState::BufferMemory memory() {
    calls.clear();
    failBegin = false;
    RunState::BufferMemory m = FakeDevice::memory();
    m.beginStream = begin;
    m.syncStream = sync;
    m.endStream = end;
    return m;
  }
};
std::vector<std::string> FakeStream::calls;
std::thread::id FakeStream::thread;
bool FakeStream::failBegin;

// One stream per run: bound on the runner thread before the graph, waited
// for before each value reaches the host (two fetches, one host-op
// argument), and waited for and unbound once after the graph, before its
// buffers are released.
TEST_F(GraphTest, ARunQueuesOnOneStreamAndWaitsBeforeTheHostReads) {
  auto g = compile(kGraph);
  ASSERT_TRUE(g);
  bool argOnHost;
  auto done =
      runKGraph(*g, FakeStream::memory(), vecF32({1, 2, 3, 4}), argOnHost);
  ASSERT_EQ(done->status, RunState::Status::Ok) << done->error;
  EXPECT_EQ(FakeStream::calls,
            (std::vector<std::string>{"begin", "sync", "sync", "sync", "end"}));
  EXPECT_NE(FakeStream::thread, std::this_thread::get_id());
  Tensor out;
  ASSERT_TRUE(done->channels.waitFetch(1, 1, out));
  EXPECT_FLOAT_EQ(at(out, 1), 16);
  EXPECT_TRUE(FakeDevice::live.empty());
}

TEST_F(GraphTest, ARunWhoseStreamCannotBeCreatedFailsWithoutRunning) {
  auto g = compile(kGraph);
  ASSERT_TRUE(g);
  RunState::BufferMemory memory = FakeStream::memory();
  FakeStream::failBegin = true;
  bool argOnHost;
  auto done = runKGraph(*g, memory, vecF32({1, 2, 3, 4}), argOnHost);
  ASSERT_EQ(done->status, RunState::Status::Error);
  EXPECT_EQ(done->error, "cannot create the run's device stream");
  EXPECT_EQ(FakeStream::calls, std::vector<std::string>{"begin"});
  EXPECT_EQ(FakeDevice::copiesIn, 0); // the graph never ran
  Tensor neg;
  EXPECT_FALSE(done->channels.waitFetch(0, 1, neg));
}

TEST_F(GraphTest, FailedCopyFromTheDeviceFailsTheRun) {
  auto g = compile(kFetchGraph);
  ASSERT_TRUE(g);
  GraphRunner runner(*g);
  auto run = std::make_shared<RunState>();
  run->memory = FakeDevice::memory();
  FakeDevice::failCopies = true;
  run->channels.sendFeed(1, vecF32({1, 2, 3, 4}));
  run->channels.sendCase(4, 0);
  runner.start(run);
  auto done = runner.wait();
  ASSERT_EQ(done->status, RunState::Status::Error);
  EXPECT_EQ(done->error, "fetch 0: copying the value from the device failed");
  EXPECT_TRUE(FakeDevice::live.empty());
}

#ifdef TERRA_ENABLE_CUDA
std::vector<std::string> cudaErrors;
void recordCudaError(const char *message) { cudaErrors.push_back(message); }

// A GPU graph through the JIT: every symbol it calls resolves (mgpu*,
// cuBLAS, the runtime's), and its kernel image is loaded by its global
// constructor, which the JIT runs. Without a driver the load says why, and
// a run on device memory fails cleanly; with one, it computes.
TEST_F(GraphTest, GpuGraphLinksAndLoadsItsKernels) {
  cudaErrors.clear();
  terra::cuda::setErrorHandler(recordCudaError);
  std::string error;
  auto g = compileGPU(kFetchGraph, error);
  ASSERT_TRUE(g) << error;
  auto run = std::make_shared<RunState>();
  run->memory = {[](size_t n, size_t) { return terra::cuda::allocDevice(n); },
                 terra::cuda::freeDevice, true, terra::cuda::copyToDevice,
                 terra::cuda::copyToHost};
  run->channels.sendFeed(1, vecF32({1, 2, 3, 4}));
  run->channels.sendCase(4, 0);
  GraphRunner runner(*g);
  runner.start(run);
  auto done = runner.wait();
  std::string why;
  if (!terra::cuda::available(&why)) {
    bool loadReported = false;
    for (const std::string &e : cudaErrors)
      loadReported = loadReported || e.find("mgpuModuleLoadJIT") == 0;
    EXPECT_TRUE(loadReported) << "the kernel image was not loaded at all";
    ASSERT_EQ(done->status, RunState::Status::Error);
    EXPECT_NE(done->error.find("device-reachable memory"), std::string::npos)
        << done->error;
  } else {
    ASSERT_EQ(done->status, RunState::Status::Ok) << done->error;
    EXPECT_TRUE(cudaErrors.empty()) << cudaErrors.front();
    Tensor e;
    ASSERT_TRUE(done->channels.waitFetch(1, 1, e));
    EXPECT_FLOAT_EQ(at(e, 0), std::exp(-1.0f));
  }
  terra::cuda::setErrorHandler(nullptr);
}
#endif

TEST_F(GraphTest, FetchedBufferOutlivesACancelledRun) {
  auto g = compile(kFetchGraph);
  GraphRunner runner(*g);
  auto run = std::make_shared<RunState>();
  run->channels.sendFeed(1, vecF32({1, 2, 3, 4}));
  runner.start(run);
  Tensor a;
  ASSERT_TRUE(run->channels.waitFetch(0, 1, a));
  runner.cancel(); // the graph waits for case select 4
  auto done = runner.wait();
  EXPECT_EQ(done->status, RunState::Status::Cancelled);
  EXPECT_TRUE(done->buffers.empty());
  done.reset();
  run.reset();
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(at(a, i), -(i + 1.0f));
}

constexpr const char *kWriteAfterFetchGraph = R"mlir(
module {
  terra.graph @g {
    %x = terra.feed 1 : tensor<4xf32>
    %n = terra.op "aten.neg"(%x) : (tensor<4xf32>) -> tensor<4xf32>
    terra.fetch 0 %n : tensor<4xf32>
    %i = arith.constant 0 : index
    %v = arith.constant 42.0 : f32
    %m = tensor.insert %v into %n[%i] : tensor<4xf32>
    terra.fetch 1 %m : tensor<4xf32>
  }
})mlir";

// The check behind zero-copy fetches: a graph that writes into a buffer
// after fetching it (here an in-place tensor.insert into the dead %n, as
// one-shot bufferization alone makes it) is caught with
// TERRA_VERIFY_FETCHES / verifyFetches. The pipeline is bufferization and
// the LLVM lowering without -terra-protect-fetches, which would copy.
TEST_F(GraphTest, VerifyFetchesCatchesAWriteAfterPublishing) {
  lower(kWriteAfterFetchGraph, [](mlir::PassManager &pm) {
    mlir::bufferization::OneShotBufferizePassOptions options;
    options.bufferizeFunctionBoundaries = true;
    options.functionBoundaryTypeConversion =
        mlir::bufferization::LayoutMapOption::IdentityLayoutMap;
    pm.addPass(mlir::bufferization::createOneShotBufferizePass(options));
    pm.addPass(mlir::createConvertLinalgToLoopsPass());
    terra::addHostLoopsToLLVMPasses(pm);
  });
  std::string error;
  auto g = CompiledGraph::compile(*module, "g", "", error);
  ASSERT_TRUE(g) << error;
  GraphRunner runner(*g);
  auto run = std::make_shared<RunState>();
  run->verifyFetches = true;
  run->channels.sendFeed(1, vecF32({1, 2, 3, 4}));
  runner.start(run);
  auto done = runner.wait();
  EXPECT_EQ(done->status, RunState::Status::Error);
  EXPECT_NE(
      done->error.find("fetch 0: the graph wrote into the fetched buffer"),
      std::string::npos)
      << done->error;
}

// The same graph through the CPU pipeline: -terra-protect-fetches fetches a
// copy of %n, so the insert cannot change the value the host holds.
TEST_F(GraphTest, AFetchedValueKeepsItsValueWhenTheGraphWritesItsTensor) {
  auto g = compile(kWriteAfterFetchGraph);
  GraphRunner runner(*g);
  auto run = std::make_shared<RunState>();
  run->verifyFetches = true;
  run->channels.sendFeed(1, vecF32({1, 2, 3, 4}));
  runner.start(run);
  Tensor n, m;
  ASSERT_TRUE(run->channels.waitFetch(0, 1, n));
  ASSERT_TRUE(run->channels.waitFetch(1, 1, m));
  auto done = runner.wait();
  EXPECT_EQ(done->status, RunState::Status::Ok) << done->error;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(at(n, i), -(i + 1.0f));
    EXPECT_EQ(at(m, i), i == 0 ? 42.0f : -(i + 1.0f));
  }
}

TEST_F(GraphTest, StressManyIterationsOnSeveralRunners) {
  auto g = compile(kGraph);
  constexpr int kRunners = 4, kIterations = 200;
  std::vector<std::thread> hosts;
  std::atomic<int> ok{0}, cancelled{0};
  for (int r = 0; r < kRunners; ++r)
    hosts.emplace_back([&, r] {
      GraphRunner runner(*g);
      for (int i = 0; i < kIterations; ++i) {
        auto run = std::make_shared<RunState>();
        run->hostOps = squareHostOp();
        runner.start(run);
        run->channels.sendFeed(1, vecF32({float(i), 1, 2, 3}));
        if ((i + r) % 7 == 3) { // cancel some iterations mid-way
          runner.cancel();
          auto done = runner.wait();
          cancelled += done->status == RunState::Status::Cancelled;
          ok += done->status == RunState::Status::Ok;
          continue;
        }
        run->channels.sendCase(2, i % 2);
        for (int k = 0; k < i % 3; ++k)
          run->channels.sendLoop(3, true);
        run->channels.sendLoop(3, false);
        auto done = runner.wait();
        ASSERT_EQ(done->status, RunState::Status::Ok) << done->error;
        Tensor out;
        ASSERT_TRUE(done->channels.waitFetch(1, 1, out));
        float v = -float(i);
        if (i % 2 == 0)
          v = std::exp(v);
        v *= float(1 << (i % 3));
        EXPECT_NEAR(at(out, 0), v * v, 1e-3f * (1 + v * v));
        ++ok;
      }
    });
  for (auto &h : hosts)
    h.join();
  EXPECT_EQ(ok + cancelled, kRunners * kIterations);
  EXPECT_GT(cancelled, 0);
}

} // namespace

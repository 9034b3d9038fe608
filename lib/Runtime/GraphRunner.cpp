//===- GraphRunner.cpp - The runner thread --------------------------------===//
#include "RuntimeInternal.h"
#include "terra/Runtime/SpinWait.h"

#include <chrono>
#include <csetjmp>
#include <cstdlib>

using namespace terra::rt;

namespace {
/// Calls the graph; returns true if it unwound. Kept free of C++ objects
/// so longjmp back into it is well defined.
bool invokeWithUnwind(void (*entry)(void **), void **args, std::jmp_buf *buf) {
  if (setjmp(*buf))
    return true;
  entry(args);
  return false;
}

/// Runs one iteration: `entry(args)` with `run` current on this thread,
/// then releases what the run still holds and sets its status.
void invokeRun(void (*entry)(void **), void **args,
               const std::vector<std::string> &asserts, RunState &run) {
  RunState *&current = detail::currentRun();
  current = &run;
  run.assertMessages = &asserts;
  std::jmp_buf buf;
  run.jump = &buf;
  if (run.memory.deviceError)
    run.memory.deviceError(); // an earlier run's error is not this one's
  auto start = std::chrono::steady_clock::now();
  bool unwound = false;
  if (run.memory.beginStream && !run.memory.beginStream()) {
    run.status = RunState::Status::Error;
    run.error = "cannot create the run's device stream";
  } else {
    unwound = invokeWithUnwind(entry, args, &buf);
    // Queued kernels may still use the buffers released below.
    if (run.memory.endStream)
      run.memory.endStream();
  }
  if (run.status == RunState::Status::Pending)
    detail::checkDevice(run);
  run.execSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count() -
      run.channels.graphStallSeconds();
  // Release every buffer the run still holds (all of them when it unwound),
  // except those published by a fetch: fetched tensors own them now.
  if (run.verifyFetches)
    detail::verifyPublished(run, nullptr);
  run.buffers.forEach([&](void *p, bool) {
    if (!run.published.count(p))
      run.memory.free(p);
  });
  run.buffers.clear();
  run.published.clear();
  run.fetchChecks.clear();
  run.keepAlive.clear();
  run.hostArgs.clear();
  run.hostResults.clear();
  // An error (a failed check, a fetch verification) keeps its status.
  if (run.status == RunState::Status::Pending)
    run.status = unwound ? RunState::Status::Cancelled : RunState::Status::Ok;
  run.jump = nullptr;
  run.assertMessages = nullptr; // (the caller's: they may go now)
  current = nullptr;
  run.channels.close();
}

/// The packed-interface shape of a plain `void graph()`: `args` points at
/// the function.
void callPlainGraph(void **args) { (*reinterpret_cast<void (**)()>(args))(); }
} // namespace

void CompiledGraph::invoke(RunState &run) const {
  run.donatedStates = &donated;
  invokeRun(entry, nullptr, asserts, run);
}

void terra::rt::runGraphFunction(
    void (*graph)(), RunState &run,
    const std::vector<std::string> &checkMessages) {
  invokeRun(callPlainGraph, reinterpret_cast<void **>(&graph), checkMessages,
            run);
}

bool RunState::defaultVerifyFetches() {
  static const bool enabled = [] {
    const char *v = std::getenv("TERRA_VERIFY_FETCHES");
    return v && *v && std::string(v) != "0";
  }();
  return enabled;
}

GraphRunner::GraphRunner(const CompiledGraph &graph)
    : graph(graph), thread([this] { loop(); }) {}

GraphRunner::~GraphRunner() {
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
    if (pending)
      pending->channels.cancel();
    if (active)
      active->channels.cancel();
    events.fetch_add(1, std::memory_order_release);
  }
  cv.notify_all();
  thread.join();
}

void GraphRunner::start(std::shared_ptr<RunState> run) {
  {
    std::lock_guard<std::mutex> lock(mu);
    pending = std::move(run);
    finished.reset();
    events.fetch_add(1, std::memory_order_release);
  }
  cv.notify_all(); // no system call while the runner spins
}

std::shared_ptr<RunState> GraphRunner::wait() {
  std::unique_lock<std::mutex> lock(mu);
  auto ended = [&] { return finished || (!pending && !active); };
  if (!ended() && !spinUntil(lock, events, Channels::spin(), ended))
    cv.wait(lock, ended);
  return std::move(finished);
}

void GraphRunner::cancel() {
  std::lock_guard<std::mutex> lock(mu);
  if (pending)
    pending->channels.cancel();
  if (active)
    active->channels.cancel();
}

void GraphRunner::retire(std::shared_ptr<RunState> run) {
  {
    std::lock_guard<std::mutex> lock(mu);
    retired.push_back(std::move(run));
    events.fetch_add(1, std::memory_order_release);
  }
  cv.notify_all();
}

void GraphRunner::loop() {
  std::unique_lock<std::mutex> lock(mu);
  auto work = [&] { return stopping || pending || !retired.empty(); };
  while (true) {
    // Idle, the runner spins first: the host's next start (or the retiring
    // of the run that just ended) then costs the host no wake-up call.
    if (!work() && !spinUntil(lock, events, Channels::spin(), work))
      cv.wait(lock, work);
    if (!retired.empty()) {
      std::vector<std::shared_ptr<RunState>> dead;
      dead.swap(retired);
      lock.unlock();
      dead.clear();
      lock.lock();
      continue;
    }
    if (stopping && !pending)
      return;
    active = std::move(pending);
    if (active->buffers.empty())
      active->buffers = std::move(spareBuffers);
    lock.unlock();
    graph.invoke(*active);
    lock.lock();
    spareBuffers = std::move(active->buffers); // cleared by the run's end
    finished = std::move(active);
    events.fetch_add(1, std::memory_order_release);
    cv.notify_all();
    if (stopping)
      return;
  }
}

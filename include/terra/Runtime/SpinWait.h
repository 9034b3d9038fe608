//===- SpinWait.h - Spin, then block, on a condition ------------*- C++ -*-===//
//
// The spin phase shared by the runtime's waits (Channels' receives and
// fetches, GraphRunner's idle runner and its host's wait for a run's end).
// A thread that is woken from a futex wait costs its waker a system call
// (~25 us in a VM) and itself a scheduling delay; a waiter that polls for
// a short while costs neither when the event comes soon.
//
//===----------------------------------------------------------------------===//

#ifndef TERRA_RUNTIME_SPINWAIT_H
#define TERRA_RUNTIME_SPINWAIT_H

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <thread>

namespace terra::rt {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Polls for up to `budget`, the mutex released, until `ready` (checked
/// under the lock each time `events` moves) holds: true then, false when
/// the time is over. Entered and left with `lock` held. Whoever changes
/// what `ready` reads bumps `events` (release) after the change.
template <typename Ready>
bool spinUntil(std::unique_lock<std::mutex> &lock,
               const std::atomic<uint64_t> &events,
               std::chrono::nanoseconds budget, Ready ready) {
  using Clock = std::chrono::steady_clock;
  if (budget.count() <= 0)
    return false;
  Clock::time_point start = Clock::now();
  Clock::time_point deadline = start + budget;
  Clock::time_point politeAfter = start + std::chrono::microseconds(50);
  uint64_t seen = events.load(std::memory_order_acquire);
  lock.unlock();
  for (unsigned n = 0;; ++n) {
    uint64_t current = events.load(std::memory_order_acquire);
    if (current != seen) {
      lock.lock();
      if (ready())
        return true;
      seen = current;
      lock.unlock();
    }
    // The clock is read every 64 polls (~1 us). Past the first 50 us the
    // spinner also yields then: a thread that shares its core (more
    // threads than cores) runs instead of waiting out the spin.
    if ((n & 63) == 63) {
      Clock::time_point t = Clock::now();
      if (t >= deadline)
        break;
      if (t >= politeAfter)
        std::this_thread::yield();
    }
    cpuRelax();
  }
  lock.lock();
  return ready();
}

} // namespace terra::rt

#endif // TERRA_RUNTIME_SPINWAIT_H

//===- Channels.h - Host <-> graph communication of one run -----*- C++ -*-===//
//
// Feeds, case selections and loop conditions go host -> graph; fetches go
// graph -> host. Each is keyed by (point id, dynamic instance): host->graph
// values of one point are consumed in the order they were sent (the i-th
// value of a point is its i-th dynamic instance), and the graph publishes
// the i-th execution of a fetch point as instance i (1-based). Every wait
// returns false as soon as the run is cancelled or has ended.
//
//===----------------------------------------------------------------------===//
#ifndef TERRA_RUNTIME_CHANNELS_H
#define TERRA_RUNTIME_CHANNELS_H

#include "terra/Runtime/Tensor.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

namespace terra::rt {

/// The type a graph expects at a feed point (`terra.feed_types`): element
/// type and sizes, -1 for a dynamic one.
struct FeedType {
  DType dtype;
  std::vector<int64_t> sizes;
};

class Channels {
public:
  /// The graph's feed types, checked as the host sends each feed (see
  /// commitDecision); null: none checked. Owned by the graph.
  void setFeedTypes(const std::map<int64_t, FeedType> *types) {
    feedTypes = types;
  }
  // Host side.
  void sendFeed(int64_t point, Tensor value);
  void sendCase(int64_t point, uint32_t index);
  void sendLoop(int64_t point, bool next);
  /// Waits for instance `instance` (1-based) of fetch point `point`.
  bool waitFetch(int64_t point, uint64_t instance, Tensor &out);
  /// Calls `visit(i, value)` with the value of each (point, instance) of
  /// `points`, waiting as waitFetch does for one not published yet: false
  /// as soon as one fails. Published values are visited in place, under
  /// one lock (a committed step's hundreds of state values: a lock and a
  /// Tensor copy each cost the host ~0.6 us per value); `visit` only reads
  /// them. Their buffers stay valid while the channels live.
  bool visitFetches(const std::vector<std::pair<int64_t, uint64_t>> &points,
                    const std::function<void(size_t, const Tensor &)> &visit);
  /// Whether `waitFetch(point, instance)` would return without blocking:
  /// the value is published, or the run was cancelled or has ended. The
  /// host polls it to use the time it would wait (freeing the previous
  /// step's records) without delaying the value.
  bool fetchReady(int64_t point, uint64_t instance) const;

  // Graph side.
  bool receiveFeed(int64_t point, Tensor &out);
  bool receiveCase(int64_t point, uint32_t &out);
  bool receiveLoop(int64_t point, bool &out);
  void publishFetch(int64_t point, Tensor value);

  /// Waits until the graph is blocked on a host value (feed, case select or
  /// loop condition) or has ended (serialized execution).
  void waitGraphIdle();

  /// The host has sent everything it will send this iteration (it
  /// validated the iteration's end): a graph wait for a value not sent by
  /// then fails at once instead of blocking forever.
  void finishHost();
  bool hostFinished() const;

  /// Whether the graph may write a committed iteration's new state into the
  /// state's memory now (terra_rt_commit_ready), without waiting: 1 once
  /// the host has finished the iteration (it can no longer deviate, so the
  /// old state is never needed again) and every feed it sent had the type
  /// the graph expects (so no feed guard after this point can fail the
  /// run), 0 before or after a mismatching feed, -1 when the run is
  /// cancelled.
  int commitDecision() const;

  /// Wakes every waiter on both sides; later waits fail at once.
  void cancel();
  bool isCancelled() const;
  /// The graph has finished (normally or not): host waits for values that
  /// will never come fail instead of blocking.
  void close();

  /// One published value: instance `instance` (1-based) of fetch `point`.
  struct Published {
    int64_t point;
    uint64_t instance;
    Tensor value;
  };
  /// Every value published so far, by point, then instance (what a tool
  /// prints or saves after a run).
  std::vector<Published> published() const;

  /// Seconds each side spent blocked in this run.
  double graphStallSeconds() const;
  double hostStallSeconds() const;

  /// How long a wait spins (polling, the mutex released) before it
  /// blocks, for every run of the process; 0 blocks at once. A value that
  /// arrives while its receiver spins costs the sender no wake-up (a futex
  /// call: ~25 us of the host's time per feed in a VM) and the receiver no
  /// scheduling delay. The waits spin on otherwise idle cores: the graph's
  /// runner while the host computes its next feed, the host while it
  /// waits for a fetch (the GIL released).
  static void setSpin(std::chrono::nanoseconds spin);
  static std::chrono::nanoseconds spin();

private:
  /// Sets one of the flags below and wakes every waiter.
  void raise(bool &flag);
  template <typename T>
  bool receive(std::map<int64_t, std::deque<T>> &queues, int64_t point, T &out);
  /// Queues a host value; wakes the graph only if it waits for this one.
  template <typename T>
  void send(std::map<int64_t, std::deque<T>> &queues, int64_t point, T value);
  /// The spin phase of a wait (see setSpin), entered and left with `lock`
  /// held: polls `ready` (under the lock) each time `events` moves, until
  /// it holds (true) or the spin time is over (false).
  template <typename Ready>
  bool spinUntil(std::unique_lock<std::mutex> &lock, Ready ready);

  mutable std::mutex mu;
  /// The graph waits on `graphCv`, the host on `hostCv`: a host sends many
  /// values the graph does not wait for yet, and waking the graph for each
  /// (a futex call, a context switch on a busy core) cost the host
  /// microseconds per value.
  std::condition_variable graphCv, hostCv;
  /// What blocked graph receives wait for: (queue, point).
  std::vector<std::pair<const void *, int64_t>> graphWaits;
  std::map<int64_t, std::deque<Tensor>> feeds;
  std::map<int64_t, std::deque<uint32_t>> cases;
  std::map<int64_t, std::deque<bool>> loops;
  std::map<int64_t, std::vector<Tensor>> fetches;
  bool cancelled = false, closed = false, hostDone = false;
  /// A feed whose type differs from the graph's (its guard will fail).
  bool feedMismatch = false;
  const std::map<int64_t, FeedType> *feedTypes = nullptr;
  bool graphWaiting = false; ///< The graph is waiting in a receive.
  int graphSpinners = 0;     ///< Graph receives in their spin phase.
  /// Moves on every change a waiter may be waiting for (a value sent or
  /// published, a flag raised); spinning waits poll it without the mutex.
  std::atomic<uint64_t> events{0};
  std::chrono::nanoseconds graphStall{0}, hostStall{0};
};

} // namespace terra::rt

#endif // TERRA_RUNTIME_CHANNELS_H

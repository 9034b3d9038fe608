//===- Channels.cpp - Host <-> graph communication ------------------------===//
#include "terra/Runtime/Channels.h"
#include "terra/Runtime/SpinWait.h"

#include <algorithm>
#include <thread>

using namespace terra::rt;
using Clock = std::chrono::steady_clock;

namespace {
/// Channels::setSpin's value, in nanoseconds.
std::atomic<int64_t> spinNanos{1000000};
} // namespace

void Channels::setSpin(std::chrono::nanoseconds spin) {
  spinNanos.store(std::max<int64_t>(0, spin.count()));
}

std::chrono::nanoseconds Channels::spin() {
  return std::chrono::nanoseconds(spinNanos.load());
}

template <typename Ready>
bool Channels::spinUntil(std::unique_lock<std::mutex> &lock, Ready ready) {
  return rt::spinUntil(lock, events, spin(), ready);
}

template <typename T>
void Channels::send(std::map<int64_t, std::deque<T>> &queues, int64_t point,
                    T value) {
  bool awaited;
  {
    std::lock_guard<std::mutex> lock(mu);
    queues[point].push_back(std::move(value));
    events.fetch_add(1, std::memory_order_release);
    awaited = std::find(graphWaits.begin(), graphWaits.end(),
                        std::make_pair(static_cast<const void *>(&queues),
                                       point)) != graphWaits.end();
  }
  if (awaited)
    graphCv.notify_all();
}

void Channels::sendFeed(int64_t point, Tensor value) {
  if (feedTypes) {
    auto it = feedTypes->find(point);
    bool ok = it == feedTypes->end() ||
              (value.dtype == it->second.dtype &&
               value.sizes.size() == it->second.sizes.size());
    for (size_t d = 0; ok && it != feedTypes->end() && d < value.sizes.size();
         ++d)
      ok = it->second.sizes[d] < 0 || it->second.sizes[d] == value.sizes[d];
    if (!ok) {
      std::lock_guard<std::mutex> lock(mu);
      feedMismatch = true;
    }
  }
  send(feeds, point, std::move(value));
}

void Channels::sendCase(int64_t point, uint32_t index) {
  send(cases, point, index);
}

void Channels::sendLoop(int64_t point, bool next) { send(loops, point, next); }

template <typename T>
bool Channels::receive(std::map<int64_t, std::deque<T>> &queues, int64_t point,
                       T &out) {
  std::unique_lock<std::mutex> lock(mu);
  auto queued = [&] {
    auto it = queues.find(point);
    return it != queues.end() && !it->second.empty();
  };
  auto ready = [&] { return cancelled || hostDone || queued(); };
  if (!ready()) {
    Clock::time_point start = Clock::now();
    // Waiting as far as waitGraphIdle is concerned, but not registered in
    // graphWaits while spinning: a send then wakes no one.
    ++graphSpinners;
    graphWaiting = true;
    hostCv.notify_all(); // a host in waitGraphIdle may go on
    bool got = spinUntil(lock, ready);
    --graphSpinners;
    if (!got) {
      auto waiting = std::make_pair(static_cast<const void *>(&queues), point);
      graphWaits.push_back(waiting);
      graphCv.wait(lock, ready);
      graphWaits.erase(
          std::find(graphWaits.begin(), graphWaits.end(), waiting));
    }
    graphWaiting = !graphWaits.empty() || graphSpinners > 0;
    graphStall += Clock::now() - start;
  }
  if (cancelled || !queued())
    return false;
  std::deque<T> &q = queues[point];
  out = std::move(q.front());
  q.pop_front();
  return true;
}

bool Channels::receiveFeed(int64_t point, Tensor &out) {
  return receive(feeds, point, out);
}
bool Channels::receiveCase(int64_t point, uint32_t &out) {
  return receive(cases, point, out);
}
bool Channels::receiveLoop(int64_t point, bool &out) {
  return receive(loops, point, out);
}

void Channels::publishFetch(int64_t point, Tensor value) {
  {
    std::lock_guard<std::mutex> lock(mu);
    fetches[point].push_back(std::move(value));
    events.fetch_add(1, std::memory_order_release);
  }
  hostCv.notify_all(); // no system call when the host spins or runs
}

bool Channels::waitFetch(int64_t point, uint64_t instance, Tensor &out) {
  if (instance == 0)
    return false;
  std::unique_lock<std::mutex> lock(mu);
  auto ready = [&] {
    if (cancelled || closed)
      return true;
    auto it = fetches.find(point);
    return it != fetches.end() && it->second.size() >= instance;
  };
  if (!ready()) {
    Clock::time_point start = Clock::now();
    if (!spinUntil(lock, ready))
      hostCv.wait(lock, ready);
    hostStall += Clock::now() - start;
  }
  auto it = fetches.find(point);
  if (cancelled || it == fetches.end() || it->second.size() < instance)
    return false;
  out = it->second[instance - 1];
  return true;
}

bool Channels::visitFetches(
    const std::vector<std::pair<int64_t, uint64_t>> &points,
    const std::function<void(size_t, const Tensor &)> &visit) {
  size_t i = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (cancelled)
      return false;
    for (; i < points.size(); ++i) {
      auto [point, instance] = points[i];
      if (instance == 0)
        return false;
      auto it = fetches.find(point);
      if (it == fetches.end() || it->second.size() < instance)
        break; // not published yet: wait for it (and the rest) one by one
      visit(i, it->second[instance - 1]);
    }
  }
  for (; i < points.size(); ++i) {
    Tensor value;
    if (!waitFetch(points[i].first, points[i].second, value))
      return false;
    visit(i, value);
  }
  return true;
}

bool Channels::fetchReady(int64_t point, uint64_t instance) const {
  std::lock_guard<std::mutex> lock(mu);
  if (instance == 0 || cancelled || closed)
    return true;
  auto it = fetches.find(point);
  return it != fetches.end() && it->second.size() >= instance;
}

void Channels::waitGraphIdle() {
  std::unique_lock<std::mutex> lock(mu);
  Clock::time_point start = Clock::now();
  hostCv.wait(lock, [&] { return graphWaiting || cancelled || closed; });
  hostStall += Clock::now() - start;
}

void Channels::raise(bool &flag) {
  {
    std::lock_guard<std::mutex> lock(mu);
    flag = true;
    events.fetch_add(1, std::memory_order_release);
  }
  graphCv.notify_all();
  hostCv.notify_all();
}

void Channels::cancel() { raise(cancelled); }

bool Channels::isCancelled() const {
  std::lock_guard<std::mutex> lock(mu);
  return cancelled;
}

void Channels::finishHost() { raise(hostDone); }

int Channels::commitDecision() const {
  std::lock_guard<std::mutex> lock(mu);
  if (cancelled)
    return -1;
  return hostDone && !feedMismatch ? 1 : 0;
}

bool Channels::hostFinished() const {
  std::lock_guard<std::mutex> lock(mu);
  return hostDone;
}

void Channels::close() { raise(closed); }

double Channels::graphStallSeconds() const {
  std::lock_guard<std::mutex> lock(mu);
  return std::chrono::duration<double>(graphStall).count();
}

double Channels::hostStallSeconds() const {
  std::lock_guard<std::mutex> lock(mu);
  return std::chrono::duration<double>(hostStall).count();
}

std::vector<Channels::Published> Channels::published() const {
  std::lock_guard<std::mutex> lock(mu);
  std::vector<Published> out;
  for (const auto &[point, values] : fetches)
    for (size_t i = 0; i < values.size(); ++i)
      out.push_back({point, uint64_t(i + 1), values[i]});
  return out;
}

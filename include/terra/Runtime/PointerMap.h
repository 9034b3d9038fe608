//===- PointerMap.h - A flat hash map keyed by pointers ---------*- C++ -*-===//
//
// The runtime tracks every buffer a graph allocates twice: the run's set of
// live buffers (RunState::buffers) and the caching allocator's block sizes
// (CachingAllocator::live). Node-based std::unordered_* containers made
// each buffer cost two mallocs and two frees of hash nodes on top of the
// buffer itself, and a fresh run's set rehashed as it grew: a YOLOv3 step
// allocates thousands of buffers, and glibc's malloc was ~10% of the runner
// thread. PointerMap stores its entries in one array (open addressing with
// linear probing, erase by backward shift, so no tombstones): an insert or
// erase allocates nothing once the array is big enough, and `clear` keeps
// the array for the next run.
//
//===----------------------------------------------------------------------===//

#ifndef TERRA_RUNTIME_POINTERMAP_H
#define TERRA_RUNTIME_POINTERMAP_H

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

namespace terra::rt {

/// A hash map from non-null pointers to trivially copyable values. A null
/// key marks an empty slot, so null is never an entry: inserting it fails,
/// and it is never found or erased (the graph frees null pointers).
template <typename V> class PointerMap {
  static_assert(std::is_trivially_copyable_v<V>,
                "entries are moved by copying their bytes");

public:
  PointerMap() = default;
  PointerMap(const PointerMap &) = default;
  PointerMap &operator=(const PointerMap &) = default;
  /// A moved-from map is empty (its array went with the move).
  PointerMap(PointerMap &&o) noexcept { *this = std::move(o); }
  PointerMap &operator=(PointerMap &&o) noexcept {
    if (this != &o) {
      slots = std::move(o.slots);
      mask = o.mask;
      count = o.count;
      o.slots.clear();
      o.mask = o.count = 0;
    }
    return *this;
  }

  size_t size() const { return count; }
  bool empty() const { return count == 0; }
  /// Entries it holds before it must grow.
  size_t capacity() const { return slots.size() / 2; }

  /// Room for `n` entries without growing.
  void reserve(size_t n) {
    if (n > capacity())
      rehash(roundUp(2 * n));
  }

  /// Adds `key` -> `value`; false (and the old value kept) when `key` is
  /// there already.
  bool insert(void *key, V value) {
    if (!key)
      return false;
    if (2 * (count + 1) > slots.size())
      rehash(slots.empty() ? kMinSlots : 2 * slots.size());
    size_t i = home(key);
    for (; slots[i].key; i = (i + 1) & mask)
      if (slots[i].key == key)
        return false;
    slots[i] = {key, value};
    ++count;
    return true;
  }

  /// Sets `key`'s value, adding it if needed (not a null key).
  void set(void *key, V value) {
    if (V *v = find(key))
      *v = value;
    else
      insert(key, value);
  }

  /// `key`'s value, or null.
  V *find(void *key) {
    if (count == 0 || !key)
      return nullptr;
    for (size_t i = home(key); slots[i].key; i = (i + 1) & mask)
      if (slots[i].key == key)
        return &slots[i].value;
    return nullptr;
  }
  bool contains(void *key) { return find(key) != nullptr; }

  /// Removes `key`; false when it is not there. Its value goes to `*out`.
  bool erase(void *key, V *out = nullptr) {
    // (A null key would "find" the first empty slot on its probe and
    // remove nothing but the count: a later clear left entries behind.)
    if (count == 0 || !key)
      return false;
    size_t i = home(key);
    for (; slots[i].key != key; i = (i + 1) & mask)
      if (!slots[i].key)
        return false;
    if (out)
      *out = slots[i].value;
    // Backward shift: an entry after the hole moves into it unless its home
    // lies cyclically in (hole, entry], where a lookup still finds it.
    for (size_t j = (i + 1) & mask; slots[j].key; j = (j + 1) & mask) {
      size_t h = home(slots[j].key);
      bool stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
      if (!stays) {
        slots[i] = slots[j];
        i = j;
      }
    }
    slots[i] = Slot{};
    --count;
    return true;
  }

  /// Removes every entry; the array stays for the next entries.
  void clear() {
    if (count == 0)
      return;
    for (Slot &s : slots)
      s = Slot{};
    count = 0;
  }

  /// Calls `f(key, value)` for each entry (in no particular order); `f` must
  /// not change the map.
  template <typename F> void forEach(F &&f) const {
    for (const Slot &s : slots)
      if (s.key)
        f(s.key, s.value);
  }

private:
  struct Slot {
    void *key = nullptr;
    V value{};
  };
  static constexpr size_t kMinSlots = 64;

  static size_t roundUp(size_t n) {
    size_t p = kMinSlots;
    while (p < n)
      p *= 2;
    return p;
  }

  /// A pointer's first slot: its bits mixed (murmur3's finalizer), since
  /// aligned buffers differ only in their high bits.
  size_t home(void *key) const {
    uint64_t x = reinterpret_cast<uintptr_t>(key);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return size_t(x) & mask;
  }

  void rehash(size_t n) {
    std::vector<Slot> old(n);
    old.swap(slots);
    mask = n - 1;
    count = 0;
    for (const Slot &s : old)
      if (s.key)
        insert(s.key, s.value);
  }

  std::vector<Slot> slots;
  size_t mask = 0;
  size_t count = 0;
};

} // namespace terra::rt

#endif // TERRA_RUNTIME_POINTERMAP_H

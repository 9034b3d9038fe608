//===- HostRng.cpp - PyTorch's CPU random numbers, drawn faster -----------===//
//
// Random-number ops run on the host in every phase, drawing from PyTorch's
// default CPU generator exactly as eager does (python/terra/tracing.py,
// HOST_RNG_OPS). Dropout's `bernoulli_(p)` is the costly one: PyTorch draws
// it element by element through a serial TensorIterator loop (~6.5 ns per
// element here, 1.2-1.6 ms per training step of the transformer programs).
// This file draws the same numbers from the same generator state, in bulk:
// the generator is the MT19937 engine of ATen/core/MT19937RNGEngine.h, read
// from and written back to the state `torch.get_rng_state()` serializes
// (CPUGeneratorImplState in ATen/CPUGeneratorImpl.cpp), and one Bernoulli
// sample is PyTorch's `bernoulli_distribution<double>`: a 64-bit draw made of
// two 32-bit ones (the first is the high half), its low 53 bits scaled to
// [0, 1) and compared with p. The comparison is done on the integers, which
// is exact: bits * 2^-53 < p exactly when bits < ceil(p * 2^53).
//
// The result is bit for bit PyTorch's, and so is the generator's state
// after it (test/python/test_host_rng.py checks both against torch).
//
//===----------------------------------------------------------------------===//

#include "HostRng.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace py = pybind11;

namespace {

constexpr int kStateWords = 624;
constexpr int kShift = 397;

/// PyTorch's serialized CPU generator state (CPUGeneratorImplState; its
/// layout has not changed from torch 1.x to 2.x).
struct LegacyState {
  uint64_t initialSeed;
  int32_t left;
  int32_t seeded;
  uint64_t next;
  uint64_t state[kStateWords];
  double normalX;
  double normalY;
  double normalRho;
  int32_t normalIsValid;
};
struct GeneratorState {
  LegacyState legacy;
  float nextFloatNormalSample;
  bool isNextFloatNormalSampleValid;
};
static_assert(sizeof(GeneratorState) == 5056,
              "torch.get_rng_state() is 5056 bytes on 64-bit platforms");

/// ATen's MT19937: `left` counts down to the call that regenerates the
/// state, `next` indexes the next word handed out.
class Mt19937 {
public:
  /// Loads `s`; false when it is not a state ATen would produce.
  bool load(const GeneratorState &s) {
    left = s.legacy.left;
    next = s.legacy.next;
    // ATen's validity check, and that the words before the next
    // regeneration lie inside the state (ATen would read past it).
    if (left < 1 || left > kStateWords || next > kStateWords ||
        next + static_cast<uint64_t>(left) - 1 > kStateWords)
      return false;
    for (int i = 0; i < kStateWords; ++i)
      mt[i] = static_cast<uint32_t>(s.legacy.state[i]);
    return true;
  }

  void store(GeneratorState &s) const {
    s.legacy.left = left;
    s.legacy.next = next;
    for (int i = 0; i < kStateWords; ++i)
      s.legacy.state[i] = mt[i];
  }

  /// The next `n` words, as `n` calls of ATen's `mt19937::operator()`.
  void draw(uint32_t *out, size_t n) {
    while (n) {
      if (left == 1) {
        // This call regenerates, then hands out word 0 and leaves
        // left = 624, next = 1: as if left were 625 before it.
        regenerate();
        left = kStateWords + 1;
        next = 0;
      }
      size_t k = std::min<size_t>(static_cast<size_t>(left) - 1, n);
      const uint32_t *src = mt + next;
      for (size_t i = 0; i < k; ++i)
        out[i] = temper(src[i]);
      next += k;
      left -= static_cast<int32_t>(k);
      out += k;
      n -= k;
    }
  }

private:
  static uint32_t twist(uint32_t u, uint32_t v) {
    uint32_t mixed = (u & 0x80000000u) | (v & 0x7fffffffu);
    return (mixed >> 1) ^ ((0u - (v & 1u)) & 0x9908b0dfu);
  }
  static uint32_t temper(uint32_t y) {
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
  }
  void regenerate() {
    int i = 0;
    for (; i < kStateWords - kShift; ++i)
      mt[i] = mt[i + kShift] ^ twist(mt[i], mt[i + 1]);
    for (; i < kStateWords - 1; ++i)
      mt[i] = mt[i + kShift - kStateWords] ^ twist(mt[i], mt[i + 1]);
    mt[i] = mt[kShift - 1] ^ twist(mt[i], mt[0]);
  }

  uint32_t mt[kStateWords];
  int32_t left = 1;
  uint64_t next = 0;
};

/// Fills `out[0, n)` with Bernoulli(p) samples as 1 / 0 of type T.
template <typename T>
void bernoulli(Mt19937 &engine, T *out, size_t n, uint64_t threshold) {
  constexpr size_t kChunk = 512; // samples per batch of drawn words
  uint32_t words[2 * kChunk];
  // bits = (high & 0x1fffff) << 32 | low < threshold, in 32-bit halves
  // (which vectorize without 64-bit compares).
  const uint32_t thresholdHigh = static_cast<uint32_t>(threshold >> 32);
  const uint32_t thresholdLow = static_cast<uint32_t>(threshold);
  while (n) {
    size_t k = std::min(n, kChunk);
    engine.draw(words, 2 * k);
    for (size_t i = 0; i < k; ++i) {
      uint32_t high = words[2 * i] & 0x1fffffu, low = words[2 * i + 1];
      uint32_t below = (high < thresholdHigh) |
                       ((high == thresholdHigh) & (low < thresholdLow));
      out[i] = static_cast<T>(static_cast<int32_t>(below));
    }
    out += k;
    n -= k;
  }
}

} // namespace

void terra::bindHostRng(py::module_ &m) {
  m.def(
      "rng_bernoulli",
      [](uintptr_t statePtr, size_t stateBytes, uintptr_t outPtr, size_t numel,
         const std::string &dtype, double p) {
        if (stateBytes != sizeof(GeneratorState))
          throw py::value_error("rng_bernoulli: a generator state of " +
                                std::to_string(sizeof(GeneratorState)) +
                                " bytes was expected, not " +
                                std::to_string(stateBytes));
        if (!(p >= 0.0 && p <= 1.0))
          throw py::value_error("rng_bernoulli: p must be in [0, 1], not " +
                                std::to_string(p));
        if (dtype != "float32" && dtype != "float64")
          throw py::value_error("rng_bernoulli: float32 or float64 results "
                                "only, not " +
                                dtype);
        GeneratorState state;
        std::memcpy(&state, reinterpret_cast<const void *>(statePtr),
                    sizeof state);
        Mt19937 engine;
        if (!engine.load(state))
          throw py::value_error("rng_bernoulli: not a valid MT19937 state");
        // bits * 2^-53 < p  <=>  bits < ceil(p * 2^53) (both sides exact).
        auto threshold = static_cast<uint64_t>(std::ceil(std::ldexp(p, 53)));
        {
          py::gil_scoped_release release;
          if (dtype == "float32")
            bernoulli(engine, reinterpret_cast<float *>(outPtr), numel,
                      threshold);
          else
            bernoulli(engine, reinterpret_cast<double *>(outPtr), numel,
                      threshold);
        }
        engine.store(state);
        std::memcpy(reinterpret_cast<void *>(statePtr), &state, sizeof state);
      },
      py::arg("state_ptr"), py::arg("state_bytes"), py::arg("out_ptr"),
      py::arg("numel"), py::arg("dtype"), py::arg("p"),
      "Draws `numel` Bernoulli(p) samples into the contiguous float32 or "
      "float64 buffer at `out_ptr` from the PyTorch CPU generator state at "
      "`state_ptr` (torch.get_rng_state()'s bytes), which it advances: "
      "bit for bit `out.bernoulli_(p)` with that state.");
}

//===- LibraryConv.cpp - Convolution entry points for graphs --------------===//
//
// The 2-D convolution entry points that `terra-library-convolutions` emits
// calls to (ABI in include/terra/Runtime/LibraryEntryPoints.h): forward
// (with an optional bias), gradient of the input and gradient of the
// weight, each with stride, asymmetric zero padding, dilation and groups,
// overwriting or accumulating into the output.
//
// f32 runs on oneDNN (Debian's libdnnl 2.6, the library eager PyTorch uses
// for these convolutions on CPU). For each problem -- kind, sizes, strides
// of every operand, parameters, bias and accumulation -- a plan is built
// once and cached: the convolution primitive, plus a reorder for each
// operand whose layout is not the one the primitive uses. The layout rule,
// measured on the ResNet-style benchmark shapes (docs/runtime.md):
// convolutions with a spatial kernel let oneDNN pick its blocked layouts
// (format_tag::any: nChw16c on AVX-512) and pay the reorders from and to
// NCHW, which its direct kernels repay several times (3x3: 2-3x faster than
// on NCHW); a 1x1 convolution is a plain GEMM per image, which oneDNN runs
// on NCHW as it is, cheaper than the reorders, except the weight gradient
// with 16 or more input and output channels per group, where the blocked
// kernel wins (up to 4x). An operand in the primitive's layout is used in
// place; any other strided layout (a transposed or sliced view) goes
// through the reorder. Accumulating (`overwrite` = 0) writes the result
// through a reorder with a sum post-op, so the output's old values are
// added to.
//
// Plans are shared between threads (graphs run on runner threads, several
// at a time): the cache is guarded by a mutex (creation happens outside
// it), primitives are used with user scratchpads, and each thread has its
// own stream and scratch buffers (the reorder targets, the scratchpad),
// which grow to the largest problem the thread ran and are reused. oneDNN
// runs its kernels with OpenMP on the calling thread's team; that thread's
// OpenMP thread count is set to the graphs' library thread count
// (terra::rt::libraryThreads, which the Python front end sets to one fewer
// than torch's threads), and primitives, generated for a thread count, are
// cached per count.
//
// f64 (which oneDNN's convolutions do not take), problems with an empty
// dimension or a broadcast (zero-stride) operand, and any problem oneDNN
// rejects run as im2col + GEMM (OpenBLAS, LibraryGemm.h) per image and
// group, with the padding applied while gathering the columns; the input
// gradient scatters the columns back (col2im).
//
// None of these functions waits on the host, so cancellation never unwinds
// through them; an argument error fails the run from the entry point's own
// frame, before any object with a destructor exists.
//
//===----------------------------------------------------------------------===//
#include "CompileInternal.h"
#include "LibraryGemm.h"
#include "terra/Runtime/LibraryEntryPoints.h"

#include <oneapi/dnnl/dnnl.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>
#include <unordered_map>
#include <vector>

using terra::rt::detail::gemm;
using terra::rt::detail::Mat;

namespace {

enum class ConvKind { Forward, GradInput, GradWeight };

/// A convolution problem in forward terms: x (N, C, H, W) and the weight
/// (F, C/G, KH, KW) give y (N, F, OH, OW).
struct ConvProblem {
  int64_t n, c, h, w, f, kh, kw, oh, ow;
  int64_t sh, sw, plh, plw, prh, prw, dh, dw, groups;
  int64_t cg() const { return c / groups; }
  int64_t fg() const { return f / groups; }
};

/// A rank-4 strided view.
template <typename T> struct View {
  T *p;
  std::array<int64_t, 4> size, stride;
  T &at(int64_t a, int64_t b, int64_t c, int64_t d) const {
    return p[a * stride[0] + b * stride[1] + c * stride[2] + d * stride[3]];
  }
};

template <typename T> View<T> viewOf(StridedMemRefType<T, 4> *m) {
  View<T> v{m->data + m->offset, {}, {}};
  for (int d = 0; d < 4; ++d) {
    v.size[d] = m->sizes[d];
    v.stride[d] = m->strides[d];
  }
  return v;
}

/// The operands of one call in forward roles: x (N, C, H, W), w (F, C/G,
/// KH, KW), y (N, F, OH, OW) and the bias (F elements, or null). The
/// output is y for the forward, x for the input gradient and w for the
/// weight gradient.
template <typename T> struct ConvOperands {
  View<T> x, w, y;
  T *b;
  int64_t bStride;
};

/// Whether the operands' sizes and the parameters form a convolution.
template <typename T>
bool consistent(const ConvOperands<T> &o, const ConvProblem &p) {
  if (p.groups < 1 || p.sh < 1 || p.sw < 1 || p.dh < 1 || p.dw < 1 ||
      p.plh < 0 || p.plw < 0 || p.prh < 0 || p.prw < 0 || p.kh < 1 || p.kw < 1)
    return false;
  for (const View<T> *v : {&o.x, &o.w, &o.y})
    for (int64_t s : v->size)
      if (s < 0)
        return false;
  if (p.c % p.groups || p.f % p.groups || o.w.size[1] * p.groups != p.c ||
      o.y.size[0] != p.n || o.y.size[1] != p.f)
    return false;
  int64_t nh = p.h + p.plh + p.prh - p.dh * (p.kh - 1) - 1;
  int64_t nw = p.w + p.plw + p.prw - p.dw * (p.kw - 1) - 1;
  return nh >= 0 && nw >= 0 && p.oh == nh / p.sh + 1 && p.ow == nw / p.sw + 1;
}

//===----------------------------------------------------------------------===//
// im2col + GEMM (f64, and the f32 problems oneDNN does not take)
//===----------------------------------------------------------------------===//

/// The output positions [lo, hi) of one dimension whose input index
/// o * stride + offset (offset = k * dilation - padding) lies in [0, size).
std::pair<int64_t, int64_t> validRange(int64_t outSize, int64_t size,
                                       int64_t stride, int64_t offset) {
  auto ceilDiv = [](int64_t a, int64_t b) {
    return a >= 0 ? (a + b - 1) / b : -((-a) / b);
  };
  int64_t lo = std::max<int64_t>(0, ceilDiv(-offset, stride));
  int64_t hi = std::min(outSize, ceilDiv(size - offset, stride));
  return {lo, std::max(lo, hi)};
}

/// col (Cg*KH*KW x OH*OW, row-major) of image `ni`, channels [c0, c0 + Cg):
/// row (c, i, j) holds what kernel position (i, j) of channel c sees at
/// each output position, zero where that falls into the padding.
template <typename T>
void im2col(const View<T> &x, int64_t ni, int64_t c0, const ConvProblem &p,
            T *col) {
  const int64_t spatial = p.oh * p.ow;
  for (int64_t c = 0; c < p.cg(); ++c)
    for (int64_t i = 0; i < p.kh; ++i)
      for (int64_t j = 0; j < p.kw; ++j) {
        T *row = col + ((c * p.kh + i) * p.kw + j) * spatial;
        int64_t offH = i * p.dh - p.plh, offW = j * p.dw - p.plw;
        auto [ylo, yhi] = validRange(p.oh, p.h, p.sh, offH);
        auto [xlo, xhi] = validRange(p.ow, p.w, p.sw, offW);
        std::fill(row, row + ylo * p.ow, T(0));
        for (int64_t oy = ylo; oy < yhi; ++oy) {
          T *d = row + oy * p.ow;
          const T *s = &x.at(ni, c0 + c, oy * p.sh + offH, 0);
          std::fill(d, d + xlo, T(0));
          for (int64_t ox = xlo; ox < xhi; ++ox)
            d[ox] = s[(ox * p.sw + offW) * x.stride[3]];
          std::fill(d + xhi, d + p.ow, T(0));
        }
        std::fill(row + yhi * p.ow, row + spatial, T(0));
      }
}

/// The inverse scatter: x[ni, c0 + c, ...] += col, position by position
/// (positions in the padding are dropped).
template <typename T>
void col2imAdd(const T *col, const View<T> &x, int64_t ni, int64_t c0,
               const ConvProblem &p) {
  const int64_t spatial = p.oh * p.ow;
  for (int64_t c = 0; c < p.cg(); ++c)
    for (int64_t i = 0; i < p.kh; ++i)
      for (int64_t j = 0; j < p.kw; ++j) {
        const T *row = col + ((c * p.kh + i) * p.kw + j) * spatial;
        int64_t offH = i * p.dh - p.plh, offW = j * p.dw - p.plw;
        auto [ylo, yhi] = validRange(p.oh, p.h, p.sh, offH);
        auto [xlo, xhi] = validRange(p.ow, p.w, p.sw, offW);
        for (int64_t oy = ylo; oy < yhi; ++oy) {
          T *d = &x.at(ni, c0 + c, oy * p.sh + offH, 0);
          for (int64_t ox = xlo; ox < xhi; ++ox)
            d[(ox * p.sw + offW) * x.stride[3]] += row[oy * p.ow + ox];
        }
      }
}

/// The weight rows of group g as an Fg x Cg*KH*KW matrix (packed into
/// `buf` when its (c, i, j) elements are not contiguous).
template <typename T>
Mat<T> groupWeight(const View<T> &w, int64_t g, const ConvProblem &p,
                   std::vector<T> &buf) {
  const int64_t fg = p.fg(), ckk = p.cg() * p.kh * p.kw;
  T *base = &w.at(g * fg, 0, 0, 0);
  if (w.stride[3] == 1 && w.stride[2] == p.kw && w.stride[1] == p.kh * p.kw)
    return {base, fg, ckk, w.stride[0], 1};
  buf.resize(fg * ckk);
  for (int64_t f = 0; f < fg; ++f)
    for (int64_t c = 0; c < p.cg(); ++c)
      for (int64_t i = 0; i < p.kh; ++i)
        for (int64_t j = 0; j < p.kw; ++j)
          buf[((f * p.cg() + c) * p.kh + i) * p.kw + j] =
              w.at(g * fg + f, c, i, j);
  return {buf.data(), fg, ckk, ckk, 1};
}

/// Channels [f0, f0 + rows) of image ni of a rank-4 view as a
/// rows x (H*W) matrix, packed into `buf` when the spatial dims do not
/// flatten.
template <typename T>
Mat<T> imageRows(const View<T> &v, int64_t ni, int64_t f0, int64_t rows,
                 std::vector<T> &buf) {
  const int64_t hh = v.size[2], ww = v.size[3];
  T *base = &v.at(ni, f0, 0, 0);
  if (v.stride[3] == 1 && (hh == 1 || v.stride[2] == ww))
    return {base, rows, hh * ww, v.stride[1], 1};
  buf.resize(rows * hh * ww);
  for (int64_t f = 0; f < rows; ++f)
    for (int64_t r = 0; r < hh; ++r)
      for (int64_t q = 0; q < ww; ++q)
        buf[(f * hh + r) * ww + q] = v.at(ni, f0 + f, r, q);
  return {buf.data(), rows, hh * ww, hh * ww, 1};
}

/// out (rows x OH*OW: channels [f0, f0 + rows) of image ni) (+)= a * b.
template <typename T>
void gemmIntoImage(Mat<T> a, Mat<T> b, const View<T> &out, int64_t ni,
                   int64_t f0, int64_t rows, bool overwrite) {
  const int64_t hh = out.size[2], ww = out.size[3], spatial = hh * ww;
  T *base = &out.at(ni, f0, 0, 0);
  if (out.stride[3] == 1 && (hh == 1 || out.stride[2] == ww)) {
    gemm(a, b, Mat<T>{base, rows, spatial, out.stride[1], 1}, overwrite);
    return;
  }
  // Spatial dims that do not flatten: compute into scratch, then scatter.
  std::vector<T> tmp(rows * spatial);
  gemm(a, b, Mat<T>{tmp.data(), rows, spatial, spatial, 1}, true);
  for (int64_t f = 0; f < rows; ++f)
    for (int64_t r = 0; r < hh; ++r)
      for (int64_t q = 0; q < ww; ++q) {
        T &dst = out.at(ni, f0 + f, r, q);
        T v = tmp[(f * hh + r) * ww + q];
        dst = overwrite ? v : dst + v;
      }
}

template <typename T>
void im2colForward(const ConvOperands<T> &o, const ConvProblem &p,
                   bool overwrite) {
  const int64_t ckk = p.cg() * p.kh * p.kw, spatial = p.oh * p.ow;
  std::vector<T> col(ckk * spatial), wbuf;
  for (int64_t g = 0; g < p.groups; ++g) {
    Mat<T> wm = groupWeight(o.w, g, p, wbuf);
    for (int64_t ni = 0; ni < p.n; ++ni) {
      im2col(o.x, ni, g * p.cg(), p, col.data());
      gemmIntoImage(wm, Mat<T>{col.data(), ckk, spatial, spatial, 1}, o.y, ni,
                    g * p.fg(), p.fg(), overwrite);
    }
  }
  if (o.b)
    for (int64_t ni = 0; ni < p.n; ++ni)
      for (int64_t f = 0; f < p.f; ++f)
        for (int64_t r = 0; r < p.oh; ++r)
          for (int64_t q = 0; q < p.ow; ++q)
            o.y.at(ni, f, r, q) += o.b[f * o.bStride];
}

template <typename T>
void im2colGradInput(const ConvOperands<T> &o, const ConvProblem &p,
                     bool overwrite) {
  const View<T> &dx = o.x;
  if (overwrite)
    for (int64_t ni = 0; ni < p.n; ++ni)
      for (int64_t c = 0; c < p.c; ++c)
        for (int64_t r = 0; r < p.h; ++r)
          for (int64_t q = 0; q < p.w; ++q)
            dx.at(ni, c, r, q) = T(0);
  const int64_t ckk = p.cg() * p.kh * p.kw, spatial = p.oh * p.ow;
  if (ckk == 0 || spatial == 0)
    return;
  std::vector<T> col(ckk * spatial), wbuf, dybuf;
  for (int64_t g = 0; g < p.groups; ++g) {
    // The group's weight transposed: (Cg*KH*KW x Fg).
    Mat<T> wm = groupWeight(o.w, g, p, wbuf);
    Mat<T> wt{wm.p, ckk, p.fg(), wm.cs, wm.rs};
    for (int64_t ni = 0; ni < p.n; ++ni) {
      Mat<T> dy = imageRows(o.y, ni, g * p.fg(), p.fg(), dybuf);
      gemm(wt, dy, Mat<T>{col.data(), ckk, spatial, spatial, 1}, true);
      col2imAdd(col.data(), dx, ni, g * p.cg(), p);
    }
  }
}

template <typename T>
void im2colGradWeight(const ConvOperands<T> &o, const ConvProblem &p,
                      bool overwrite) {
  const View<T> &dw = o.w;
  const int64_t fg = p.fg(), cg = p.cg(), ckk = cg * p.kh * p.kw;
  const int64_t spatial = p.oh * p.ow;
  if (fg == 0 || ckk == 0)
    return;
  // dw's group rows as an Fg x Cg*KH*KW matrix, or scratch when its
  // (c, i, j) elements are not contiguous.
  bool flat =
      dw.stride[3] == 1 && dw.stride[2] == p.kw && dw.stride[1] == p.kh * p.kw;
  std::vector<T> col(ckk * spatial), obuf(flat ? 0 : fg * ckk), dybuf;
  for (int64_t g = 0; g < p.groups; ++g) {
    auto outAt = [&](int64_t f, int64_t k) -> T & {
      return dw.at(g * fg + f, k / (p.kh * p.kw), k / p.kw % p.kh, k % p.kw);
    };
    Mat<T> om = flat ? Mat<T>{&dw.at(g * fg, 0, 0, 0), fg, ckk, dw.stride[0], 1}
                     : Mat<T>{obuf.data(), fg, ckk, ckk, 1};
    if (!flat && !overwrite)
      for (int64_t f = 0; f < fg; ++f)
        for (int64_t k = 0; k < ckk; ++k)
          om.at(f, k) = outAt(f, k);
    bool first = overwrite; // whether the next product overwrites om
    if ((p.n == 0 || spatial == 0) && first)
      for (int64_t f = 0; f < fg; ++f)
        for (int64_t k = 0; k < ckk; ++k)
          om.at(f, k) = T(0);
    for (int64_t ni = 0; ni < p.n && spatial > 0; ++ni) {
      im2col(o.x, ni, g * cg, p, col.data());
      Mat<T> dy = imageRows(o.y, ni, g * fg, fg, dybuf);
      // col^T: (OH*OW x Cg*KH*KW), a column-major view of col.
      gemm(dy, Mat<T>{col.data(), spatial, ckk, 1, spatial}, om, first);
      first = false;
    }
    if (!flat)
      for (int64_t f = 0; f < fg; ++f)
        for (int64_t k = 0; k < ckk; ++k)
          outAt(f, k) = om.at(f, k);
  }
}

template <typename T>
void im2colConv(ConvKind kind, const ConvOperands<T> &o, const ConvProblem &p,
                bool overwrite) {
  switch (kind) {
  case ConvKind::Forward:
    return im2colForward(o, p, overwrite);
  case ConvKind::GradInput:
    return im2colGradInput(o, p, overwrite);
  case ConvKind::GradWeight:
    return im2colGradWeight(o, p, overwrite);
  }
}

//===----------------------------------------------------------------------===//
// oneDNN (f32)
//===----------------------------------------------------------------------===//

using dnnl::memory;
using Tag = memory::format_tag;

/// The engine every plan uses (never destroyed: plans may outlive statics).
const dnnl::engine &cpuEngine() {
  static const auto *e = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *e;
}

/// Slots of a plan's operands, in forward roles, and the scratchpad.
enum Slot { kX, kW, kY, kB, kNumOperands, kScratch = kNumOperands };

/// Per-thread stream and scratch buffers (reorder targets, scratchpad),
/// grown to the largest problem seen and reused.
struct ThreadState {
  dnnl::stream stream{cpuEngine()};
  struct Buffer {
    void *p = nullptr;
    size_t size = 0;
  };
  std::array<Buffer, kNumOperands + 1> buffers;
  int threads = 0; // the library thread count last applied to this thread

  void *buffer(int slot, size_t bytes) {
    Buffer &b = buffers[slot];
    if (b.size < bytes) {
      std::free(b.p);
      b.size = (bytes + 63) / 64 * 64;
      b.p = std::aligned_alloc(64, b.size);
    }
    return b.p;
  }
  ~ThreadState() {
    for (Buffer &b : buffers)
      std::free(b.p);
  }
};

ThreadState &threadState() {
  thread_local ThreadState state;
  return state;
}

/// A plan's operand: the caller's layout, the primitive's, and the reorder
/// between them when they differ.
struct PlanOperand {
  bool used = false, output = false, direct = true;
  int arg = 0;
  memory::desc user, prim, reorderScratchpad;
  dnnl::primitive reorder;
};

struct Plan {
  dnnl::primitive conv;
  memory::desc scratchpad;
  std::array<PlanOperand, kNumOperands> operands;
  size_t scratchBytes = 0;
};

/// The caller's layout of an operand as a oneDNN descriptor: the plain
/// (row-major) one when the strides are that, so that it compares equal to
/// the plain layouts oneDNN picks; else the strides themselves.
memory::desc userDesc(const memory::dims &dims, memory::dims strides) {
  int64_t expect = 1;
  bool dense = true;
  for (int d = int(dims.size()) - 1; d >= 0; --d) {
    if (dims[d] != 1 && strides[d] != expect)
      dense = false;
    expect *= dims[d];
  }
  static const Tag plain[] = {Tag::undef, Tag::a,    Tag::ab,
                              Tag::abc,   Tag::abcd, Tag::abcde};
  if (dense)
    return memory::desc(dims, memory::data_type::f32, plain[dims.size()]);
  for (size_t d = 0; d < dims.size(); ++d)
    if (dims[d] == 1)
      strides[d] = 1; // any value: the dimension is never stepped
  return memory::desc(dims, memory::data_type::f32, strides);
}

/// The dims and strides of the weight as oneDNN sees it: (G, F/G, C/G, KH,
/// KW) with groups, else (F, C, KH, KW).
std::pair<memory::dims, memory::dims> weightDims(const View<float> &w,
                                                 const ConvProblem &p) {
  if (p.groups == 1)
    return {{p.f, p.cg(), p.kh, p.kw},
            {w.stride[0], w.stride[1], w.stride[2], w.stride[3]}};
  return {{p.groups, p.fg(), p.cg(), p.kh, p.kw},
          {p.fg() * w.stride[0], w.stride[0], w.stride[1], w.stride[2],
           w.stride[3]}};
}

/// Builds the plan of a problem; throws dnnl::error if oneDNN rejects it.
std::shared_ptr<const Plan> buildPlan(ConvKind kind,
                                      const ConvOperands<float> &o,
                                      const ConvProblem &p, bool accumulate) {
  using dnnl::algorithm;
  using dnnl::primitive_attr;
  const dnnl::engine &eng = cpuEngine();
  // The layout rule (see the file comment).
  bool blocked = p.kh * p.kw > 1 ||
                 (kind == ConvKind::GradWeight && p.cg() >= 16 && p.fg() >= 16);
  auto [wDims, wStrides] = weightDims(o.w, p);
  memory::dims xDims{p.n, p.c, p.h, p.w}, yDims{p.n, p.f, p.oh, p.ow};
  auto desc = [&](const memory::dims &dims, Tag plain) {
    return memory::desc(dims, memory::data_type::f32,
                        blocked ? Tag::any : plain);
  };
  memory::desc xm = desc(xDims, Tag::abcd), ym = desc(yDims, Tag::abcd);
  memory::desc wm = desc(wDims, p.groups > 1 ? Tag::abcde : Tag::abcd);
  memory::desc bm({p.f}, memory::data_type::f32, Tag::a);
  memory::dims strides{p.sh, p.sw}, dilates{p.dh - 1, p.dw - 1};
  memory::dims padL{p.plh, p.plw}, padR{p.prh, p.prw};

  primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  bool bias = kind == ConvKind::Forward && o.b;
  auto fwdDesc =
      bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                             algorithm::convolution_direct, xm,
                                             wm, bm, ym, strides, dilates, padL,
                                             padR)
           : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                             algorithm::convolution_direct, xm,
                                             wm, ym, strides, dilates, padL,
                                             padR);
  dnnl::convolution_forward::primitive_desc fwd(fwdDesc, attr, eng);

  auto plan = std::make_shared<Plan>();
  auto use = [&](Slot s, int arg, bool output, const memory::desc &prim) {
    PlanOperand &op = plan->operands[s];
    op.used = true;
    op.arg = arg;
    op.output = output;
    op.prim = prim;
  };
  switch (kind) {
  case ConvKind::Forward:
    plan->conv = dnnl::convolution_forward(fwd);
    plan->scratchpad = fwd.scratchpad_desc();
    use(kX, DNNL_ARG_SRC, false, fwd.src_desc());
    use(kW, DNNL_ARG_WEIGHTS, false, fwd.weights_desc());
    use(kY, DNNL_ARG_DST, true, fwd.dst_desc());
    if (bias)
      use(kB, DNNL_ARG_BIAS, false, fwd.bias_desc());
    break;
  case ConvKind::GradInput: {
    dnnl::convolution_backward_data::primitive_desc bwd(
        {algorithm::convolution_direct, xm, wm, ym, strides, dilates, padL,
         padR},
        attr, eng, fwd);
    plan->conv = dnnl::convolution_backward_data(bwd);
    plan->scratchpad = bwd.scratchpad_desc();
    use(kX, DNNL_ARG_DIFF_SRC, true, bwd.diff_src_desc());
    use(kW, DNNL_ARG_WEIGHTS, false, bwd.weights_desc());
    use(kY, DNNL_ARG_DIFF_DST, false, bwd.diff_dst_desc());
    break;
  }
  case ConvKind::GradWeight: {
    dnnl::convolution_backward_weights::primitive_desc bwd(
        {algorithm::convolution_direct, xm, wm, ym, strides, dilates, padL,
         padR},
        attr, eng, fwd);
    plan->conv = dnnl::convolution_backward_weights(bwd);
    plan->scratchpad = bwd.scratchpad_desc();
    use(kX, DNNL_ARG_SRC, false, bwd.src_desc());
    use(kW, DNNL_ARG_DIFF_WEIGHTS, true, bwd.diff_weights_desc());
    use(kY, DNNL_ARG_DIFF_DST, false, bwd.diff_dst_desc());
    break;
  }
  }

  plan->scratchBytes = plan->scratchpad.get_size();
  const View<float> *views[] = {&o.x, nullptr, &o.y};
  for (int s = 0; s < kNumOperands; ++s) {
    PlanOperand &op = plan->operands[s];
    if (!op.used)
      continue;
    if (s == kW)
      op.user = userDesc(wDims, wStrides);
    else if (s == kB)
      op.user = userDesc({p.f}, {o.bStride});
    else
      op.user = userDesc({views[s]->size.begin(), views[s]->size.end()},
                         {views[s]->stride.begin(), views[s]->stride.end()});
    // An accumulated output always goes through a reorder with a sum.
    op.direct = op.prim == op.user && !(op.output && accumulate);
    if (op.direct)
      continue;
    primitive_attr rattr;
    rattr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (op.output && accumulate) {
      dnnl::post_ops sum;
      sum.append_sum(1.0f);
      rattr.set_post_ops(sum);
    }
    auto rpd =
        op.output
            ? dnnl::reorder::primitive_desc(eng, op.prim, eng, op.user, rattr)
            : dnnl::reorder::primitive_desc(eng, op.user, eng, op.prim, rattr);
    op.reorder = dnnl::reorder(rpd);
    op.reorderScratchpad = rpd.scratchpad_desc();
    plan->scratchBytes =
        std::max(plan->scratchBytes, op.reorderScratchpad.get_size());
  }
  return plan;
}

/// The cache key of a problem: everything its plan depends on. Strides of
/// dims of size 1 do not matter and are left out.
std::vector<int64_t> planKey(ConvKind kind, const ConvOperands<float> &o,
                             const ConvProblem &p, bool accumulate,
                             int threads) {
  std::vector<int64_t> key{int64_t(kind), o.b != nullptr,
                           accumulate,    threads,
                           p.n,           p.c,
                           p.h,           p.w,
                           p.f,           p.kh,
                           p.kw,          p.oh,
                           p.ow,          p.sh,
                           p.sw,          p.plh,
                           p.plw,         p.prh,
                           p.prw,         p.dh,
                           p.dw,          p.groups};
  for (const View<float> *v : {&o.x, &o.w, &o.y})
    for (int d = 0; d < 4; ++d)
      key.push_back(v->size[d] == 1 ? 0 : v->stride[d]);
  key.push_back(o.b ? o.bStride : 0);
  return key;
}

struct KeyHash {
  size_t operator()(const std::vector<int64_t> &key) const {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int64_t v : key)
      h = (h ^ uint64_t(v)) * 0x100000001b3ull;
    return h;
  }
};

/// Plans by key; a null plan records a problem oneDNN rejected.
struct PlanCache {
  std::mutex mutex;
  std::unordered_map<std::vector<int64_t>, std::shared_ptr<const Plan>, KeyHash>
      plans;
};

/// Bounds the cache: a graph has a fixed set of problems, but a process
/// may compile many graphs.
constexpr size_t kMaxPlans = 4096;

std::shared_ptr<const Plan> getPlan(ConvKind kind, const ConvOperands<float> &o,
                                    const ConvProblem &p, bool accumulate,
                                    int threads) {
  static auto *cache = new PlanCache;
  std::vector<int64_t> key = planKey(kind, o, p, accumulate, threads);
  {
    std::lock_guard<std::mutex> lock(cache->mutex);
    auto it = cache->plans.find(key);
    if (it != cache->plans.end())
      return it->second;
  }
  // Built outside the lock (creating primitives generates code, which takes
  // milliseconds); threads racing on one key build it twice, the first
  // insertion wins.
  std::shared_ptr<const Plan> plan;
  try {
    plan = buildPlan(kind, o, p, accumulate);
  } catch (const dnnl::error &) {
    plan = nullptr; // oneDNN does not take this problem: im2col
  }
  std::lock_guard<std::mutex> lock(cache->mutex);
  if (cache->plans.size() >= kMaxPlans)
    cache->plans.clear();
  return cache->plans.emplace(std::move(key), std::move(plan)).first->second;
}

/// The OpenMP runtime oneDNN uses (libgomp for Debian's libdnnl), found at
/// run time so that the build needs no OpenMP flags.
struct OpenMP {
  void (*setNumThreads)(int) = nullptr;
  int (*getMaxThreads)() = nullptr;
};
const OpenMP &openMP() {
  static const OpenMP omp = [] {
    OpenMP r;
    for (const char *lib : {"libgomp.so.1", "libomp.so.5", "libiomp5.so"})
      if (void *h = dlopen(lib, RTLD_LAZY | RTLD_NOLOAD)) {
        r.setNumThreads =
            reinterpret_cast<void (*)(int)>(dlsym(h, "omp_set_num_threads"));
        r.getMaxThreads =
            reinterpret_cast<int (*)()>(dlsym(h, "omp_get_max_threads"));
        break;
      }
    return r;
  }();
  return omp;
}

/// The number of threads oneDNN runs with on this thread: the graphs'
/// library thread count (terra::rt::libraryThreads), set as this thread's
/// OpenMP thread count when it changed (OpenMP keeps it per thread, so the
/// host's own setting is not touched).
int threadCount(ThreadState &ts) {
  int n = terra::rt::libraryThreads();
  if (n != ts.threads) {
    const OpenMP &omp = openMP();
    if (n > 0 && omp.setNumThreads)
      omp.setNumThreads(n);
    ts.threads = n;
  }
  return openMP().getMaxThreads ? openMP().getMaxThreads() : n;
}

/// Runs the problem on oneDNN; false when it has no plan for it.
bool dnnlConv(ConvKind kind, const ConvOperands<float> &o, const ConvProblem &p,
              bool overwrite) {
  // Empty dims and broadcast (zero-stride) operands go to im2col.
  for (const View<float> *v : {&o.x, &o.w, &o.y})
    for (int d = 0; d < 4; ++d)
      if (v->size[d] == 0 || (v->size[d] > 1 && v->stride[d] <= 0))
        return false;
  if (o.b && p.f > 1 && o.bStride <= 0)
    return false;
  // Primitives are generated for the thread count at their creation: it is
  // part of the key.
  ThreadState &ts = threadState();
  std::shared_ptr<const Plan> plan =
      getPlan(kind, o, p, !overwrite, threadCount(ts));
  if (!plan)
    return false;

  const dnnl::engine &eng = cpuEngine();
  void *ptrs[kNumOperands] = {o.x.p, o.w.p, o.y.p, o.b};
  std::array<memory, kNumOperands> user, prim;
  std::unordered_map<int, memory> args;
  for (int s = 0; s < kNumOperands; ++s) {
    const PlanOperand &op = plan->operands[s];
    if (!op.used)
      continue;
    user[s] = memory(op.user, eng, ptrs[s]);
    prim[s] = op.direct
                  ? user[s]
                  : memory(op.prim, eng, ts.buffer(s, op.prim.get_size()));
    args.emplace(op.arg, prim[s]);
  }
  void *scratch = ts.buffer(kScratch, plan->scratchBytes);
  auto reorder = [&](const PlanOperand &op, const memory &from,
                     const memory &to) {
    op.reorder.execute(
        ts.stream,
        {{DNNL_ARG_FROM, from},
         {DNNL_ARG_TO, to},
         {DNNL_ARG_SCRATCHPAD, memory(op.reorderScratchpad, eng, scratch)}});
  };
  for (int s = 0; s < kNumOperands; ++s) {
    const PlanOperand &op = plan->operands[s];
    if (op.used && !op.direct && !op.output)
      reorder(op, user[s], prim[s]);
  }
  args.emplace(DNNL_ARG_SCRATCHPAD, memory(plan->scratchpad, eng, scratch));
  plan->conv.execute(ts.stream, args);
  for (int s = 0; s < kNumOperands; ++s) {
    const PlanOperand &op = plan->operands[s];
    if (op.used && !op.direct && op.output)
      reorder(op, prim[s], user[s]);
  }
  ts.stream.wait();
  return true;
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

std::atomic<uint64_t> onednnCalls{0}, im2colCalls{0};

/// Runs a checked problem (every C++ object of a call lives here, below
/// the entry point's frame).
template <typename T>
void runConv(ConvKind kind, const ConvOperands<T> &o, const ConvProblem &p,
             bool overwrite) {
  if constexpr (std::is_same_v<T, float>) {
    try {
      if (dnnlConv(kind, o, p, overwrite)) {
        onednnCalls.fetch_add(1, std::memory_order_relaxed);
        return;
      }
    } catch (const dnnl::error &) {
      // Execution failed (out of memory). An accumulated output is only
      // written by the last reorder, so im2col can still start over.
    }
  }
  im2colConv(kind, o, p, overwrite);
  im2colCalls.fetch_add(1, std::memory_order_relaxed);
}

template <typename T>
ConvProblem problemOf(const ConvOperands<T> &o, int64_t sh, int64_t sw,
                      int64_t plh, int64_t plw, int64_t prh, int64_t prw,
                      int64_t dh, int64_t dw, int64_t groups) {
  ConvProblem p{o.x.size[0], o.x.size[1], o.x.size[2], o.x.size[3], o.w.size[0],
                o.w.size[2], o.w.size[3], o.y.size[2], o.y.size[3], sh,
                sw,          plh,         plw,         prh,         prw,
                dh,          dw,          groups};
  // A negative padding after the input: the one the sizes call for
  // (include/terra/Runtime/LibraryEntryPoints.h); if there is none it stays
  // negative, and the call fails its check.
  if (prh < 0)
    if (int64_t high =
            terra::rt::convHighPadding(p.h, p.oh, p.kh, sh, dh, plh, -1 - prh);
        high >= 0)
      p.prh = high;
  if (prw < 0)
    if (int64_t high =
            terra::rt::convHighPadding(p.w, p.ow, p.kw, sw, dw, plw, -1 - prw);
        high >= 0)
      p.prw = high;
  return p;
}

} // namespace

terra::rt::ConvCallCounts terra::rt::convCallCounts() {
  return {onednnCalls.load(std::memory_order_relaxed),
          im2colCalls.load(std::memory_order_relaxed)};
}

/// The entry points check their arguments and fail the run on a mismatch
/// (from their own frame, which holds only trivially destructible values).
#define TERRA_CONV_CHECK(OPERANDS, PROBLEM, NAME)                              \
  if (!consistent(OPERANDS, PROBLEM))                                          \
    terra::rt::detail::failLibraryCall(                                        \
        NAME ": the operand sizes do not form a convolution with these "       \
             "parameters");

extern "C" {

#define TERRA_CONV_ENTRY_POINTS(SUFFIX, T)                                     \
  void _mlir_ciface_terra_lib_conv2d_##SUFFIX(                                 \
      StridedMemRefType<T, 4> *x, StridedMemRefType<T, 4> *w,                  \
      StridedMemRefType<T, 1> *b, StridedMemRefType<T, 4> *y, int64_t sh,      \
      int64_t sw, int64_t plh, int64_t plw, int64_t prh, int64_t prw,          \
      int64_t dh, int64_t dw, int64_t groups, int64_t overwrite) {             \
    ConvOperands<T> o{viewOf(x), viewOf(w), viewOf(y),                         \
                      b->sizes[0] ? b->data + b->offset : nullptr,             \
                      b->strides[0]};                                          \
    ConvProblem p = problemOf(o, sh, sw, plh, plw, prh, prw, dh, dw, groups);  \
    TERRA_CONV_CHECK(o, p, "terra_lib_conv2d_" #SUFFIX)                        \
    if (b->sizes[0] != 0 && b->sizes[0] != p.f)                                \
      terra::rt::detail::failLibraryCall(                                      \
          "terra_lib_conv2d_" #SUFFIX ": the bias size is not the number of "  \
          "output channels");                                                  \
    runConv(ConvKind::Forward, o, p, overwrite != 0);                          \
  }                                                                            \
  void _mlir_ciface_terra_lib_conv2d_grad_input_##SUFFIX(                      \
      StridedMemRefType<T, 4> *dy, StridedMemRefType<T, 4> *w,                 \
      StridedMemRefType<T, 4> *dx, int64_t sh, int64_t sw, int64_t plh,        \
      int64_t plw, int64_t prh, int64_t prw, int64_t dh, int64_t dw,           \
      int64_t groups, int64_t overwrite) {                                     \
    ConvOperands<T> o{viewOf(dx), viewOf(w), viewOf(dy), nullptr, 0};          \
    ConvProblem p = problemOf(o, sh, sw, plh, plw, prh, prw, dh, dw, groups);  \
    TERRA_CONV_CHECK(o, p, "terra_lib_conv2d_grad_input_" #SUFFIX)             \
    runConv(ConvKind::GradInput, o, p, overwrite != 0);                        \
  }                                                                            \
  void _mlir_ciface_terra_lib_conv2d_grad_weight_##SUFFIX(                     \
      StridedMemRefType<T, 4> *x, StridedMemRefType<T, 4> *dy,                 \
      StridedMemRefType<T, 4> *dweight, int64_t sh, int64_t sw, int64_t plh,   \
      int64_t plw, int64_t prh, int64_t prw, int64_t dh, int64_t dw,           \
      int64_t groups, int64_t overwrite) {                                     \
    ConvOperands<T> o{viewOf(x), viewOf(dweight), viewOf(dy), nullptr, 0};     \
    ConvProblem p = problemOf(o, sh, sw, plh, plw, prh, prw, dh, dw, groups);  \
    TERRA_CONV_CHECK(o, p, "terra_lib_conv2d_grad_weight_" #SUFFIX)            \
    runConv(ConvKind::GradWeight, o, p, overwrite != 0);                       \
  }

TERRA_CONV_ENTRY_POINTS(f32, float)
TERRA_CONV_ENTRY_POINTS(f64, double)
#undef TERRA_CONV_ENTRY_POINTS
#undef TERRA_CONV_CHECK

} // extern "C"

//===- Optimizer.cpp - Optimizer updates: addcmul, addcdiv, lerp, foreach -===//
//
// The pointwise ops optimizers are written in (SGD momentum, Adam, AdamW,
// RMSprop). In-place forms (`addcmul_`, `_foreach_add_.List`, ...) have
// value semantics here: the result is the updated value and the front end
// rebinds the variable. (add_, mul_, sqrt_, div_ live in Elementwise.cpp.)
//
// A `_foreach_` op takes L tensor lists of length N flattened into its
// operands (list k, element i is operand k*N + i) and has N results; it
// lowers to N independent broadcasting linalg.generic ops, which the
// pipeline's elementwise fusion then fuses with their neighbours. A
// `ScalarList` overload's per-element scalars are the `scalars` arg.
// Arithmetic follows ATen's CPU kernels operation by operation:
//   addcmul: self + value * t1 * t2       addcdiv: self + value * t1 / t2
//   lerp:    |w| < 0.5 ? self + w * (end - self)
//                      : end - (end - self) * (1 - w)
//
//===----------------------------------------------------------------------===//
#include "Utils.h"

using namespace mlir;
using namespace terra;
using namespace terra::lowering;

namespace {

// --- Scalar arithmetic on either float or integer elements ---------------

Value add(OpBuilder &b, Location l, Value x, Value y) {
  if (isFloat(x.getType()))
    return arith::AddFOp::create(b, l, x, y);
  return arith::AddIOp::create(b, l, x, y);
}
Value sub(OpBuilder &b, Location l, Value x, Value y) {
  if (isFloat(x.getType()))
    return arith::SubFOp::create(b, l, x, y);
  return arith::SubIOp::create(b, l, x, y);
}
Value mul(OpBuilder &b, Location l, Value x, Value y) {
  if (isFloat(x.getType()))
    return arith::MulFOp::create(b, l, x, y);
  return arith::MulIOp::create(b, l, x, y);
}
Value div(OpBuilder &b, Location l, Value x, Value y) {
  return arith::DivFOp::create(b, l, x, y); // float only (checked)
}

Value lerp(OpBuilder &b, Location l, Value self, Value end, Value w) {
  Type t = self.getType();
  Value half = scalarConstant(b, l, t, 0.5), one = scalarConstant(b, l, t, 1.0);
  Value small = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OLT,
                                      math::AbsFOp::create(b, l, w), half);
  Value diff = arith::SubFOp::create(b, l, end, self);
  Value lo = arith::AddFOp::create(b, l, self,
                                   arith::MulFOp::create(b, l, w, diff));
  Value hi = arith::SubFOp::create(
      b, l, end,
      arith::MulFOp::create(b, l, diff, arith::SubFOp::create(b, l, one, w)));
  return arith::SelectOp::create(b, l, small, lo, hi);
}

/// A constant of element type `type` from an int/float/bool attribute.
Value scalarFromAttr(OpBuilder &b, Location loc, Attribute a, Type type) {
  if (auto i = dyn_cast_or_null<IntegerAttr>(a)) {
    if (isFloat(type))
      return scalarConstant(b, loc, type, double(i.getInt()));
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, i.getInt()));
  }
  if (auto f = dyn_cast_or_null<FloatAttr>(a); f && isFloat(type))
    return scalarConstant(b, loc, type, f.getValueAsDouble());
  if (auto f = dyn_cast_or_null<FloatAttr>(a))
    return castScalar(
        b, loc,
        arith::ConstantOp::create(b, loc, b.getF64FloatAttr(f.getValueAsDouble())),
        type);
  if (auto bl = dyn_cast_or_null<BoolAttr>(a))
    return scalarConstant(b, loc, type, bl.getValue() ? 1 : 0);
  return nullptr;
}

Attribute getArg(DLOp op, StringRef name) {
  return op.getArgsAttr() ? op.getArgsAttr().get(name) : nullptr;
}

/// Body of one elementwise update: the tensor elements (in the compute
/// type) and the op's scalars (already in the compute type).
using UpdateFn =
    std::function<Value(OpBuilder &, Location, ValueRange, ValueRange)>;

struct UpdateSpec {
  unsigned tensors;                      // tensor operands per element
  SmallVector<std::pair<StringRef, double>> scalars; // name, default
  bool floatOnly;
  UpdateFn fn;
};

/// One result from `inputs` and the named scalars (taken from `scalarAttrs`,
/// or their defaults; `fed`, when given, is the first scalar's value).
Value buildUpdate(OpBuilder &b, Location loc, RankedTensorType type,
                  ValueRange inputs, ArrayRef<Attribute> scalarAttrs,
                  const UpdateSpec &spec, Value fed = nullptr) {
  Type et = type.getElementType();
  SmallVector<Value> scalars;
  for (auto [i, s] : llvm::enumerate(spec.scalars)) {
    if (i == 0 && fed) {
      scalars.push_back(castScalar(b, loc, fed, et));
      continue;
    }
    Value v = scalarFromAttr(b, loc, scalarAttrs[i], et);
    scalars.push_back(v ? v : scalarConstant(b, loc, et, s.second));
  }
  return buildElementwise(b, loc, type, inputs,
                          [&](OpBuilder &nb, Location l, ValueRange a) {
                            return spec.fn(nb, l, a, scalars);
                          });
}

/// The single-tensor op (addcmul, lerp, ...): tensors are the operands; a
/// trailing 0-d operand beyond `spec.tensors` is not supported.
LogicalResult lowerUpdate(DLOp op, ValueRange o, PatternRewriter &rw,
                          const UpdateSpec &spec) {
  RankedTensorType rt = resultType(op);
  if (op.getNumResults() != 1 || o.size() != spec.tensors ||
      (spec.floatOnly && !isFloat(rt.getElementType())))
    return failure();
  SmallVector<Attribute> attrs;
  for (auto &s : spec.scalars)
    attrs.push_back(getArg(op, s.first));
  rw.replaceOp(op, buildUpdate(rw, op.getLoc(), rt, o, attrs, spec));
  return success();
}

/// `_foreach_<op>`: `spec.tensors` lists of N tensors, N results. With
/// `scalarList`, the single scalar is element i of the list arg. A relaxed
/// scalar (front end: relax.py) is fed instead: one trailing operand, 0-d
/// for a scalar, 1-d with N elements for a scalar list, and the arg is
/// absent.
LogicalResult lowerForeach(DLOp op, ValueRange o, PatternRewriter &rw,
                           const UpdateSpec &spec, bool scalarList) {
  unsigned n = op.getNumResults();
  if (n == 0 || spec.scalars.size() > 1)
    return failure();
  Value fed;
  if (o.size() == spec.tensors * n + 1 && spec.scalars.size() == 1) {
    fed = o.back();
    auto ft = dyn_cast<RankedTensorType>(fed.getType());
    int64_t rank = scalarList ? 1 : 0;
    if (!ft || ft.getRank() != rank ||
        (scalarList && ft.getDimSize(0) != int64_t(n)))
      return rw.notifyMatchFailure(op, "fed scalars do not match the lists");
  } else if (o.size() != spec.tensors * n) {
    return failure();
  }
  ArrayAttr list;
  if (scalarList && !fed) {
    list = dyn_cast_or_null<ArrayAttr>(getArg(op, spec.scalars[0].first));
    if (!list || list.size() != n || spec.scalars.size() != 1)
      return failure();
  }
  SmallVector<Value> results;
  for (unsigned i = 0; i < n; ++i) {
    RankedTensorType rt = resultType(op, i);
    if (spec.floatOnly && !isFloat(rt.getElementType()))
      return failure();
  }
  for (unsigned i = 0; i < n; ++i) {
    SmallVector<Value> ins;
    for (unsigned k = 0; k < spec.tensors; ++k)
      ins.push_back(o[k * n + i]);
    SmallVector<Attribute> attrs;
    Value scalar;
    if (fed) {
      SmallVector<Value> at;
      if (scalarList)
        at.push_back(arith::ConstantIndexOp::create(rw, op.getLoc(), i));
      scalar = tensor::ExtractOp::create(rw, op.getLoc(), fed, at);
      attrs.push_back(nullptr);
    } else if (scalarList) {
      attrs.push_back(list[i]);
    } else {
      for (auto &s : spec.scalars)
        attrs.push_back(getArg(op, s.first));
    }
    results.push_back(buildUpdate(rw, op.getLoc(), resultType(op, i), ins,
                                  attrs, spec, scalar));
  }
  rw.replaceOp(op, results);
  return success();
}

// --- Specs ----------------------------------------------------------------

UpdateSpec addcmulSpec(StringRef valueName) {
  return {3, {{valueName, 1.0}}, false,
          [](OpBuilder &b, Location l, ValueRange a, ValueRange s) {
            return add(b, l, a[0], mul(b, l, mul(b, l, s[0], a[1]), a[2]));
          }};
}
UpdateSpec addcdivSpec(StringRef valueName) {
  return {3, {{valueName, 1.0}}, true,
          [](OpBuilder &b, Location l, ValueRange a, ValueRange s) {
            return add(b, l, a[0], div(b, l, mul(b, l, s[0], a[1]), a[2]));
          }};
}
UpdateSpec lerpScalarSpec() {
  return {2, {{"weight", 0.0}}, true,
          [](OpBuilder &b, Location l, ValueRange a, ValueRange s) {
            return lerp(b, l, a[0], a[1], s[0]);
          }};
}
UpdateSpec lerpTensorSpec() {
  return {3, {}, true, [](OpBuilder &b, Location l, ValueRange a, ValueRange) {
            return lerp(b, l, a[0], a[1], a[2]);
          }};
}

enum class Bin { Add, Sub, Mul, Div, Max, Min };

Value binary(OpBuilder &b, Location l, Bin k, Value x, Value y) {
  bool f = isFloat(x.getType());
  switch (k) {
  case Bin::Add:
    return add(b, l, x, y);
  case Bin::Sub:
    return sub(b, l, x, y);
  case Bin::Mul:
    return mul(b, l, x, y);
  case Bin::Div:
    return div(b, l, x, y);
  case Bin::Max:
    return f ? Value(arith::MaximumFOp::create(b, l, x, y))
             : Value(arith::MaxSIOp::create(b, l, x, y));
  case Bin::Min:
    return f ? Value(arith::MinimumFOp::create(b, l, x, y))
             : Value(arith::MinSIOp::create(b, l, x, y));
  }
  llvm_unreachable("binary kind");
}

/// self OP scalar (.Scalar, .ScalarList).
UpdateSpec binaryScalarSpec(Bin k, StringRef name) {
  return {1, {{name, k == Bin::Mul || k == Bin::Div ? 1.0 : 0.0}},
          k == Bin::Div,
          [k](OpBuilder &b, Location l, ValueRange a, ValueRange s) {
            return binary(b, l, k, a[0], s[0]);
          }};
}
/// self OP alpha * other (.List; alpha for add/sub only).
UpdateSpec binaryListSpec(Bin k) {
  UpdateSpec spec{2, {}, k == Bin::Div, nullptr};
  if (k == Bin::Add || k == Bin::Sub) {
    spec.scalars.push_back({"alpha", 1.0});
    spec.fn = [k](OpBuilder &b, Location l, ValueRange a, ValueRange s) {
      return binary(b, l, k, a[0], mul(b, l, a[1], s[0]));
    };
  } else {
    spec.fn = [k](OpBuilder &b, Location l, ValueRange a, ValueRange) {
      return binary(b, l, k, a[0], a[1]);
    };
  }
  return spec;
}

using UnaryFn = Value (*)(OpBuilder &, Location, Value);

UpdateSpec unarySpec(UnaryFn f, bool floatOnly) {
  return {1, {}, floatOnly,
          [f](OpBuilder &b, Location l, ValueRange a, ValueRange) {
            return f(b, l, a[0]);
          }};
}

Value sqrtFn(OpBuilder &b, Location l, Value x) {
  return math::SqrtOp::create(b, l, x);
}
Value expFn(OpBuilder &b, Location l, Value x) {
  return math::ExpOp::create(b, l, x);
}
Value absFn(OpBuilder &b, Location l, Value x) {
  if (isFloat(x.getType()))
    return math::AbsFOp::create(b, l, x);
  return math::AbsIOp::create(b, l, x);
}
Value negFn(OpBuilder &b, Location l, Value x) {
  if (isFloat(x.getType()))
    return arith::NegFOp::create(b, l, x);
  return arith::SubIOp::create(b, l, scalarConstant(b, l, x.getType(), 0), x);
}
Value reciprocalFn(OpBuilder &b, Location l, Value x) {
  return arith::DivFOp::create(b, l, scalarConstant(b, l, x.getType(), 1.0), x);
}
Value zeroFn(OpBuilder &b, Location l, Value x) {
  return scalarConstant(b, l, x.getType(), 0.0);
}

/// Registers `lower` under `aten.<base>.<overload>` and
/// `aten.<base>_.<overload>` (the in-place form, same value semantics).
void addBoth(LoweringRegistry &r, StringRef base, StringRef overload,
             LowerFn lower) {
  std::string suffix = overload.empty() ? "" : ("." + overload).str();
  r.add(("aten." + base + suffix).str(), lower);
  r.add(("aten." + base + "_" + suffix).str(), lower);
}

// LowerFns over the specs (rollBackOnFailure needs them as constants).

using SpecFn = UpdateSpec (*)();

template <SpecFn Spec>
LogicalResult singleOp(DLOp op, ValueRange o, PatternRewriter &rw) {
  return lowerUpdate(op, o, rw, Spec());
}
template <SpecFn Spec, bool ScalarList = false>
LogicalResult foreachOp(DLOp op, ValueRange o, PatternRewriter &rw) {
  return lowerForeach(op, o, rw, Spec(), ScalarList);
}
/// `_foreach_<op>.Tensor` (torch 2.x): element OP alpha * other for every
/// element, `other` one 0-d tensor shared by all (torch 2.x's Adam adds
/// `torch.tensor(1.0)` to its step counters, clip_grad_norm_ multiplies by
/// a 0-d clip coefficient); alpha for add/sub only, from its arg or, when
/// relaxed (relax.py), one more trailing 0-d operand.
template <Bin K>
LogicalResult foreachTensorOp(DLOp op, ValueRange o, PatternRewriter &rw) {
  unsigned n = op.getNumResults();
  bool alphaOp = K == Bin::Add || K == Bin::Sub;
  bool fedAlpha = alphaOp && o.size() == n + 2;
  if (n == 0 || (o.size() != n + 1 && !fedAlpha))
    return failure();
  auto scalarTensor = [](Value v) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.getRank() == 0;
  };
  if (!scalarTensor(o[n]) || (fedAlpha && !scalarTensor(o[n + 1])))
    return failure();
  for (unsigned i = 0; i < n; ++i) {
    Type et = resultType(op, i).getElementType();
    if (tensorType(o[i]).getElementType() != et ||
        (K == Bin::Div && !isFloat(et)))
      return failure();
  }
  Location loc = op.getLoc();
  Value other = tensor::ExtractOp::create(rw, loc, o[n], ValueRange{});
  Value alpha = fedAlpha
                    ? tensor::ExtractOp::create(rw, loc, o[n + 1], ValueRange{})
                          .getResult()
                    : Value();
  SmallVector<Value> results;
  for (unsigned i = 0; i < n; ++i) {
    RankedTensorType rt = resultType(op, i);
    Type et = rt.getElementType();
    Value s = castScalar(rw, loc, other, et);
    if (alphaOp) {
      Value a = alpha ? castScalar(rw, loc, alpha, et)
                      : scalarFromAttr(rw, loc, getArg(op, "alpha"), et);
      if (!a)
        a = scalarConstant(rw, loc, et, 1.0);
      s = mul(rw, loc, a, s);
    }
    results.push_back(
        buildElementwise(rw, loc, rt, ValueRange{o[i]},
                         [&](OpBuilder &b, Location l, ValueRange a) {
                           return binary(b, l, K, a[0], s);
                         }));
  }
  rw.replaceOp(op, results);
  return success();
}
template <LowerFn Fn>
void addBoth(LoweringRegistry &r, StringRef base, StringRef overload) {
  addBoth(r, base, overload, rollBackOnFailure<Fn>);
}

UpdateSpec addcmulValue() { return addcmulSpec("value"); }
UpdateSpec addcmulScalars() { return addcmulSpec("scalars"); }
UpdateSpec addcdivValue() { return addcdivSpec("value"); }
UpdateSpec addcdivScalars() { return addcdivSpec("scalars"); }
template <Bin K>
UpdateSpec scalarSpec() {
  return binaryScalarSpec(K, "scalar");
}
template <Bin K>
UpdateSpec scalarListSpec() {
  return binaryScalarSpec(K, "scalars");
}
template <Bin K>
UpdateSpec listSpec() {
  return binaryListSpec(K);
}
template <UnaryFn F, bool FloatOnly>
UpdateSpec unary() {
  return unarySpec(F, FloatOnly);
}

} // namespace

void terra::populateOptimizerLowerings(LoweringRegistry &r) {
  addBoth<singleOp<addcmulValue>>(r, "addcmul", "");
  addBoth<singleOp<addcdivValue>>(r, "addcdiv", "");
  addBoth<singleOp<lerpScalarSpec>>(r, "lerp", "Scalar");
  addBoth<singleOp<lerpTensorSpec>>(r, "lerp", "Tensor");

  // _foreach_ ops (torch 1.13 and 2.x overload names).
  addBoth<foreachOp<scalarSpec<Bin::Add>>>(r, "_foreach_add", "Scalar");
  addBoth<foreachOp<scalarSpec<Bin::Sub>>>(r, "_foreach_sub", "Scalar");
  addBoth<foreachOp<scalarSpec<Bin::Mul>>>(r, "_foreach_mul", "Scalar");
  addBoth<foreachOp<scalarSpec<Bin::Div>>>(r, "_foreach_div", "Scalar");
  addBoth<foreachOp<scalarListSpec<Bin::Add>, true>>(r, "_foreach_add",
                                                   "ScalarList");
  addBoth<foreachOp<scalarListSpec<Bin::Sub>, true>>(r, "_foreach_sub",
                                                   "ScalarList");
  addBoth<foreachOp<scalarListSpec<Bin::Mul>, true>>(r, "_foreach_mul",
                                                   "ScalarList");
  addBoth<foreachOp<scalarListSpec<Bin::Div>, true>>(r, "_foreach_div",
                                                   "ScalarList");
  addBoth<foreachTensorOp<Bin::Add>>(r, "_foreach_add", "Tensor");
  addBoth<foreachTensorOp<Bin::Sub>>(r, "_foreach_sub", "Tensor");
  addBoth<foreachTensorOp<Bin::Mul>>(r, "_foreach_mul", "Tensor");
  addBoth<foreachTensorOp<Bin::Div>>(r, "_foreach_div", "Tensor");
  addBoth<foreachOp<listSpec<Bin::Add>>>(r, "_foreach_add", "List");
  addBoth<foreachOp<listSpec<Bin::Sub>>>(r, "_foreach_sub", "List");
  addBoth<foreachOp<listSpec<Bin::Mul>>>(r, "_foreach_mul", "List");
  addBoth<foreachOp<listSpec<Bin::Div>>>(r, "_foreach_div", "List");
  addBoth<foreachOp<listSpec<Bin::Max>>>(r, "_foreach_maximum", "List");
  addBoth<foreachOp<listSpec<Bin::Min>>>(r, "_foreach_minimum", "List");
  addBoth<foreachOp<addcmulValue>>(r, "_foreach_addcmul", "Scalar");
  addBoth<foreachOp<addcmulScalars, true>>(r, "_foreach_addcmul", "ScalarList");
  addBoth<foreachOp<addcdivValue>>(r, "_foreach_addcdiv", "Scalar");
  addBoth<foreachOp<addcdivScalars, true>>(r, "_foreach_addcdiv", "ScalarList");
  addBoth<foreachOp<lerpScalarSpec>>(r, "_foreach_lerp", "Scalar");
  addBoth<foreachOp<lerpTensorSpec>>(r, "_foreach_lerp", "List");
  addBoth<foreachOp<unary<sqrtFn, true>>>(r, "_foreach_sqrt", "");
  addBoth<foreachOp<unary<expFn, true>>>(r, "_foreach_exp", "");
  addBoth<foreachOp<unary<reciprocalFn, true>>>(r, "_foreach_reciprocal", "");
  addBoth<foreachOp<unary<absFn, false>>>(r, "_foreach_abs", "");
  addBoth<foreachOp<unary<negFn, false>>>(r, "_foreach_neg", "");
  r.add("aten._foreach_zero_",
        rollBackOnFailure<foreachOp<unary<zeroFn, false>>>);
}

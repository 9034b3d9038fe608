"""Numerical tests of the pointwise and matrix-product lowerings against
eager PyTorch (CPU, fp32 tolerance), through the compiled path."""
import numpy as np
import pytest
import torch

from oprunner import aten, check_expected, check_op, run_op

torch.manual_seed(0)


def rand(*shape):
    return torch.randn(shape, dtype=torch.float32)


@pytest.mark.parametrize("name", ["aten.add.Tensor", "aten.sub.Tensor", "aten.mul.Tensor",
                                  "aten.div.Tensor", "aten.maximum", "aten.minimum"])
@pytest.mark.parametrize("shapes", [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 5), (3, 1)),
                                    ((1,), (7,)), ((5,), ())])
def test_binary_broadcasting(name, shapes):
    a, b = rand(*shapes[0]), rand(*shapes[1])
    if name == "aten.div.Tensor":
        b = b.abs() + 0.5
    check_op(name, [a, b])


def test_add_alpha_and_scalar_variants():
    a, b = rand(3, 5), rand(3, 5)
    check_op("aten.add.Tensor", [a, b], {"alpha": 2.5})
    check_op("aten.sub.Tensor", [a, b], {"alpha": -1.5})
    check_op("aten.add.Scalar", [a], {"other": 3.0})
    check_op("aten.mul.Scalar", [a], {"other": -0.25})
    check_op("aten.div.Scalar", [a], {"other": 4.0})
    check_op("aten.pow.Tensor_Scalar", [a.abs() + 0.1], {"exponent": 1.7})


@pytest.mark.parametrize("name", ["aten.neg", "aten.exp", "aten.tanh", "aten.sigmoid",
                                  "aten.relu", "aten.relu_", "aten.silu", "aten.sqrt", "aten.rsqrt", "aten.log"])
def test_unary(name):
    x = rand(4, 7)
    if name in ("aten.sqrt", "aten.rsqrt", "aten.log"):
        x = x.abs() + 0.1
    check_op(name, [x])


SPECIAL = [float("-inf"), -1e30, -100.0, -88.5, -20.0, -1e-30, 0.0, 1e-30, 0.5, 20.0, 88.0,
           88.8, 100.0, 1e30, float("inf"), float("nan")]


@pytest.mark.parametrize("name", ["aten.exp", "aten.tanh", "aten.sigmoid", "aten.log", "aten.silu",
                                  "aten.gelu", "aten.sin", "aten.cos", "aten.log1p", "aten.expm1",
                                  "aten.log2", "aten.erf"])
def test_transcendental_special_values_and_range(name):
    # The f32 math functions run as vectorized polynomials (terra-approximate-math):
    # they must agree with torch on special values (inf, nan, overflow, underflow,
    # zeros, negative log arguments) and across a wide range of ordinary values.
    x = torch.cat([torch.tensor(SPECIAL), torch.linspace(-30, 30, 601),
                   torch.logspace(-38, 38, 200), -torch.logspace(-38, 38, 200)])
    if name in ("aten.sin", "aten.cos"):
        x = torch.cat([torch.tensor(SPECIAL[6:9]), torch.linspace(-100, 100, 2001)])
    expected = aten(name)(x)
    got = run_op(name, [x], {}, [expected], ())[0]
    np.testing.assert_allclose(got, expected.numpy(), rtol=2e-6, atol=1e-6, equal_nan=True,
                               err_msg=name)


def test_gelu_both_approximations():
    x = rand(6, 5) * 3
    check_op("aten.gelu", [x])
    check_op("aten.gelu", [x], {"approximate": "tanh"})


def test_leaky_relu():
    check_op("aten.leaky_relu", [rand(5, 5)], {"negative_slope": 0.2})


@pytest.mark.parametrize("name", ["aten.threshold_backward", "aten.sigmoid_backward",
                                  "aten.tanh_backward", "aten.gelu_backward",
                                  "aten.silu_backward", "aten.leaky_relu_backward"])
def test_activation_backward(name):
    grad, saved = rand(3, 6), rand(3, 6)
    args = {"threshold": 0.0} if name == "aten.threshold_backward" else {}
    if name == "aten.leaky_relu_backward":
        args = {"negative_slope": 0.1, "self_is_result": False}
    check_op(name, [grad, saved], args)


@pytest.mark.parametrize("name", ["aten.eq.Tensor", "aten.ne.Tensor", "aten.lt.Tensor",
                                  "aten.le.Tensor", "aten.gt.Tensor", "aten.ge.Tensor"])
def test_comparisons(name):
    a = torch.randint(0, 3, (4, 5)).float()
    b = torch.randint(0, 3, (5,)).float()
    check_op(name, [a, b])


def test_where():
    cond = torch.rand(4, 5) > 0.5
    check_op("aten.where.self", [cond, rand(4, 5), rand(5)])


def test_mm_bmm_addmm():
    check_op("aten.mm", [rand(5, 7), rand(7, 3)], rtol=1e-4, atol=1e-5)
    check_op("aten.bmm", [rand(2, 5, 7), rand(2, 7, 3)], rtol=1e-4, atol=1e-5)
    check_op("aten.addmm", [rand(3), rand(5, 7), rand(7, 3)], rtol=1e-4, atol=1e-5)
    check_op("aten.addmm", [rand(5, 3), rand(5, 7), rand(7, 3)], {"beta": 0.5, "alpha": 2.0},
             rtol=1e-4, atol=1e-5)


def test_mm_bmm_addmm_blas_sizes():
    # Above the runtime's small-product cutoff: these go through OpenBLAS.
    check_op("aten.mm", [rand(64, 48), rand(48, 40)], rtol=1e-4, atol=1e-4)
    check_op("aten.mm", [rand(1, 300), rand(300, 20)], rtol=1e-4, atol=1e-4)
    check_op("aten.bmm", [rand(3, 33, 17), rand(3, 17, 29)], rtol=1e-4, atol=1e-4)
    check_op("aten.addmm", [rand(40), rand(64, 48), rand(48, 40)], {"beta": 0.5, "alpha": 2.0},
             rtol=1e-4, atol=1e-4)
    check_op("aten.mm", [rand(37, 64), rand(64, 23)], dynamic=[0], rtol=1e-4, atol=1e-4)
    check_op("aten.mm", [rand(64, 48).double(), rand(48, 40).double()], rtol=1e-10, atol=1e-10)


def test_half_precision_products_accumulate_in_float():
    # ATen (and cuBLAS) accumulate f16/bf16 products in f32 and round once;
    # an f16 accumulator over 1024 terms is off by whole units.
    a, b, bias = rand(6, 1024).half(), rand(1024, 5).half(), rand(5).half()
    ref = a.float() @ b.float()
    check_expected("aten.mm", [a, b], {}, ref.half(), rtol=2e-3, atol=2e-3)
    check_expected("aten.bmm", [a[None], b[None]], {}, ref.half()[None], rtol=2e-3, atol=2e-3)
    check_expected("aten.addmm", [bias, a, b], {"beta": 0.5, "alpha": 2.0},
                   (0.5 * bias.float() + 2.0 * ref).half(), rtol=2e-3, atol=2e-3)


def test_dynamic_shapes():
    check_op("aten.add.Tensor", [rand(6, 4), rand(6, 4)], dynamic=[0])
    check_op("aten.mm", [rand(9, 4), rand(4, 2)], dynamic=[0], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("other", [0, 1, 2, 0.5])
def test_bool_tensor_compared_with_a_number(other):
    # Compared in the number's type: True == 2 is false, True > 0.5 is true.
    flags = torch.tensor([True, False, True])
    check_op("aten.eq.Scalar", [flags], {"other": other})
    check_op("aten.gt.Scalar", [flags], {"other": other})


def test_clamp_family():
    x = torch.cat([rand(4, 6).flatten() * 3, torch.tensor([float("nan"), float("inf"), -float("inf")])])
    check_op("aten.clamp", [x], {"min": -0.5, "max": 1.25}, kwargs_for_torch={"min": -0.5, "max": 1.25})
    check_op("aten.clamp", [x], {"min": None, "max": 0.5}, kwargs_for_torch={"max": 0.5})
    check_op("aten.clamp", [x], {"min": 0.0, "max": None}, kwargs_for_torch={"min": 0.0})
    check_op("aten.clamp", [x], {"min": 2.0, "max": 1.0}, kwargs_for_torch={"min": 2.0, "max": 1.0})
    check_op("aten.clamp_min", [x], {"min": 0.25})
    check_op("aten.clamp_max", [x], {"max": -0.25})
    ints = torch.arange(-6, 7, dtype=torch.int64)
    check_expected("aten.clamp", [ints], {"min": -2, "max": 3}, torch.clamp(ints, -2, 3))
    lo, hi = rand(4, 6) - 1, rand(4, 6) + 1
    y = rand(4, 6) * 3
    check_expected("aten.clamp.Tensor", [y, lo, hi], {}, torch.clamp(y, lo, hi))
    check_expected("aten.clamp.Tensor", [y, hi], {"min": None}, torch.clamp(y, max=hi))
    check_expected("aten.clamp_min.Tensor", [y, lo], {}, torch.clamp_min(y, lo))


def test_rsub_reciprocal_and_in_place_leaky_relu():
    a, b = rand(3, 5), rand(5)
    check_op("aten.rsub.Scalar", [a], {"other": 1.0})
    check_op("aten.rsub.Scalar", [a], {"other": 2.5, "alpha": 3.0})
    check_op("aten.rsub.Tensor", [a, b], {"alpha": 0.5})
    ints = torch.arange(-4, 5, dtype=torch.int64)
    check_expected("aten.rsub.Scalar", [ints], {"other": 1}, torch.rsub(ints, 1))
    check_op("aten.reciprocal", [rand(4, 4).abs() + 0.1])
    x = rand(5, 5)
    check_expected("aten.leaky_relu_", [x], {"negative_slope": 0.1},
                   torch.nn.functional.leaky_relu(x, 0.1))


@pytest.mark.parametrize("name", ["aten.abs", "aten.sgn", "aten.sign"])
def test_abs_and_sign_with_zeros_and_nan(name):
    x = torch.tensor([-2.5, -0.0, 0.0, 1e-30, 3.0, float("-inf"), float("inf"), float("nan")])
    expected = aten(name)(x)
    got = run_op(name, [x], {}, [expected], ())[0]
    np.testing.assert_array_equal(got, expected.numpy(), err_msg=name)
    check_op(name, [torch.tensor([-3, 0, 7], dtype=torch.int64)])


@pytest.mark.parametrize("name", ["aten.triu", "aten.tril"])
@pytest.mark.parametrize("diagonal", [0, 1, -2])
def test_triangles(name, diagonal):
    check_op(name, [rand(2, 5, 7)], {"diagonal": diagonal})


def test_xlogy():
    # 0 where x == 0 (even for y == 0), NaN where y is NaN, x * log(y) else.
    x = torch.tensor([0.0, 0.0, 1.5, 2.0, -1.0, 0.5, float("nan")])
    y = torch.tensor([0.0, float("nan"), 2.0, 0.0, 3.0, -1.0, 1.0])
    got = run_op("aten.xlogy.Tensor", [x, y], {}, [torch.xlogy(x, y)])[0]
    np.testing.assert_allclose(got, torch.xlogy(x, y).numpy(), rtol=1e-6, equal_nan=True)
    check_op("aten.xlogy.Tensor", [rand(4, 5).abs(), rand(5).abs() + 0.1], rtol=1e-5, atol=1e-6)


def test_masked_fill():
    x, mask = rand(4, 5), torch.rand(5) > 0.5
    check_op("aten.masked_fill.Scalar", [x, mask], {"value": -2.5})
    check_op("aten.masked_fill.Scalar", [x.long(), torch.rand(4, 5) > 0.5], {"value": 7})
    check_op("aten.masked_fill.Tensor", [x, mask, torch.tensor(3.0)])


def test_remainder_has_the_sign_of_the_divisor():
    x = torch.tensor([[5.5, -5.5, 3.0, -3.0, 0.0, -0.25]])
    check_op("aten.remainder.Scalar", [x], {"other": 2.0})
    check_op("aten.remainder.Scalar", [x], {"other": -2.0})
    check_op("aten.remainder.Tensor", [x, torch.tensor([2.0, 2.0, -1.5, 1.5, 3.0, -1.0])])
    i = torch.tensor([7, -7, 6, -6, 0, 3])
    check_expected("aten.remainder.Scalar", [i], {"other": 4}, torch.remainder(i, 4))
    check_expected("aten.remainder.Tensor", [i, torch.tensor([3, 3, -4, -4, 5, -2])],
                   {}, torch.remainder(i, torch.tensor([3, 3, -4, -4, 5, -2])))


def test_bitwise_not():
    i = torch.tensor([0, 1, -1, 5, -6])
    check_expected("aten.bitwise_not", [i], {}, torch.bitwise_not(i))
    b = torch.tensor([True, False, True])
    check_expected("aten.bitwise_not", [b], {}, torch.bitwise_not(b))

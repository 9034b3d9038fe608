"""Numerical tests of the reduction and softmax lowerings (Reduction.cpp)
against eager PyTorch through the compiled path. Sums reorder additions, so
float reductions use a 1e-4-ish tolerance where the rows are long."""
import pytest
import torch

from oprunner import check_expected, check_op, check_schema_op

torch.manual_seed(0)


def rand(*shape):
    return torch.randn(shape, dtype=torch.float32)


# (shape, dims): negative dims, several dims, a 1-sized dim, all dims.
DIM_CASES = [
    ((3, 4), [1]),
    ((3, 4), [-1]),
    ((2, 3, 4), [0, 2]),
    ((2, 3, 4), [-1, 0]),
    ((2, 1, 5), [1]),
    ((4, 5), []),
    ((2, 3, 4, 5), [1, 3]),
    ((6,), [0]),
]


@pytest.mark.parametrize("name", ["aten.sum.dim_IntList", "aten.mean.dim"])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape,dims", DIM_CASES)
def test_sum_mean_dims(name, keepdim, shape, dims):
    check_op(name, [rand(*shape)], {"dim": dims, "keepdim": keepdim}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["aten.sum.dim_IntList", "aten.mean.dim"])
def test_sum_mean_dim_none(name):
    check_op(name, [rand(3, 4, 2)], {"dim": None, "keepdim": False})
    check_op(name, [rand(3, 4, 2)], {"dim": None, "keepdim": True})


@pytest.mark.parametrize("name", ["aten.sum", "aten.mean"])
@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4), (1, 1), ()])
def test_sum_mean_default(name, shape):
    check_op(name, [rand(*shape)])


def test_sum_default_spelling():
    check_op("aten.sum.default", [rand(3, 5)])
    check_op("aten.amax.default", [rand(3, 5)], {"dim": [0], "keepdim": True})


def test_sum_long_rows():
    # 4096 terms: sequential and PyTorch's pairwise sums differ in rounding.
    check_op("aten.sum.dim_IntList", [rand(3, 4096)], {"dim": [1]}, rtol=1e-4, atol=1e-4)
    check_op("aten.mean", [rand(64, 257)], rtol=1e-4, atol=1e-5)


def test_sum_integer_and_dtype():
    ints = torch.randint(-50, 50, (3, 5))
    check_op("aten.sum.dim_IntList", [ints], {"dim": [1], "keepdim": False})
    check_op("aten.sum", [ints.to(torch.int32)])  # int32 sums to int64
    check_op("aten.sum", [torch.rand(4, 6) > 0.5])  # bool sums to int64
    # dtype= selects the result (accumulation) type.
    check_schema_op("aten.sum.dim_IntList", rand(3, 5), [0], False, dtype=torch.float64)
    check_schema_op("aten.mean.dim", rand(3, 5), [-1], True, dtype=torch.float64)


@pytest.mark.parametrize("name", ["aten.amax", "aten.amin"])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape,dims", DIM_CASES)
def test_amax_amin(name, keepdim, shape, dims):
    check_op(name, [rand(*shape)], {"dim": dims, "keepdim": keepdim})


def test_amax_integer_and_nan():
    check_op("aten.amax", [torch.randint(-9, 9, (4, 6))], {"dim": [1]})
    check_op("aten.amin", [torch.randint(-9, 9, (4, 6))], {"dim": [0], "keepdim": True})
    x = rand(3, 4)
    x[1, 2] = float("nan")
    check_op("aten.amax", [x], {"dim": [1]})


@pytest.mark.parametrize("name", ["aten.max.dim", "aten.min.dim"])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape,dim", [((3, 4), 1), ((3, 4), -2), ((2, 3, 4), 1),
                                       ((2, 1, 5), 1), ((5,), 0)])
def test_max_min_dim(name, keepdim, shape, dim):
    check_op(name, [rand(*shape)], {"dim": dim, "keepdim": keepdim})


@pytest.mark.parametrize("name", ["aten.max", "aten.min"])
def test_max_min_all_elements(name):
    check_op(name, [rand(3, 4, 2)])
    check_op(name, [torch.randint(-9, 9, (5, 2))])


def test_max_dim_integer_and_nan():
    check_op("aten.max.dim", [torch.randperm(24).reshape(4, 6)], {"dim": 1})
    x = rand(3, 5)
    x[0, 3] = float("nan")
    check_op("aten.max.dim", [x], {"dim": 1})
    check_op("aten.min.dim", [x], {"dim": 1})
    x = torch.full((2, 3), float("-inf"))
    check_op("aten.max.dim", [x], {"dim": 1})


SOFTMAX_CASES = [((3, 4), 1), ((3, 4), 0), ((3, 4), -1), ((2, 3, 4), 1), ((2, 3, 4), -3),
                 ((2, 1, 5), 1), ((2, 3, 4, 5), 2), ((7,), 0)]


@pytest.mark.parametrize("name", ["aten._softmax", "aten._log_softmax"])
@pytest.mark.parametrize("shape,dim", SOFTMAX_CASES)
def test_softmax(name, shape, dim):
    check_op(name, [rand(*shape)], {"dim": dim, "half_to_float": False})


@pytest.mark.parametrize("name", ["aten._softmax", "aten._log_softmax"])
def test_softmax_large_values_are_stable(name):
    # exp(1000) overflows unless the max is subtracted first.
    x = rand(4, 6) * 1000
    check_op(name, [x], {"dim": 1, "half_to_float": False}, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("name,fwd", [("aten._softmax_backward_data", torch.softmax),
                                      ("aten._log_softmax_backward_data", torch.log_softmax)])
@pytest.mark.parametrize("shape,dim", SOFTMAX_CASES)
def test_softmax_backward(name, fwd, shape, dim):
    out = fwd(rand(*shape), dim)
    check_schema_op(name, rand(*shape), out, dim, torch.float32)


def test_softmax_backward_matches_autograd():
    x = rand(3, 7).requires_grad_()
    g = rand(3, 7)
    y = torch.log_softmax(x, 1)
    y.backward(g)
    got = check_schema_op("aten._log_softmax_backward_data", g, y.detach(), 1, torch.float32)
    torch.testing.assert_close(torch.from_numpy(got[0]), x.grad)


@pytest.mark.parametrize("dims,keepdim", [([1], False), ([0], False), ([0], True), ([], False),
                                          ([-1, 0], True)])
def test_dynamic_batch_reductions(dims, keepdim):
    x = rand(6, 4, 3)
    for name in ["aten.sum.dim_IntList", "aten.mean.dim", "aten.amax"]:
        check_op(name, [x], {"dim": dims, "keepdim": keepdim}, dynamic=[0])


def test_dynamic_batch_softmax_and_max():
    x = rand(5, 8)
    check_op("aten._softmax", [x], {"dim": 1, "half_to_float": False}, dynamic=[0])
    check_op("aten._log_softmax", [x], {"dim": 0, "half_to_float": False}, dynamic=[0])
    check_op("aten.max.dim", [x], {"dim": 1}, dynamic=[0])
    check_op("aten.mean", [x], dynamic=[0])
    out = torch.softmax(rand(5, 8), 1)
    check_schema_op("aten._softmax_backward_data", rand(5, 8), out, 1, torch.float32,
                    dynamic=[0])


@pytest.mark.parametrize("name", ["aten.var.correction", "aten.std.correction",
                                  "aten.var_mean.correction", "aten.std_mean.correction"])
@pytest.mark.parametrize("shape,dims", [((3, 4), [1]), ((2, 3, 4), [0, 2]), ((2, 1, 5), [-1]),
                                        ((4, 5), None), ((6,), [0])])
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("correction", [None, 0, 1, 2])
def test_var_std(name, shape, dims, keepdim, correction):
    # Two passes here, Welford in aten: the same value up to rounding.
    # correction None is aten's default (1); a correction of at least the
    # count divides by 0 (inf or nan, as aten).
    check_op(name, [rand(*shape)], {"dim": dims, "correction": correction, "keepdim": keepdim},
             rtol=1e-5, atol=1e-6)


def test_var_std_float64_and_too_few_elements():
    check_op("aten.var.correction", [torch.randn(5, 7, dtype=torch.float64)],
             {"dim": [1], "correction": 1, "keepdim": False}, rtol=1e-12, atol=1e-12)
    # One element per row with the unbiased correction: nan like aten.
    check_op("aten.std.correction", [rand(4, 1)], {"dim": [1], "correction": 1, "keepdim": False})


@pytest.mark.parametrize("shape,dim", [((7,), 0), ((3, 5), 1), ((3, 5), 0), ((2, 3, 4), -2), ((4, 1), 1),
                                       ((0, 3), 0)])
def test_cumsum(shape, dim):
    # A sequential scan, in aten's CPU order: exactly aten's float sums.
    check_op("aten.cumsum", [rand(*shape)], {"dim": dim}, rtol=0, atol=0)


def test_cumsum_integers_dtype_and_dynamic():
    ints = torch.randint(-5, 5, (4, 6))
    check_expected("aten.cumsum", [ints], {"dim": 1}, torch.cumsum(ints, 1))
    # Position ids from a mask: int64 from bool, as torch promotes.
    mask = torch.rand(3, 5) > 0.4
    check_expected("aten.cumsum", [mask], {"dim": 1}, torch.cumsum(mask, 1))
    x = rand(3, 4)
    # (dtype=float64: the result type says it, as a traced op's would.)
    check_expected("aten.cumsum", [x], {"dim": 0}, torch.cumsum(x, 0, dtype=torch.float64),
                   rtol=0, atol=0)
    check_op("aten.cumsum", [rand(6, 4)], {"dim": 0}, dynamic=[0], rtol=0, atol=0)
    check_op("aten.cumsum", [rand()], {"dim": 0}, rtol=0, atol=0)

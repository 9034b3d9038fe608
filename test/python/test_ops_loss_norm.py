"""Numerical tests of the loss (Loss.cpp) and normalization
(Normalization.cpp) lowerings against eager PyTorch through the compiled
path, forward and backward.

Optional tensors follow the lowering's convention (bind_schema in
oprunner.py): a None `Tensor?` is no operand and is recorded as
`name = unit`; a masked gradient (output_mask False) is no result."""
import numpy as np
import pytest
import torch

from oprunner import check_op, check_schema_op, run_op

torch.manual_seed(0)

NONE, MEAN, SUM = 0, 1, 2
TOL = dict(rtol=1e-4, atol=1e-5)  # statistics reorder sums


def rand(*shape):
    return torch.randn(shape, dtype=torch.float32)


# --- mse_loss ------------------------------------------------------------------

@pytest.mark.parametrize("reduction", [NONE, MEAN, SUM])
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (1,), (5, 1, 2)])
def test_mse_loss(reduction, shape):
    check_op("aten.mse_loss", [rand(*shape), rand(*shape)], {"reduction": reduction}, **TOL)


@pytest.mark.parametrize("reduction", [NONE, MEAN, SUM])
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4), (1,)])
def test_mse_loss_backward(reduction, shape):
    grad = rand(*shape) if reduction == NONE else rand()
    check_op("aten.mse_loss_backward", [grad, rand(*shape), rand(*shape)],
             {"reduction": reduction})


def test_mse_loss_default_reduction_is_mean():
    check_op("aten.mse_loss", [rand(3, 4), rand(3, 4)], {}, kwargs_for_torch={}, **TOL)


@pytest.mark.parametrize("reduction", [NONE, MEAN, SUM])
def test_mse_loss_dynamic(reduction):
    x, t = rand(6, 5), rand(6, 5)
    check_op("aten.mse_loss", [x, t], {"reduction": reduction}, dynamic=[0], **TOL)
    grad = rand(6, 5) if reduction == NONE else rand()
    check_op("aten.mse_loss_backward", [grad, x, t], {"reduction": reduction}, dynamic=[0])


# --- smooth_l1_loss and binary_cross_entropy_with_logits --------------------------

@pytest.mark.parametrize("reduction", [NONE, MEAN, SUM])
@pytest.mark.parametrize("beta", [1.0, 0.25, 0.0])
def test_smooth_l1_loss_forward_backward(reduction, beta):
    # Differences on both sides of beta, and exactly zero.
    x, t = rand(4, 6) * 2, rand(4, 6) * 2
    t[0, :3] = x[0, :3]
    args = {"reduction": reduction, "beta": beta}
    check_op("aten.smooth_l1_loss", [x, t], args, **TOL)
    grad = rand(4, 6) if reduction == NONE else rand()
    check_op("aten.smooth_l1_loss_backward", [grad, x, t], args, **TOL)


@pytest.mark.parametrize("reduction", [NONE, MEAN, SUM])
def test_binary_cross_entropy_with_logits(reduction):
    # Large logits of both signs: the stable form must not overflow.
    x = torch.cat([rand(3, 5) * 4, torch.tensor([[-90.0, -30.0, 0.0, 30.0, 90.0]])])
    t = torch.rand(4, 5)
    t[0] = (t[0] > 0.5).float()
    check_op("aten.binary_cross_entropy_with_logits", [x, t],
             {"weight": None, "pos_weight": None, "reduction": reduction},
             kwargs_for_torch={"reduction": reduction}, **TOL)


# --- nll_loss --------------------------------------------------------------------

def nll_inputs(n, c, ignore_index=-100, ignored=()):
    self = torch.log_softmax(rand(n, c), 1) if n else torch.log_softmax(rand(c), 0)
    target = torch.randint(0, c, (n,) if n else ())
    for i in ignored:
        target[i] = ignore_index
    return self, target


@pytest.mark.parametrize("reduction", [NONE, MEAN, SUM])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index,ignored", [(-100, ()), (-100, (1, 3)), (2, (0,))])
def test_nll_loss_forward_backward(reduction, weighted, ignore_index, ignored):
    self, target = nll_inputs(5, 4, ignore_index, ignored)
    weight = rand(4).abs() + 0.1 if weighted else None
    check_schema_op("aten.nll_loss_forward", self, target, weight, reduction, ignore_index)
    _, total = torch.ops.aten.nll_loss_forward(self, target, weight, reduction, ignore_index)
    grad = rand(5) if reduction == NONE else rand()
    check_schema_op("aten.nll_loss_backward", grad, self, target, weight, reduction,
                    ignore_index, total)


@pytest.mark.parametrize("reduction", [NONE, MEAN, SUM])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_unbatched(reduction, weighted):
    self, target = nll_inputs(0, 6)
    weight = rand(6).abs() + 0.1 if weighted else None
    check_schema_op("aten.nll_loss_forward", self, target, weight, reduction, -100)
    _, total = torch.ops.aten.nll_loss_forward(self, target, weight, reduction, -100)
    check_schema_op("aten.nll_loss_backward", rand(), self, target, weight, reduction,
                    -100, total)


def test_nll_loss_weight_absent_without_unit_mark():
    # Two operands and no `weight` arg: the weight is absent.
    self, target = nll_inputs(4, 3)
    check_op("aten.nll_loss_forward", [self, target], {"reduction": MEAN, "ignore_index": -100},
             kwargs_for_torch={"weight": None, "reduction": MEAN, "ignore_index": -100})


def test_nll_loss_all_ignored_mean_is_nan():
    self, target = nll_inputs(3, 4, -100, (0, 1, 2))
    check_schema_op("aten.nll_loss_forward", self, target, None, MEAN, -100)


@pytest.mark.parametrize("reduction", [NONE, MEAN, SUM])
def test_nll_loss_dynamic(reduction):
    self, target = nll_inputs(7, 5, -100, (2,))
    weight = rand(5).abs() + 0.1
    check_schema_op("aten.nll_loss_forward", self, target, weight, reduction, -100,
                    dynamic=[0])
    _, total = torch.ops.aten.nll_loss_forward(self, target, weight, reduction, -100)
    grad = rand(7) if reduction == NONE else rand()
    check_schema_op("aten.nll_loss_backward", grad, self, target, weight, reduction, -100,
                    total, dynamic=[0])


# --- layer norm ------------------------------------------------------------------

LN_CASES = [((4, 5), [5]), ((2, 3, 4), [3, 4]), ((2, 3, 4), [4]), ((1, 1, 6), [6]),
            ((2, 3, 2, 5), [2, 5]), ((3, 1), [1])]


@pytest.mark.parametrize("shape,ns", LN_CASES)
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
def test_native_layer_norm(shape, ns, affine):
    w = rand(*ns) if affine in ("both", "weight") else None
    b = rand(*ns) if affine in ("both", "bias") else None
    # With one normalized element x - mean is 0 here; aten's mean is off by
    # an ulp, which rstd = 1/sqrt(eps) scales up to ~1e-5.
    tol = dict(rtol=1e-4, atol=1e-4) if ns == [1] else TOL
    check_schema_op("aten.native_layer_norm", rand(*shape) * 3 + 1, ns, w, b, 1e-5, **tol)


@pytest.mark.parametrize("shape,ns", LN_CASES)
@pytest.mark.parametrize("weighted", [False, True])
def test_native_layer_norm_backward(shape, ns, weighted):
    x = rand(*shape)
    w = rand(*ns) if weighted else None
    b = rand(*ns) if weighted else None
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, ns, w, b, 1e-5)
    # aten cannot produce grad_weight/grad_bias without a weight.
    mask = [True, True, True] if weighted else [True, False, False]
    tol = dict(rtol=1e-4, atol=1e-4) if ns == [1] else TOL
    check_schema_op("aten.native_layer_norm_backward", rand(*shape), x, ns, mean, rstd, w, b,
                    mask, **tol)


@pytest.mark.parametrize("mask", [[False, True, True], [False, False, True], [True, False, True]])
def test_native_layer_norm_backward_masks(mask):
    x, ns = rand(3, 4, 5), [5]
    w, b = rand(5), rand(5)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, ns, w, b, 1e-5)
    check_schema_op("aten.native_layer_norm_backward", rand(3, 4, 5), x, ns, mean, rstd, w, b,
                    mask, **TOL)


def test_layer_norm_backward_matches_autograd():
    x = rand(3, 6).requires_grad_()
    w = rand(6).requires_grad_()
    b = rand(6).requires_grad_()
    g = rand(3, 6)
    torch.nn.functional.layer_norm(x, [6], w, b).backward(g)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x.detach(), [6], w.detach(), b.detach(),
                                                     1e-5)
    got = check_schema_op("aten.native_layer_norm_backward", g, x.detach(), [6], mean, rstd,
                          w.detach(), b.detach(), [True, True, True], **TOL)
    for a, e in zip(got, [x.grad, w.grad, b.grad]):
        torch.testing.assert_close(torch.from_numpy(a), e, rtol=1e-4, atol=1e-5)


def test_layer_norm_dynamic():
    x, w, b = rand(6, 3, 4), rand(4), rand(4)
    check_schema_op("aten.native_layer_norm", x, [4], w, b, 1e-5, dynamic=[0], **TOL)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [4], w, b, 1e-5)
    check_schema_op("aten.native_layer_norm_backward", rand(6, 3, 4), x, [4], mean, rstd, w, b,
                    [True, True, True], dynamic=[0], **TOL)


# --- batch norm ------------------------------------------------------------------

BN_SHAPES = [(4, 3), (4, 3, 5), (2, 3, 4, 4), (1, 2, 3), (5, 1, 2)]


def bn_params(c, affine):
    w = rand(c) if affine in ("both", "weight") else None
    b = rand(c) if affine in ("both", "bias") else None
    return w, b


@pytest.mark.parametrize("shape", BN_SHAPES)
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
@pytest.mark.parametrize("training", [True, False])
def test_native_batch_norm(shape, affine, training):
    x = rand(*shape) * 2 + 0.5
    c = shape[1]
    w, b = bn_params(c, affine)
    rm, rv = rand(c), rand(c).abs() + 0.5
    check_schema_op("aten.native_batch_norm", x, w, b, rm, rv, training, 0.1, 1e-5, **TOL)


def test_native_batch_norm_training_without_running_stats():
    x = rand(4, 3, 5)
    check_schema_op("aten.native_batch_norm", x, rand(3), rand(3), None, None, True, 0.1, 1e-5,
                    **TOL)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 4, 4)])
def test_native_batch_norm_running_stat_update(training, shape):
    # Five results: the running stats that aten updates in place come back.
    x = rand(*shape) * 2 + 0.5
    rm, rv = rand(shape[1]), rand(shape[1]).abs() + 0.5
    check_schema_op("aten.native_batch_norm", x, rand(shape[1]), rand(shape[1]), rm, rv,
                    training, 0.3, 1e-5, extra_results=["running_mean", "running_var"], **TOL)


@pytest.mark.parametrize("shape", BN_SHAPES)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("train", [True, False])
def test_native_batch_norm_backward(shape, weighted, train):
    x = rand(*shape)
    c = shape[1]
    w = rand(c) if weighted else None
    rm, rv = rand(c), rand(c).abs() + 0.5
    _, save_mean, save_invstd = torch.ops.aten.native_batch_norm(x, w, None, rm.clone(),
                                                                 rv.clone(), True, 0.1, 1e-5)
    if not train:
        save_mean = save_invstd = None
    check_schema_op("aten.native_batch_norm_backward", rand(*shape), x, w, rm, rv, save_mean,
                    save_invstd, train, 1e-5, [True, True, True], **TOL)


# cuDNN's batch norm (what torch runs on CUDA) computes native_batch_norm's
# values: save_var is the inverse standard deviation, and the reserve space
# is empty (a torch.uint8 tensor of size 0). torch on the CPU has no cuDNN,
# so the expected values come from native_batch_norm.
CUDNN_BN_ARGS = {"exponential_average_factor": 0.3, "epsilon": 1e-5}


@pytest.mark.parametrize("shape", [(4, 3), (2, 3, 4, 4)])
@pytest.mark.parametrize("training", [True, False])
def test_cudnn_batch_norm_is_native_batch_norm(shape, training):
    x = rand(*shape) * 2 + 0.5
    c = shape[1]
    w, b, rm, rv = rand(c), rand(c), rand(c), rand(c).abs() + 0.5
    new_rm, new_rv = rm.clone(), rv.clone()
    out, save_mean, save_invstd = torch.ops.aten.native_batch_norm(x, w, b, new_rm, new_rv, training, 0.3, 1e-5)
    reserve = torch.empty(0, dtype=torch.uint8)
    expected = [out, save_mean, save_invstd, reserve, new_rm, new_rv]
    got = run_op("aten.cudnn_batch_norm", [x, w, b, rm, rv], dict(CUDNN_BN_ARGS, training=training), expected)
    assert got[3].dtype == np.uint8 and got[3].shape == (0,)
    for i in (0, 1, 2, 4, 5):
        np.testing.assert_allclose(got[i], expected[i].numpy(), err_msg=f"result {i}", **TOL)


def test_cudnn_batch_norm_backward_is_native_batch_norm_backward():
    x, dy, w = rand(2, 3, 4, 4), rand(2, 3, 4, 4), rand(3)
    rm, rv = rand(3), rand(3).abs() + 0.5
    _, sm, si = torch.ops.aten.native_batch_norm(x, w, None, None, None, True, 0.1, 1e-5)
    expected = torch.ops.aten.native_batch_norm_backward(dy, x, w, rm, rv, sm, si, True, 1e-5, [True] * 3)
    reserve = torch.empty(0, dtype=torch.uint8)
    got = run_op("aten.cudnn_batch_norm_backward", [x, dy, w, rm, rv, sm, si, reserve],
                 {"epsilon": 1e-5}, list(expected))
    for i, e in enumerate(expected):
        np.testing.assert_allclose(got[i], e.numpy(), err_msg=f"gradient {i}", **TOL)


@pytest.mark.parametrize("mask", [[True, False, False], [False, True, True], [True, False, True]])
@pytest.mark.parametrize("train", [True, False])
def test_native_batch_norm_backward_masks(mask, train):
    x, w = rand(4, 3, 5), rand(3)
    rm, rv = rand(3), rand(3).abs() + 0.5
    _, sm, si = torch.ops.aten.native_batch_norm(x, w, None, None, None, True, 0.1, 1e-5)
    check_schema_op("aten.native_batch_norm_backward", rand(4, 3, 5), x, w, rm, rv, sm, si,
                    train, 1e-5, mask, **TOL)


def test_batch_norm_backward_matches_autograd():
    x = rand(4, 3, 5).requires_grad_()
    w = rand(3).requires_grad_()
    b = rand(3).requires_grad_()
    g = rand(4, 3, 5)
    torch.nn.functional.batch_norm(x, None, None, w, b, training=True).backward(g)
    _, sm, si = torch.ops.aten.native_batch_norm(x.detach(), w.detach(), b.detach(), None,
                                                 None, True, 0.1, 1e-5)
    got = check_schema_op("aten.native_batch_norm_backward", g, x.detach(), w.detach(), None,
                          None, sm, si, True, 1e-5, [True, True, True], **TOL)
    for a, e in zip(got, [x.grad, w.grad, b.grad]):
        torch.testing.assert_close(torch.from_numpy(a), e, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_dynamic(training):
    x, w, b = rand(6, 3, 4), rand(3), rand(3)
    rm, rv = rand(3), rand(3).abs() + 0.5
    check_schema_op("aten.native_batch_norm", x, w, b, rm, rv, training, 0.1, 1e-5,
                    dynamic=[0], **TOL)
    _, sm, si = torch.ops.aten.native_batch_norm(x, w, b, None, None, True, 0.1, 1e-5)
    if not training:
        sm = si = None
    check_schema_op("aten.native_batch_norm_backward", rand(6, 3, 4), x, w, rm, rv, sm, si,
                    training, 1e-5, [True, True, True], dynamic=[0], **TOL)

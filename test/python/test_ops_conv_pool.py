"""Numerical tests of the convolution and pooling lowerings (forward and
backward) against eager PyTorch (CPU, fp32), through the compiled path.

Backward ops are compared with the aten backward ops themselves, called with
the same arguments. Optional tensors that are None are left out of the
operands and recorded in args as None (unit), as the tracer does.
"""
import re
import subprocess

import numpy as np
import pytest
import torch

from oprunner import BUILD, aten, check_op, graph_text, run_graph, run_op

torch.manual_seed(0)
TOL = dict(rtol=1e-4, atol=1e-4)


def rand(*shape):
    return torch.randn(shape, dtype=torch.float32)


def conv_args(stride=1, padding=0, dilation=1, groups=1, dims=2):
    return {"stride": [stride] * dims if isinstance(stride, int) else list(stride),
            "padding": [padding] * dims if isinstance(padding, int) else list(padding),
            "dilation": [dilation] * dims if isinstance(dilation, int) else list(dilation),
            "transposed": False, "output_padding": [0] * dims, "groups": groups}


# (N, C, H, W), (F, KH, KW), stride, padding, dilation, groups
CONV_CASES = [
    ((2, 3, 8, 8), (4, 3, 3), 1, 0, 1, 1),
    ((2, 3, 9, 7), (5, 3, 3), 2, 1, 1, 1),          # odd sizes, stride 2
    ((1, 4, 10, 11), (6, 3, 2), (2, 1), (1, 0), 1, 2),  # batch 1, groups 2
    ((2, 4, 12, 12), (4, 3, 3), 1, 2, 2, 1),        # dilation 2
    ((2, 6, 9, 9), (6, 3, 3), 2, 1, 1, 6),          # depthwise, stride 2
    ((1, 2, 5, 6), (3, 1, 1), 1, 0, 1, 1),          # 1x1
    ((2, 4, 7, 7), (2, 5, 5), 3, 5, 1, 2),          # padding > kernel extent
    ((1, 3, 8, 9), (2, 3, 3), 2, 0, 3, 1),          # stride and dilation
    ((2, 16, 12, 12), (24, 3, 3), 1, 1, 1, 1),      # big enough for the BLAS path
    ((2, 32, 8, 8), (16, 1, 1), 1, 0, 1, 1),        # 1x1 without im2col
    ((2, 16, 11, 10), (8, 3, 3), 2, 1, 1, 1),       # BLAS path, stride 2
]


def conv_inputs(case):
    (n, c, h, w), (f, kh, kw), _, _, _, g = case
    return rand(n, c, h, w), rand(f, c // g, kh, kw), rand(f)


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_convolution(case, with_bias):
    x, w, b = conv_inputs(case)
    args = conv_args(*case[2:])
    if with_bias:
        check_op("aten.convolution", [x, w, b], args, **TOL)
    else:
        check_op("aten.convolution", [x, w], {**args, "bias": None}, **TOL)


def test_convolution_1d():
    x, w, b = rand(2, 4, 17), rand(6, 2, 3), rand(6)
    check_op("aten.convolution", [x, w, b], conv_args(2, 1, 2, 2, dims=1), **TOL)
    check_op("aten.convolution", [x, w], {**conv_args(1, 0, 1, 2, dims=1), "bias": None}, **TOL)


@pytest.mark.parametrize("groups", [1, 2])
def test_convolution_dynamic_batch(groups):
    x, w, b = rand(3, 4, 9, 9), rand(6, 4 // groups, 3, 3), rand(6)
    check_op("aten.convolution", [x, w, b], conv_args(2, 1, 1, groups), dynamic=[0], **TOL)


def conv_backward_expected(go, x, w, args, mask):
    return aten("aten.convolution_backward")(go, x, w, **args, output_mask=mask)


def run_conv_backward(go, x, w, args, mask, only_requested=False):
    """Compiled convolution_backward. Unrequested grads are zeros when the
    op has all three results (eager PyTorch returns None or, for some
    backends, the grad anyway) or left out (only_requested)."""
    expected = conv_backward_expected(go, x, w, args, mask)
    like = [x, w, torch.zeros(go.shape[1])]
    full = [e if m else torch.zeros_like(l) for e, l, m in zip(expected, like, mask)]
    outs = [full[k] for k in range(3) if mask[k]] if only_requested else full
    got = run_op("aten.convolution_backward", [go, x, w], {**args, "output_mask": mask}, outs)
    for e, g in zip(outs, got):
        np.testing.assert_allclose(g, e.numpy(), **TOL)


@pytest.mark.parametrize("case", CONV_CASES)
def test_convolution_backward(case):
    x, w, _ = conv_inputs(case)
    args = conv_args(*case[2:])
    out = aten("aten.convolution")(x, w, None, **args)
    go = rand(*out.shape)
    check_op("aten.convolution_backward", [go, x, w],
             {**args, "bias_sizes": [w.shape[0]], "output_mask": [True, True, True]}, **TOL)


def test_convolution_backward_masks():
    x, w = rand(2, 4, 7, 8), rand(6, 2, 3, 3)
    args = {**conv_args(2, 1, 1, 2), "bias_sizes": [6]}
    go = rand(2, 6, 4, 4)
    run_conv_backward(go, x, w, args, [True, False, True])
    run_conv_backward(go, x, w, args, [False, True, False])
    run_conv_backward(go, x, w, args, [False, True, True], only_requested=True)


def test_convolution_backward_1d_and_dynamic():
    x, w = rand(2, 4, 15), rand(6, 2, 3)
    args = {**conv_args(2, 1, 2, 2, dims=1), "bias_sizes": [6]}
    go = rand(*aten("aten.convolution")(x, w, None, **conv_args(2, 1, 2, 2, dims=1)).shape)
    check_op("aten.convolution_backward", [go, x, w], {**args, "output_mask": [True] * 3}, **TOL)
    x, w = rand(3, 4, 9, 9), rand(5, 4, 3, 3)
    args = {**conv_args(2, 1, 1, 1), "bias_sizes": [5]}
    go = rand(3, 5, 5, 5)
    check_op("aten.convolution_backward", [go, x, w], {**args, "output_mask": [True] * 3},
             dynamic=[0], **TOL)


@pytest.mark.parametrize("case", [(9, 9, 3, 2, 1, 1, 1), (11, 8, 3, 2, 1, 1, 2), (12, 10, 3, 1, 2, 2, 1),
                                  (7, 9, 1, 2, 0, 1, 1)])
def test_convolution_dynamic_spatial(case):
    """Spatial sizes known only at run time (a pooling whose size varies
    between merged paths feeds the convolution): the output sizes are
    computed and the padding after the input is derived by the entry point
    (stride 2 with a choice of bottom padding, dilation, 1x1 stride 2)."""
    h, w_, k, stride, padding, dilation, groups = case
    x, w, b = rand(2, 4, h, w_), rand(6, 4 // groups, k, k), rand(6)
    args = conv_args(stride, padding, dilation, groups)
    check_op("aten.convolution", [x, w, b], args, dynamic=[2, 3], static_inputs=[1, 2], **TOL)
    go = rand(*aten("aten.convolution")(x, w, None, **args).shape)
    check_op("aten.convolution_backward", [go, x, w], {**args, "bias_sizes": [6], "output_mask": [True] * 3},
             dynamic=[2, 3], static_inputs=[2], **TOL)


def tconv_args(stride=1, padding=0, output_padding=0, dilation=1, groups=1, dims=2):
    def per_dim(v):
        return [v] * dims if isinstance(v, int) else list(v)
    return {"stride": per_dim(stride), "padding": per_dim(padding),
            "dilation": per_dim(dilation), "transposed": True,
            "output_padding": per_dim(output_padding), "groups": groups}


# Transposed convolutions: (N, Cin, H, W), (Cout, KH, KW), stride, padding,
# output_padding, dilation, groups.
TCONV_CASES = [
    ((2, 3, 5, 5), (4, 3, 3), 1, 0, 0, 1, 1),
    ((2, 4, 5, 6), (3, 4, 4), 2, 1, 0, 1, 1),          # DCGAN's upsampling layer
    ((2, 5, 1, 1), (8, 4, 4), 1, 0, 0, 1, 1),          # DCGAN's first layer, 1x1 -> 4x4
    ((1, 3, 4, 5), (2, 3, 3), 2, 1, 1, 1, 1),          # output_padding 1
    ((2, 2, 5, 5), (3, 3, 3), 1, 2, 0, 2, 1),          # dilation 2
    ((2, 3, 4, 4), (2, 3, 3), 1, 0, 1, 2, 1),          # output_padding >= stride
    ((2, 4, 5, 5), (6, 3, 3), 2, 1, 1, 1, 2),          # groups 2
    ((1, 2, 5, 7), (3, 2, 3), (2, 1), (1, 0), (1, 0), (1, 2), 1),  # per-dim args
    ((2, 2, 6, 6), (2, 1, 1), 2, 1, 1, 1, 1),          # padding > kernel extent
    ((2, 16, 6, 6), (8, 4, 4), 2, 1, 0, 1, 1),         # bigger channels
]


def tconv_inputs(case):
    (n, c, h, w), (f, kh, kw), _, _, _, _, g = case
    return rand(n, c, h, w), rand(c, f // g, kh, kw), rand(f)


@pytest.mark.parametrize("case", TCONV_CASES)
@pytest.mark.parametrize("with_bias", [True, False])
def test_conv_transpose(case, with_bias):
    x, w, b = tconv_inputs(case)
    args = tconv_args(*case[2:])
    if with_bias:
        check_op("aten.convolution", [x, w, b], args, **TOL)
    else:
        check_op("aten.convolution", [x, w], {**args, "bias": None}, **TOL)


@pytest.mark.parametrize("case", TCONV_CASES)
def test_conv_transpose_backward(case):
    x, w, _ = tconv_inputs(case)
    args = tconv_args(*case[2:])
    go = rand(*aten("aten.convolution")(x, w, None, **args).shape)
    check_op("aten.convolution_backward", [go, x, w],
             {**args, "bias_sizes": [go.shape[1]], "output_mask": [True, True, True]}, **TOL)


def test_conv_transpose_backward_masks():
    x, w = rand(2, 4, 5, 6), rand(4, 3, 3, 3)
    args = {**tconv_args(2, 1, 1, 1, 2), "bias_sizes": [6]}
    go = rand(*aten("aten.convolution")(x, w, None, **tconv_args(2, 1, 1, 1, 2)).shape)
    run_conv_backward(go, x, w, args, [True, False, True])
    run_conv_backward(go, x, w, args, [False, True, False])
    run_conv_backward(go, x, w, args, [False, True, True], only_requested=True)


def test_conv_transpose_1d_dynamic_and_f64():
    x, w, b = rand(2, 4, 9), rand(4, 3, 3), rand(6)
    args = tconv_args(2, 1, 1, 2, 2, dims=1)
    check_op("aten.convolution", [x, w, b], args, **TOL)
    go = rand(*aten("aten.convolution")(x, w, b, **args).shape)
    check_op("aten.convolution_backward", [go, x, w],
             {**args, "bias_sizes": [6], "output_mask": [True] * 3}, **TOL)
    x, w, b = rand(3, 4, 5, 5), rand(4, 3, 4, 4), rand(6)
    args = tconv_args(2, 1, 0, 1, 2)
    check_op("aten.convolution", [x, w, b], args, dynamic=[0, 1], **TOL)
    go = rand(*aten("aten.convolution")(x, w, b, **args).shape)
    check_op("aten.convolution_backward", [go, x, w],
             {**args, "bias_sizes": [6], "output_mask": [True] * 3}, dynamic=[0, 1], **TOL)
    x, w, b = x.double(), w.double(), b.double()
    check_op("aten.convolution", [x, w, b], args)
    check_op("aten.convolution_backward", [go.double(), x, w],
             {**args, "bias_sizes": [6], "output_mask": [True] * 3})


@pytest.mark.parametrize("case", [TCONV_CASES[i] for i in (1, 3, 5, 6, 8)])
def test_conv_transpose_linalg_form(case):
    """The linalg form alone (what backends without the convolution library
    compile): the lowered graph with its `terra.library` tags removed, so
    that the gradient generics run as generated loops."""
    x, w, b = tconv_inputs(case)
    args = tconv_args(*case[2:])
    y = aten("aten.convolution")(x, w, b, **args)
    go = rand(*y.shape)
    grads = aten("aten.convolution_backward")(go, x, w, **args, bias_sizes=[go.shape[1]],
                                              output_mask=[True] * 3)
    bwd_args = {**args, "bias_sizes": [go.shape[1]], "output_mask": [True] * 3}
    for name, inputs, op_args, expected in [("aten.convolution", [x, w, b], args, [y]),
                                            ("aten.convolution_backward", [go, x, w], bwd_args,
                                             list(grads))]:
        text = graph_text(name, inputs, op_args, expected)
        lowered = subprocess.run([str(BUILD / "bin" / "terra-opt"), "-terra-convert-to-linalg"],
                                 input=text, capture_output=True, text=True, check=True).stdout
        untagged = re.sub(r'terra\.library = "\w+"', "terra.untagged", lowered)
        assert "terra.untagged" in untagged and "terra.op" not in untagged
        got = run_graph(untagged, [t.numpy() for t in inputs])
        for j, e in enumerate(expected):
            np.testing.assert_allclose(got[j][0], e.numpy(), err_msg=f"{name} result {j}", **TOL)


# kernel, stride, padding, dilation, ceil_mode
POOL_CASES = [
    ([2, 2], [2, 2], [0, 0], [1, 1], False),
    ([3, 3], [2, 2], [1, 1], [1, 1], False),
    ([3, 3], [2, 2], [1, 1], [1, 1], True),
    ([3, 2], [1, 2], [1, 0], [2, 1], False),    # overlapping windows, dilation
    ([2, 3], [2, 3], [0, 1], [1, 1], True),     # ceil_mode overhang
    ([3, 3], [], [0, 0], [1, 1], True),         # stride defaults to the kernel
    ([3, 3], [2, 2], [1, 1], [2, 2], True),     # dilation, padding and ceil_mode
]


def max_pool_args(case):
    k, s, p, d, c = case
    return {"kernel_size": k, "stride": s, "padding": p, "dilation": d, "ceil_mode": c}


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("shape", [(2, 3, 9, 10), (1, 2, 7, 7)])
def test_max_pool2d_with_indices(case, shape):
    check_op("aten.max_pool2d_with_indices", [rand(*shape)], max_pool_args(case))


def test_max_pool2d_ties_nan_inf_and_chw():
    # Integer values make many ties: the first maximum's index must win.
    x = torch.randint(0, 3, (2, 3, 8, 9)).float()
    check_op("aten.max_pool2d_with_indices", [x], max_pool_args(POOL_CASES[3]))
    x = rand(1, 2, 6, 6)
    x[0, 0, 1, 1] = float("nan")
    x[0, 1, :3, :3] = float("-inf")
    check_op("aten.max_pool2d_with_indices", [x], max_pool_args(POOL_CASES[1]))
    check_op("aten.max_pool2d_with_indices", [rand(3, 7, 8)], max_pool_args(POOL_CASES[2]))
    check_op("aten.max_pool2d", [rand(2, 3, 7, 8)], max_pool_args(POOL_CASES[1]))


def test_max_pool2d_dynamic_batch():
    check_op("aten.max_pool2d_with_indices", [rand(3, 4, 9, 9)], max_pool_args(POOL_CASES[2]),
             dynamic=[0])


def check_max_pool_backward(x, args, dynamic=()):
    out, idx = aten("aten.max_pool2d_with_indices")(x, **args)
    go = rand(*out.shape)
    expected = aten("aten.max_pool2d_with_indices_backward")(go, x, **args, indices=idx)
    # Tensor operands in schema order: grad_output, self, indices.
    got = run_op("aten.max_pool2d_with_indices_backward", [go, x, idx], args, [expected],
                 dynamic)
    np.testing.assert_allclose(got[0], expected.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", POOL_CASES)
def test_max_pool2d_with_indices_backward(case):
    check_max_pool_backward(rand(2, 3, 9, 10), max_pool_args(case))


def test_max_pool2d_backward_ties_chw_dynamic():
    check_max_pool_backward(torch.randint(0, 2, (2, 2, 8, 8)).float(),
                            max_pool_args(POOL_CASES[3]))
    check_max_pool_backward(rand(3, 7, 8), max_pool_args(POOL_CASES[2]))
    check_max_pool_backward(rand(3, 2, 9, 9), max_pool_args(POOL_CASES[1]), dynamic=[0])


# kernel, stride, padding, ceil_mode, count_include_pad, divisor_override
AVG_CASES = [
    ([2, 2], [2, 2], [0, 0], False, True, None),
    ([3, 3], [2, 2], [1, 1], False, True, None),
    ([3, 3], [2, 2], [1, 1], False, False, None),
    ([3, 3], [2, 2], [1, 1], True, True, None),
    ([3, 2], [2, 1], [1, 1], True, False, None),
    ([3, 3], [1, 1], [1, 1], False, True, 5),
    ([2, 3], [], [0, 1], True, False, None),
]


def avg_args(case):
    k, s, p, c, cip, div = case
    return {"kernel_size": k, "stride": s, "padding": p, "ceil_mode": c,
            "count_include_pad": cip, "divisor_override": div}


@pytest.mark.parametrize("case", AVG_CASES)
@pytest.mark.parametrize("shape", [(2, 3, 9, 10), (1, 2, 8, 7)])
def test_avg_pool2d(case, shape):
    check_op("aten.avg_pool2d", [rand(*shape)], avg_args(case))


@pytest.mark.parametrize("case", AVG_CASES)
def test_avg_pool2d_backward(case):
    x = rand(2, 3, 9, 10)
    args = avg_args(case)
    go = rand(*aten("aten.avg_pool2d")(x, **args).shape)
    check_op("aten.avg_pool2d_backward", [go, x], args)


def test_avg_pool2d_chw_and_dynamic():
    args = avg_args(AVG_CASES[3])
    check_op("aten.avg_pool2d", [rand(3, 9, 8)], args)
    check_op("aten.avg_pool2d", [rand(3, 4, 9, 9)], args, dynamic=[0])
    x = rand(3, 4, 9, 9)
    go = rand(*aten("aten.avg_pool2d")(x, **args).shape)
    check_op("aten.avg_pool2d_backward", [go, x], args, dynamic=[0])


@pytest.mark.parametrize("sizes", [((8, 8), (1, 1)), ((8, 12), (4, 3)), ((7, 9), (3, 4)),
                                   ((5, 5), (5, 5)), ((6, 10), (4, 7)), ((3, 4), (6, 5))])
def test_adaptive_avg_pool2d(sizes):
    (h, w), out = sizes
    x = rand(2, 3, h, w)
    check_op("aten._adaptive_avg_pool2d", [x], {"output_size": list(out)})
    go = rand(2, 3, *out)
    check_op("aten._adaptive_avg_pool2d_backward", [go, x])


@pytest.mark.parametrize("sizes", [((8, 8), (3, 3)), ((5, 7), (3, 4)), ((2, 3), (3, 3)), ((7, 7), (1, 1)),
                                   ((6, 4), (2, 2))])
def test_adaptive_avg_pool2d_dynamic_spatial(sizes):
    """Input sizes known only at run time: windows computed from them
    (uneven, more outputs than inputs, global, dividing)."""
    (h, w), out = sizes
    x = rand(2, 3, h, w)
    check_op("aten._adaptive_avg_pool2d", [x], {"output_size": list(out)}, dynamic=[2, 3])
    go = rand(2, 3, *out)
    check_op("aten._adaptive_avg_pool2d_backward", [go, x], dynamic=[2, 3])


def test_adaptive_avg_pool2d_chw_and_dynamic():
    check_op("aten._adaptive_avg_pool2d", [rand(3, 7, 9)], {"output_size": [3, 4]})
    x = rand(3, 4, 7, 9)
    check_op("aten._adaptive_avg_pool2d", [x], {"output_size": [3, 4]}, dynamic=[0])
    check_op("aten._adaptive_avg_pool2d", [x], {"output_size": [1, 1]}, dynamic=[0])
    check_op("aten._adaptive_avg_pool2d_backward", [rand(3, 4, 3, 4), x], dynamic=[0])
    check_op("aten._adaptive_avg_pool2d_backward", [rand(3, 4, 1, 1), x], dynamic=[0])


def test_float64():
    x, w, b = (t.double() for t in conv_inputs(CONV_CASES[2]))
    args = conv_args(*CONV_CASES[2][2:])
    check_op("aten.convolution", [x, w, b], args)
    go = torch.randn(aten("aten.convolution")(x, w, b, **args).shape, dtype=torch.float64)
    check_op("aten.convolution_backward", [go, x, w],
             {**args, "bias_sizes": [w.shape[0]], "output_mask": [True] * 3})
    x = x[:, :, :9, :9].contiguous()
    check_op("aten.max_pool2d_with_indices", [x], max_pool_args(POOL_CASES[2]))
    check_op("aten.avg_pool2d", [x], avg_args(AVG_CASES[4]))
    check_op("aten._adaptive_avg_pool2d", [x], {"output_size": [4, 5]})


def test_dynamic_batch_and_channels():
    """Batch and channel sizes unknown at compile time (runtime guards)."""
    x, w, b = rand(2, 4, 9, 9), rand(6, 2, 3, 3), rand(6)
    args = conv_args(2, 1, 1, 2)
    check_op("aten.convolution", [x, w, b], args, dynamic=[0, 1], **TOL)
    go = rand(*aten("aten.convolution")(x, w, b, **args).shape)
    check_op("aten.convolution_backward", [go, x, w],
             {**args, "bias_sizes": [6], "output_mask": [True] * 3}, dynamic=[0, 1], **TOL)
    check_max_pool_backward(x, max_pool_args(POOL_CASES[2]), dynamic=[0, 1])
    check_op("aten.avg_pool2d", [x], avg_args(AVG_CASES[2]), dynamic=[0, 1])
    check_op("aten._adaptive_avg_pool2d", [x], {"output_size": [4, 2]}, dynamic=[0, 1])


# --- nearest upsampling by integer factors ----------------------------------------

@pytest.mark.parametrize("factors", [(2, 2), (3, 1), (1, 4)])
@pytest.mark.parametrize("by_size", [False, True])
def test_upsample_nearest2d_forward_backward(factors, by_size):
    x = torch.randn(2, 3, 5, 4)
    out = [5 * factors[0], 4 * factors[1]]
    args = ({"output_size": out, "scale_factors": None} if by_size
            else {"output_size": None, "scale_factors": [float(f) for f in factors]})
    check_op("aten.upsample_nearest2d.vec", [x], args)
    grad = torch.randn(2, 3, *out)
    bargs = ({"output_size": out, "input_size": [2, 3, 5, 4], "scale_factors": None} if by_size
             else {"output_size": None, "input_size": [2, 3, 5, 4],
                   "scale_factors": [float(f) for f in factors]})
    check_op("aten.upsample_nearest2d_backward.vec", [grad], bargs, rtol=1e-5, atol=1e-5)

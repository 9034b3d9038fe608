"""Numerical tests of the grid_sampler_2d lowerings (forward and backward)
against eager PyTorch, through the compiled path (terra-run, which has no
host ops: an op that is not lowered fails to run)."""
import pytest
import torch

from oprunner import check_expected, check_op

A = torch.ops.aten
MODES = [(0, 0), (0, 1), (1, 0), (1, 1)]  # (interpolation, padding)


def sample_case(seed, n=3, c=4, h=5, w=6, ho=3, wo=4, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, h, w, generator=g, dtype=dtype)
    # Points inside, on and beyond the borders (|coordinate| up to 1.3).
    grid = (torch.rand(n, ho, wo, 2, generator=g, dtype=dtype) * 2.6 - 1.3)
    grid[0, 0, 0] = torch.tensor([-1.0, 1.0], dtype=dtype)  # exact corners
    grid[0, 0, 1] = torch.tensor([1.0, -1.0], dtype=dtype)
    gout = torch.randn(n, c, ho, wo, generator=g, dtype=dtype)
    return x, grid, gout


def args_of(interp, padding, align):
    return {"interpolation_mode": interp, "padding_mode": padding, "align_corners": align}


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("interp,padding", MODES)
def test_grid_sampler_2d(interp, padding, align):
    x, grid, _ = sample_case(1)
    check_op("aten.grid_sampler_2d", [x, grid], args_of(interp, padding, align))


def test_grid_sampler_2d_dynamic_batch_and_f64():
    # Faster R-CNN: the RoI count (the batch of input and grid) changes.
    x, grid, _ = sample_case(2, n=5)
    check_op("aten.grid_sampler_2d", [x, grid], args_of(0, 0, False), dynamic=[0])
    x, grid, _ = sample_case(3, dtype=torch.float64)
    check_op("aten.grid_sampler_2d", [x, grid], args_of(0, 1, True), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("interp,padding", MODES)
def test_grid_sampler_2d_backward(interp, padding, align):
    x, grid, gout = sample_case(4)
    args = args_of(interp, padding, align)
    expected = A.grid_sampler_2d_backward(gout, x, grid, interp, padding, align, [True, True])
    check_expected("aten.grid_sampler_2d_backward", [gout, x, grid],
                   {**args, "output_mask": [True, True]}, expected, rtol=1e-5, atol=1e-5)


def test_grid_sampler_2d_backward_scatters_into_shared_corners():
    # Many points on a small input: corners receive several contributions,
    # as Faster R-CNN's 7x7 samples of an 8x8 feature map do.
    x, grid, gout = sample_case(5, n=2, c=3, h=3, w=3, ho=7, wo=7)
    expected = A.grid_sampler_2d_backward(gout, x, grid, 0, 0, False, [True, False])
    check_expected("aten.grid_sampler_2d_backward", [gout, x, grid],
                   {**args_of(0, 0, False), "output_mask": [True, False]}, expected,
                   dynamic=[0])


def test_grid_sampler_2d_backward_of_the_grid_only():
    # output_mask[0] clear: aten returns no grad_input, the op has one result.
    x, grid, gout = sample_case(6)
    _, grad_grid = A.grid_sampler_2d_backward(gout, x, grid, 0, 1, False, [False, True])
    check_expected("aten.grid_sampler_2d_backward", [gout, x, grid],
                   {**args_of(0, 1, False), "output_mask": [False, True]}, [grad_grid])


def test_grid_sample_gradients_match_autograd():
    # The composite F.grid_sample forward and backward, through autograd.
    x, grid, gout = sample_case(7)
    x.requires_grad_(True)
    grid.requires_grad_(True)
    out = torch.nn.functional.grid_sample(x, grid, align_corners=False)
    gx, gg = torch.autograd.grad(out, [x, grid], gout)
    check_expected("aten.grid_sampler_2d_backward", [gout, x.detach(), grid.detach()],
                   {**args_of(0, 0, False), "output_mask": [True, True]}, [gx, gg])

"""Training steps run from the compiled graph match eager PyTorch.

Each test builds two identically initialized copies of a small model. One
trains 5 steps eagerly; the other runs the same step through
`terra.CompiledStep`: traced eagerly until the latest trace is covered (2
iterations, 3 for momentum SGD, whose first step creates its buffers),
then compiled once (`terra-opt -terra-merge-traces -terra-assign-cases`)
and run with `terra-run` for the remaining steps, with the fetched final
state committed into the model's and optimizer's tensors. Losses, weights,
gradients and optimizer state must agree to fp32 tolerance.

If an op loses its lowering, CompiledStep raises MissingLowering naming it
(terra-run has no host executor); such a test is to be marked
`xfail(strict=True, raises=MissingLowering, reason="missing lowering: ...")`.
Needs terra-opt and terra-run in TERRA_BUILD_DIR (default build/).
"""
from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Callable

import pytest
import torch
import torch.nn.functional as F

REPO = Path(__file__).resolve().parents[2]
if str(REPO / "python") not in sys.path:
    sys.path.insert(0, str(REPO / "python"))

import terra  # noqa: E402

STEPS = 5
RTOL, ATOL = 1e-5, 1e-5


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 16)
        self.fc2 = torch.nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x)))


class CNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.pool = torch.nn.MaxPool2d(2)
        self.fc = torch.nn.Linear(4 * 3 * 3, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(F.relu(self.conv(x))), 1))


def mse_step(model: torch.nn.Module, opt: torch.optim.Optimizer) -> Callable:
    def step(x: torch.Tensor, y: torch.Tensor) -> float:
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def nll_step(model: torch.nn.Module, opt: torch.optim.Optimizer) -> Callable:
    def step(x: torch.Tensor, y: torch.Tensor) -> float:
        opt.zero_grad(set_to_none=True)
        loss = F.nll_loss(F.log_softmax(model(x), dim=1), y)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def mlp_batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(8, 6, generator=g), torch.randn(8, 3, generator=g)) for _ in range(STEPS)]


def cnn_batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(4, 1, 8, 8, generator=g), torch.randint(0, 5, (4,), generator=g))
            for _ in range(STEPS)]


def compare(make_model: Callable[[], torch.nn.Module], make_opt: Callable, make_step: Callable,
            batches: list, tmp_path: Path, traced_steps: int) -> terra.CompiledStep:
    torch.manual_seed(0)
    eager_model = make_model()
    model = copy.deepcopy(eager_model)
    eager_opt, opt = make_opt(eager_model), make_opt(model)

    eager_step = make_step(eager_model, eager_opt)
    eager_losses = [eager_step(x, y) for x, y in batches]

    compiled = terra.CompiledStep(make_step(model, opt), [model], [opt], workdir=tmp_path)
    losses = []
    for x, y in batches:
        (loss,) = compiled(x, y)
        losses.append(loss)

    assert compiled.steps_traced == traced_steps
    assert compiled.steps_compiled == STEPS - traced_steps
    assert isinstance(losses[-1], float)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(eager_losses), rtol=RTOL, atol=ATOL)
    for (name, p), q in zip(model.named_parameters(), eager_model.parameters()):
        torch.testing.assert_close(p, q, rtol=RTOL, atol=ATOL, msg=lambda m: f"{name}: {m}")
        torch.testing.assert_close(p.grad, q.grad, rtol=RTOL, atol=ATOL, msg=lambda m: f"{name}.grad: {m}")
    for p, q in zip(model.parameters(), eager_model.parameters()):
        s, es = opt.state.get(p, {}), eager_opt.state.get(q, {})
        assert s.keys() == es.keys()
        for k in s:
            if isinstance(s[k], torch.Tensor):
                torch.testing.assert_close(s[k], es[k], rtol=RTOL, atol=ATOL)
    # Compiled once: later steps load the object from the cache.
    assert len([f for f in (tmp_path / "cache").iterdir() if f.is_file()]) >= 1
    return compiled


def test_mlp_mse_sgd(tmp_path: Path) -> None:
    compiled = compare(MLP, lambda m: torch.optim.SGD(m.parameters(), lr=0.1), mse_step,
                       mlp_batches(), tmp_path, traced_steps=2)
    names = set(compiled.tracer.traces[-1].op_names())
    assert {"aten.addmm", "aten.mse_loss_backward", "aten.add_.Tensor"} <= names


def test_mlp_mse_sgd_momentum(tmp_path: Path) -> None:
    compare(MLP, lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9), mse_step,
            mlp_batches(), tmp_path, traced_steps=3)


def test_cnn_nll_sgd(tmp_path: Path) -> None:
    compiled = compare(CNN, lambda m: torch.optim.SGD(m.parameters(), lr=0.1), nll_step,
                       cnn_batches(), tmp_path, traced_steps=2)
    names = set(compiled.tracer.traces[-1].op_names())
    assert {"aten.convolution", "aten.convolution_backward", "aten.max_pool2d_with_indices",
            "aten._log_softmax", "aten.nll_loss_forward"} <= names


class Upsampler(torch.nn.Module):
    """Transposed convolutions as in DCGAN's generator (with output_padding
    and a bias on the first)."""

    def __init__(self) -> None:
        super().__init__()
        self.up1 = torch.nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1)
        self.up2 = torch.nn.ConvTranspose2d(4, 2, 4, stride=2, padding=1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.up2(F.relu(self.up1(x)))


def upsampler_batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(4, 3, 4, 4, generator=g), torch.randn(4, 2, 16, 16, generator=g))
            for _ in range(STEPS)]


def test_conv_transpose_mse_sgd(tmp_path: Path) -> None:
    compiled = compare(Upsampler, lambda m: torch.optim.SGD(m.parameters(), lr=0.1), mse_step,
                       upsampler_batches(), tmp_path, traced_steps=2)
    names = set(compiled.tracer.traces[-1].op_names())
    assert {"aten.convolution", "aten.convolution_backward"} <= names


class MLPInplace(MLP):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.relu(self.fc1(x), inplace=True))


def zero_grad_inplace_step(model: torch.nn.Module, opt: torch.optim.Optimizer) -> Callable:
    """torch 1.13's default zero_grad: gradients are zeroed in place and
    backward accumulates into them (add_), so steps 2+ differ from step 1."""
    def step(x: torch.Tensor, y: torch.Tensor) -> float:
        opt.zero_grad(set_to_none=False)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def test_mlp_grads_zeroed_in_place_weight_decay(tmp_path: Path) -> None:
    compiled = compare(MLP, lambda m: torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.5,
                                                      weight_decay=0.01),
                       zero_grad_inplace_step, mlp_batches(), tmp_path, traced_steps=3)
    steady = compiled.tracer.traces[-1]
    assert "aten.zero_" in steady.op_names()
    assert {s.name for s in steady.states} >= {"grad:fc1.weight", "optim:fc1.weight:momentum_buffer"}


def test_mlp_inplace_relu(tmp_path: Path) -> None:
    compare(MLPInplace, lambda m: torch.optim.SGD(m.parameters(), lr=0.1), mse_step,
            mlp_batches(), tmp_path, traced_steps=2)


def test_feed_made_by_python_each_step_is_refused(tmp_path: Path) -> None:
    """A tensor Python builds from a fresh value every step can only be fed
    by co-execution: the runner says so instead of freezing the value."""
    torch.manual_seed(0)
    model = MLP()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    count = [0]

    def step(x: torch.Tensor, y: torch.Tensor) -> float:
        count[0] += 1
        scale = torch.tensor(float(count[0]))
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(x) * scale, y)
        loss.backward()
        opt.step()
        return loss.item()

    compiled = terra.CompiledStep(step, [model], [opt], workdir=tmp_path)
    x, y = mlp_batches()[0]
    compiled(x, y)
    with pytest.raises(terra.NotCompilable, match="made by Python and changed"):
        compiled(x, y)

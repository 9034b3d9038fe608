"""Training-step patterns beyond the spec's rows, each co-executed and
compared with eager on the same program and seed (coexec_helpers.compare:
losses, printed output, parameters and optimizer state after every step).

Found correct by a sweep of uncommon programs (session 36): optimizers and
schedulers torch ships, gradient tricks, checkpointing, recurrent and
attention layers, parametrizations, ops with index arguments, and state
changed by the step itself; and from session 38's sweep, state written
past the optimizer (an EMA of the weights, a tensor attribute counted in
the forward, an embedding's max-norm renormalization, clipping through
`p.data`, a layer drawn anew every few steps). `fallbacks` bounds the
deviations each may take (a new path: RAdam's rectification switching on
after its fifth step, an evaluation pass every fourth step).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parent))
from coexec_helpers import batches, compare, mlp, sgd_program  # noqa: E402


def _optimizer(factory: Callable) -> Callable[[], tuple]:
    return sgd_program(optimizer=lambda params, lr: factory(params))


def _scheduled(make_scheduler: Callable, steps_with_loss: bool = False) -> Callable[[], tuple]:
    def make() -> tuple:
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = make_scheduler(opt)

        def step(x, y):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step(loss.item()) if steps_with_loss else sched.step()
            return loss
        return step, model, opt
    return make


def _clip() -> tuple:
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), 0.5)
        nn.utils.clip_grad_value_(model.parameters(), 0.05)
        opt.step()
        return loss, norm, nn.utils.parameters_to_vector(model.parameters()).norm()
    return step, model, opt


def _grad_penalty() -> tuple:
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def step(x, y):
        x = x.clone().requires_grad_(True)
        out = model(x)
        g, = torch.autograd.grad(out.sum(), x, create_graph=True)
        loss = F.cross_entropy(out, y) + 0.1 * g.pow(2).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step, model, opt


def _accumulated() -> tuple:
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def step(x, y):
        opt.zero_grad()
        for xb, yb in zip(x.chunk(2), y.chunk(2)):
            (F.cross_entropy(model(xb), yb) / 2).backward()
        opt.step()
        return sum(p.grad.abs().sum() for p in model.parameters())
    return step, model, opt


def _manual_update() -> tuple:
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        grads = torch.autograd.grad(loss, list(model.parameters()))
        with torch.no_grad():
            for p, g in zip(model.parameters(), grads):
                p.sub_(0.1 * g)
                p.clamp_(-0.5, 0.5)
        return loss
    return step, model, opt


def _checkpointed(reentrant: bool) -> Callable[[], tuple]:
    # (the reentrant form differentiates only inputs that require grad:
    # the first layer's output goes in)
    return sgd_program(loss=lambda model, x, y: F.cross_entropy(
        checkpoint.checkpoint(lambda t: model[2](model[1](t)), model[0](x), use_reentrant=reentrant), y))


class _Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.out = nn.Linear(6, 6), nn.Linear(6, 6), nn.Linear(6, 3)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.out(torch.tanh(self.b(torch.relu(self.a(x)))))


class _Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb, self.rnn, self.out = nn.Embedding(20, 8), nn.LSTM(8, 12, batch_first=True), nn.Linear(12, 3)

    def forward(self, x):
        h, _ = self.rnn(self.emb((x.abs() * 5).long().clamp(max=19)))
        return self.out(h[:, -1])


class _Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pre, self.att, self.out = nn.Linear(6, 18), nn.MultiheadAttention(6, 2, batch_first=True), nn.Linear(6, 3)
        self.layer = nn.TransformerEncoderLayer(6, 2, 12, dropout=0.0, batch_first=True)

    def forward(self, x):
        h = self.pre(x).view(x.shape[0], 3, 6)
        a, w = self.att(h, h, h)
        return self.out(self.layer(a).mean(1)) + w.var() * 0


class _IndexOps(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = mlp()

    def forward(self, x):
        out = self.net(x)
        s, idx = out.sort(1)
        spread = torch.zeros(x.shape[0], 3).scatter_add(1, idx, out)
        return out + 0.01 * (s[:, -1:] + out.cumsum(1) + spread + F.normalize(out, dim=1))


class _Images(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, groups=1), nn.ReLU(),
                                  nn.Conv2d(4, 4, 3, padding=1, groups=4, bias=False))
        self.head = nn.Linear(4 * 64, 3)

    def forward(self, x):
        img = F.interpolate(x.view(x.shape[0], 1, 2, 3), size=(4, 4), mode="bilinear", align_corners=False)
        theta = torch.tensor([[1.0, 0.1, 0.0], [0.0, 0.9, 0.05]]).expand(x.shape[0], 2, 3)
        img = F.grid_sample(img, F.affine_grid(theta, (x.shape[0], 1, 4, 4), align_corners=False),
                            align_corners=False)
        h = F.pixel_shuffle(self.conv(img), 2)  # (B, 1, 8, 8)
        return self.head(torch.cat([h] * 4, 1).flatten(1))


def _evaluated_every(k: int) -> tuple:
    model = nn.Sequential(nn.Linear(6, 16), nn.BatchNorm1d(16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    count = [0]

    def step(x, y):
        count[0] += 1
        model.train()
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if count[0] % k == 0:
            model.eval()
            with torch.no_grad():
                print("eval", round(F.cross_entropy(model(x), y).item(), 3))
        return loss
    return step, model, opt


def _ema_of_weights() -> tuple:
    # A shadow copy of the model that the step averages in place under
    # no_grad: tensors the program holds outside the optimizer (adopted).
    model = mlp()
    shadow = mlp()
    shadow.load_state_dict(model.state_dict())
    opt = torch.optim.Adam(model.parameters(), lr=0.01)

    def step(x, y):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for s, p in zip(shadow.parameters(), model.parameters()):
                s.mul_(0.9).add_(p, alpha=0.1)
        return loss, F.cross_entropy(shadow(x), y).detach()
    return step, model, opt


class _Counted(nn.Module):
    """A plain tensor attribute (not a buffer) the forward updates."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp()
        self.seen = torch.zeros(())

    def forward(self, x):
        self.seen += x.shape[0]
        return self.net(x) + 0 * self.seen


class _MaxNorm(nn.Module):
    """An embedding with max_norm: its forward renormalizes the looked-up
    rows of the weight in place (under no_grad)."""

    def __init__(self) -> None:
        super().__init__()
        self.emb, self.out = nn.Embedding(20, 6, max_norm=1.0), nn.Linear(6, 3)

    def forward(self, x):
        return self.out(self.emb((x.abs() * 3).long().clamp(max=19)).mean(1))


def _clipped_through_data() -> tuple:
    # WGAN's critic clipping: writes through `p.data`, past autograd.
    model = mlp()
    opt = torch.optim.RMSprop(model.parameters(), lr=0.01)

    def step(x, y):
        loss = model(x).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        for p in model.parameters():
            p.data.clamp_(-0.1, 0.1)
        return loss
    return step, model, opt


def _reinitialized_every(k: int) -> tuple:
    # A layer drawn anew (host random numbers into a parameter) every k steps.
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    count = [0]

    def step(x, y):
        count[0] += 1
        if count[0] % k == 0:
            with torch.no_grad():
                nn.init.normal_(model[2].weight, std=0.1)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss
    return step, model, opt


PATTERNS = {
    "adamax": (_optimizer(lambda p: torch.optim.Adamax(p, lr=0.01)), 0),
    "nadam": (_optimizer(lambda p: torch.optim.NAdam(p, lr=0.01)), 0),
    "radam": (_optimizer(lambda p: torch.optim.RAdam(p, lr=0.01)), 2),
    "asgd": (_optimizer(lambda p: torch.optim.ASGD(p, lr=0.01)), 0),
    "adam_amsgrad": (_optimizer(lambda p: torch.optim.Adam(p, lr=0.01, amsgrad=True)), 0),
    "rprop": (_optimizer(lambda p: torch.optim.Rprop(p, lr=0.01)), 0),
    "adadelta": (_optimizer(lambda p: torch.optim.Adadelta(p)), 0),
    "sgd_maximize_nesterov": (_optimizer(lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, nesterov=True,
                                                                   maximize=True, weight_decay=0.01)), 0),
    "one_cycle": (_scheduled(lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.2, total_steps=40)), 0),
    "plateau": (_scheduled(lambda o: torch.optim.lr_scheduler.ReduceLROnPlateau(o, patience=1, factor=0.5),
                           steps_with_loss=True), 0),
    "clip_norm_and_value": (_clip, 0),
    "gradient_penalty": (_grad_penalty, 0),
    "accumulated_micro_batches": (_accumulated, 0),
    "autograd_grad_manual_update": (_manual_update, 0),
    "checkpoint_reentrant": (_checkpointed(True), 0),
    "checkpoint_non_reentrant": (_checkpointed(False), 0),
    "tied_weights": (sgd_program(model_fn=_Tied, optimizer=torch.optim.Adam, lr=0.01), 0),
    "lstm": (sgd_program(model_fn=_Recurrent, optimizer=torch.optim.Adam, lr=0.01), 0),
    "attention_and_transformer_layer": (sgd_program(model_fn=_Attention), 0),
    "spectral_norm": (sgd_program(model_fn=lambda: nn.Sequential(nn.utils.spectral_norm(nn.Linear(6, 16)),
                                                                 nn.ReLU(), nn.Linear(16, 3))), 0),
    "sort_scatter_cumsum_normalize": (sgd_program(model_fn=_IndexOps), 0),
    "interpolate_grid_sample_grouped_conv": (sgd_program(model_fn=_Images, lr=0.05), 0),
    "evaluated_every_fourth_step": (lambda: _evaluated_every(4), 1),
    "ema_of_weights": (_ema_of_weights, 0),
    "tensor_attribute_counted_in_forward": (sgd_program(model_fn=_Counted), 0),
    "embedding_max_norm": (sgd_program(model_fn=_MaxNorm, lr=0.5), 0),
    "clipped_through_data": (_clipped_through_data, 0),
    "reinitialized_every_fifth_step": (lambda: _reinitialized_every(5), 2),
}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_pattern_matches_eager(name: str) -> None:
    make, fallbacks = PATTERNS[name]
    stats = compare(make, batches(12), max_fallbacks=fallbacks)
    assert stats["replayed_iterations"] >= 3, stats["steps"]

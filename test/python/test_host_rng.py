"""The native Bernoulli kernel (python/src/HostRng.cpp) against PyTorch's
own `bernoulli_`: the same samples and the same generator state after, bit
for bit; and dropout under co-execution drawing through it."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import terra
from terra import coexec, dropout, native

from coexec_helpers import batches, compare, sgd_program

NATIVE = native.load()


def native_bernoulli(out: torch.Tensor, p: float) -> torch.Tensor:
    """`out.bernoulli_(p)` through the co-executor's native path."""
    assert coexec._draw_bernoulli("aten.bernoulli_.float", (out, p), {})
    return out


def at_offset(seed: int, words: int) -> None:
    """Seeds the default generator, then draws `words` 32-bit numbers (a
    float32 `rand` draws one per element), so the next draw starts anywhere
    in the MT19937 block, a fresh seed's state included (words = 0)."""
    torch.manual_seed(seed)
    torch.rand(words)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("words", [0, 1, 311, 623, 624, 1000])
def test_samples_and_state_equal_torch(dtype: torch.dtype, words: int) -> None:
    # Sizes below, at and across MT19937's 624-word blocks (two words per
    # sample); p at both ends, at binary fractions and at ones that round.
    for numel in (1, 2, 311, 312, 313, 624, 2049, 16384):
        for p in (0.0, 1.0, 0.5, 0.9, 0.1, 1 / 3, 1 - 2 ** -53, 2 ** -60):
            at_offset(7, words)
            expected = torch.empty(numel, dtype=dtype).bernoulli_(p)
            expected_state = torch.get_rng_state()
            at_offset(7, words)
            got = native_bernoulli(torch.full((numel,), -1.0, dtype=dtype), p)
            assert torch.equal(got, expected), (numel, p)
            assert torch.equal(torch.get_rng_state(), expected_state), (numel, p)


def test_consecutive_draws_continue_the_stream() -> None:
    # Two native draws, then torch's own: all as three torch draws.
    at_offset(3, 5)
    a, b = torch.empty(700).bernoulli_(0.3), torch.empty(33, 9).bernoulli_(0.7)
    c = torch.rand(50)
    at_offset(3, 5)
    a2, b2 = native_bernoulli(torch.empty(700), 0.3), native_bernoulli(torch.empty(33, 9), 0.7)
    c2 = torch.rand(50)
    assert torch.equal(a, a2) and torch.equal(b, b2) and torch.equal(c, c2)


def test_bad_inputs_are_refused_with_their_reason() -> None:
    state, out = torch.get_rng_state(), torch.empty(4)
    with pytest.raises(ValueError, match="5056 bytes was expected, not 100"):
        NATIVE.rng_bernoulli(state.data_ptr(), 100, out.data_ptr(), 4, "float32", 0.5)
    for p in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="p must be in"):
            NATIVE.rng_bernoulli(state.data_ptr(), state.numel(), out.data_ptr(), 4, "float32", p)
    with pytest.raises(ValueError, match="not float16"):
        NATIVE.rng_bernoulli(state.data_ptr(), state.numel(), out.data_ptr(), 4, "float16", 0.5)
    # `left` (bytes 8-11) past ATen's limit: no read past the state.
    bad = state.clone()
    bad[8:12] = torch.tensor([0xff, 0xff, 0, 0], dtype=torch.uint8)
    with pytest.raises(ValueError, match="not a valid MT19937 state"):
        NATIVE.rng_bernoulli(bad.data_ptr(), bad.numel(), out.data_ptr(), 4, "float32", 0.5)
    assert torch.equal(torch.get_rng_state(), state)  # nothing changed


def test_coexecuted_dropout_draws_natively_and_leaves_eagers_generator_state(monkeypatch) -> None:
    # Dropout at two rates and a draw the kernel leaves to torch (`randn`'s
    # noise), over steps that are not reseeded between them: the masks
    # and the generator's state after every step must be eager's exactly,
    # and the co-executed steps must have drawn through the kernel.
    calls = []
    kernel = NATIVE.rng_bernoulli

    def counted(*args):
        calls.append(args[3])
        return kernel(*args)
    monkeypatch.setattr(NATIVE, "rng_bernoulli", counted)

    def loss(model, x, y):
        h = F.dropout(model[0](x), 0.25)
        h = model[1](h) + torch.randn(h.shape) * 0.01
        return F.cross_entropy(model[2](F.dropout(h, 0.5)), y)
    make = sgd_program(loss=loss, model_fn=lambda: nn.Sequential(
        nn.Linear(6, 40), nn.Tanh(), nn.Linear(40, 3)))
    torch.manual_seed(0)
    step_e, model_e, _ = make()
    torch.manual_seed(0)
    step_t, model_t, _ = make()
    fn = terra.function(step_t, cache_dir=None)
    states_e, states_t, losses_e, losses_t = [], [], [], []
    data = batches(9)
    torch.manual_seed(11)
    for x, y in data:
        losses_e.append(step_e(x, y).item())
        states_e.append(torch.get_rng_state())
    torch.manual_seed(11)
    for x, y in data:
        losses_t.append(fn(x, y).item())
        states_t.append(torch.get_rng_state())
    for i, (a, b) in enumerate(zip(states_e, states_t)):
        assert torch.equal(a, b), f"generator state differs after step {i}"
    torch.testing.assert_close(losses_t, losses_e, rtol=1e-5, atol=1e-6)
    for pe, pt in zip(model_e.parameters(), model_t.parameters()):
        torch.testing.assert_close(pt, pe, rtol=1e-5, atol=1e-6)
    stats = terra.stats(fn)
    assert stats["fallbacks"] == 0 and stats["coexec_iterations"] >= 4, stats
    # Two masks of 8 x 40 samples per co-executed step.
    assert calls == [320, 320] * stats["coexec_iterations"]


def test_dropout_still_matches_eager_under_compare() -> None:
    # compare() checks losses, parameters and state after every step.
    make = sgd_program(loss=lambda m, x, y: F.cross_entropy(m(x), y), momentum=0.9,
                       model_fn=lambda: nn.Sequential(nn.Linear(6, 16), nn.Dropout(0.4), nn.Tanh(),
                                                      nn.Dropout(0.1), nn.Linear(16, 3)))
    stats = compare(make, batches(8), max_fallbacks=0)
    assert stats["coexec_iterations"] >= 4


def test_dropout_mask_draws_what_native_dropout_draws() -> None:
    # terra::dropout_mask is native_dropout's mask from the same generator
    # state, leaving the same state, for a view with an offset too; its
    # output is native_dropout_backward(x, mask, scale) bit for bit.
    base = torch.randn(9, 13)
    for x in (base, base[2:, 1:], base.t()):
        torch.manual_seed(3)
        ref_out, ref_mask = torch.native_dropout(x, 0.3, True)
        ref_next = torch.rand(4)
        torch.manual_seed(3)
        mask = dropout.DROPOUT_MASK(x, 0.3, True)
        assert torch.equal(mask, ref_mask) and mask.stride() == ref_mask.stride()
        assert torch.equal(torch.rand(4), ref_next)
        x_, p, train, scale = dropout.split_args((x, 0.3, True), {})
        assert x_ is x and (p, train) == (0.3, True)
        assert torch.equal(torch.ops.aten.native_dropout_backward(x, mask, scale), ref_out)


def test_only_training_dropout_of_floats_is_split() -> None:
    x = torch.randn(3)
    assert dropout.split_args((x, 0.5, False), {}) is None  # evaluation: no draw
    assert dropout.split_args((x.long(), 0.5, True), {}) is None
    assert dropout.split_args((x, 1.5, True), {}) is None
    assert dropout.split_args((x,), {"p": 1.0, "train": None})[1:] == (1.0, None, 0.0)
    assert dropout.split_args((x, 0.5), {"train": True})[3] == 2.0


def test_evaluation_mode_fused_dropout_stays_in_the_graph() -> None:
    def loss(model, x, y):
        return F.cross_entropy(model[1](torch.native_dropout(model[0](x), 0.4, False)[0]), y)
    make = sgd_program(loss=loss, model_fn=lambda: nn.Sequential(nn.Linear(6, 8), nn.Linear(8, 3)))
    stats = compare(make, batches(8), max_fallbacks=0)
    assert stats["replayed_iterations"] >= 2


_VALUE_DRAWS = {
    "bernoulli": lambda h: h * torch.bernoulli(torch.sigmoid(h).detach()),
    "bernoulli_": lambda h: h * torch.empty_like(h).bernoulli_(torch.sigmoid(h).detach()),
    "multinomial": lambda h: h + torch.multinomial(torch.softmax(h.detach(), 1), 2, replacement=True)
    .float().sum(1, keepdim=True),
    "normal": lambda h: h + torch.normal(h.detach(), 0.1) + torch.normal(0.0, h.detach().abs() + 0.1),
    "poisson": lambda h: h + torch.poisson(h.detach().abs()),
    "rrelu": lambda h: F.rrelu(h, training=True),
}


@pytest.mark.parametrize("draw", sorted(_VALUE_DRAWS))
def test_random_ops_that_read_values_draw_on_the_host_like_eager(draw: str) -> None:
    # Their inputs come from the graph: the host reads them (fetches) and
    # draws where eager draws, between the program's other draws. As host
    # callbacks on the graph's thread they drew at other times (wrong
    # numbers; multinomial, poisson and rrelu also fell back every step).
    def loss(model, x, y):
        h = _VALUE_DRAWS[draw](model[0](x + torch.rand(x.shape)))
        return F.cross_entropy(model[1](h + torch.rand(h.shape) * 0.1), y)
    make = sgd_program(loss=loss, momentum=0.9, model_fn=lambda: nn.Sequential(nn.Linear(6, 16), nn.Linear(16, 3)))
    stats = compare(make, batches(12), max_fallbacks=0)
    assert stats["replayed_iterations"] >= 4


_SHAPE_DRAWS = {
    "randn(generator=)": lambda h, g: h + torch.randn(h.shape, generator=g),
    "randperm(generator=)": lambda h, g: h[torch.randperm(h.shape[0], generator=g)],
    "normal(float, float)": lambda h, g: h + torch.normal(0.0, 0.5, size=tuple(h.shape)),
    "random_": lambda h, g: h + torch.empty(h.shape).random_(3),
    "random_(from, to)": lambda h, g: h + torch.empty(h.shape).random_(1, 4, generator=g),
}


@pytest.mark.parametrize("draw", sorted(_SHAPE_DRAWS))
def test_random_constructors_of_every_form_draw_on_the_host(draw: str) -> None:
    # Forms with an explicit generator made the step run eagerly for good
    # (a Generator argument is not expressible in the graph); normal(float,
    # float) and random_ were graph ops whose draws came at other times
    # than eager's (wrong numbers). Every op taking a Generator is drawn on
    # the host now (tracing.OpInfo.random).
    def make() -> tuple:
        gen = torch.Generator().manual_seed(7)  # the program's own, one per copy

        def loss(model, x, y):
            h = _SHAPE_DRAWS[draw](model[0](x + torch.rand(x.shape)), gen)
            return F.cross_entropy(model[1](h + torch.rand(h.shape) * 0.1), y)
        return sgd_program(loss=loss, momentum=0.9, model_fn=lambda: nn.Sequential(
            nn.Linear(6, 16), nn.Linear(16, 3)))()
    stats = compare(make, batches(12), max_fallbacks=0)
    assert stats["replayed_iterations"] >= 4

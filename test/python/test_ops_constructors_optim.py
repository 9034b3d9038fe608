"""Numerical tests of the tensor constructors, the optimizer update ops
(addcmul, addcdiv, lerp, _foreach_*) and the Philox-based random ops,
through the compiled path.

Random ops cannot match torch's generator bit for bit; they are checked
statistically, for determinism in (seed, offset), and bit-exactly against
the pure-Python Philox4x32-10 below (itself checked against the Random123
known-answer vectors). The convention is documented in
lib/Lowering/TerraToLinalg/Random.cpp."""
import numpy as np
import pytest
import torch

from oprunner import check_expected, check_op, run_op

torch.manual_seed(0)
A = torch.ops.aten


def rand(*shape):
    return torch.randn(shape, dtype=torch.float32)


# --- Constructors ----------------------------------------------------------

def test_zeros_ones_full():
    check_expected("aten.zeros", [], {"size": [2, 3]}, torch.zeros(2, 3))
    check_expected("aten.ones", [], {"size": [4]}, torch.ones(4))
    check_expected("aten.ones", [], {"size": []}, torch.ones(()))
    check_expected("aten.zeros", [], {"size": [3, 1]}, torch.zeros(3, 1, dtype=torch.int64))
    check_expected("aten.full", [], {"size": [2, 5], "fill_value": 3.5}, torch.full((2, 5), 3.5))
    check_expected("aten.full", [], {"size": [3], "fill_value": 7}, torch.full((3,), 7))
    check_expected("aten.full", [], {"size": [2, 2], "fill_value": True},
                   torch.full((2, 2), True))
    check_expected("aten.full", [], {"size": [2], "fill_value": -2}, torch.full((2,), -2.0))
    check_expected("aten.scalar_tensor", [], {"s": 2.25}, torch.scalar_tensor(2.25))
    check_expected("aten.empty.memory_format", [], {"size": [3, 2]}, torch.zeros(3, 2))


def test_like_constructors():
    x = rand(3, 4)
    for name in ("aten.zeros_like", "aten.ones_like", "aten.empty_like"):
        check_expected(name, [x], {}, torch.zeros_like(x) if name != "aten.ones_like"
                       else torch.ones_like(x))
    check_expected("aten.full_like", [x], {"fill_value": -1.5}, torch.full_like(x, -1.5))
    check_expected("aten.ones_like", [x], {}, torch.ones_like(x, dtype=torch.int64))
    check_expected("aten.full_like", [x], {"fill_value": 2}, torch.full_like(x, 2, dtype=torch.bool))


def test_like_constructors_dynamic():
    x = rand(7, 2)
    check_expected("aten.zeros_like", [x], {}, torch.zeros_like(x), dynamic=[0])
    check_expected("aten.ones_like", [x], {}, torch.ones_like(x), dynamic=[0])
    check_expected("aten.full_like", [x], {"fill_value": 0.5}, torch.full_like(x, 0.5), dynamic=[0])
    check_expected("aten.fill.Scalar", [x], {"value": 4.0}, torch.full_like(x, 4.0), dynamic=[0])


def test_fill_and_new():
    x = rand(2, 6)
    check_op("aten.fill.Scalar", [x], {"value": 1.25})
    check_expected("aten.fill_.Scalar", [x], {"value": -3}, A.fill_.Scalar(x.clone(), -3))
    v = torch.tensor(0.75)
    check_expected("aten.fill.Tensor", [x, v], {}, A.fill.Tensor(x, v))
    check_expected("aten.fill_.Tensor", [x, v], {}, A.fill_.Tensor(x.clone(), v))
    check_expected("aten.zero_", [x], {}, torch.zeros_like(x))
    check_expected("aten.new_zeros", [x], {"size": [3, 1, 2]}, A.new_zeros(x, [3, 1, 2]))
    check_expected("aten.new_ones", [x], {"size": [5]}, A.new_ones(x, [5]))
    check_expected("aten.new_full", [x], {"size": [2, 2], "fill_value": 9.0},
                   A.new_full(x, [2, 2], 9.0))
    xi = torch.randint(0, 5, (3,))
    check_expected("aten.fill.Scalar", [xi], {"value": 2.9}, A.fill.Scalar(xi, 2.9))


@pytest.mark.parametrize("name,args", [
    ("aten.arange", {"end": 5}),
    ("aten.arange", {"end": 4.5}),
    ("aten.arange.start", {"start": 1, "end": 7}),
    ("aten.arange.start", {"start": -2.5, "end": 3.0}),
    ("aten.arange.start_step", {"start": 0.0, "end": 1.0, "step": 0.1}),
    ("aten.arange.start_step", {"start": 10, "end": 0, "step": -3}),
    ("aten.arange.start_step", {"start": 0, "end": 100, "step": 7}),
    ("aten.arange.start_step", {"start": 1.0, "end": -1.0, "step": -0.25}),
])
def test_arange(name, args):
    expected = getattr(A.arange, name.split(".")[2] if name.count(".") == 2 else "default")(**args)
    check_expected(name, [], args, expected, rtol=0, atol=1e-6)


def test_arange_dtype_from_result_type():
    expected = torch.arange(0, 10, 2, dtype=torch.float32)
    check_expected("aten.arange.start_step", [], {"start": 0, "end": 10, "step": 2}, expected,
                   rtol=0, atol=0)


# --- Optimizer updates -----------------------------------------------------

def check_inplace(name, inputs, args=None, **kw):
    """In-place ops: the eager result is self after the update."""
    args = args or {}
    clones = [t.clone() for t in inputs]
    out = getattr(getattr(A, name.split(".")[1]),
                  name.split(".")[2] if name.count(".") == 2 else "default")(*clones, **args)
    if out is None:
        out = clones[0]
    check_expected(name, inputs, args, out, **kw)


@pytest.mark.parametrize("name", ["aten.addcmul", "aten.addcmul_", "aten.addcdiv",
                                  "aten.addcdiv_"])
@pytest.mark.parametrize("value", [None, 0.5, -2])
def test_addcmul_addcdiv(name, value):
    args = {} if value is None else {"value": value}
    s, t1, t2 = rand(3, 5), rand(3, 5), rand(3, 5).abs() + 0.5
    check_inplace(name, [s, t1, t2], args)
    # Broadcasting tensor1/tensor2 against self.
    check_inplace(name, [rand(2, 4, 3), rand(3), rand(4, 1)], args)


def test_addcmul_dynamic_and_int():
    s, t1, t2 = rand(6, 3), rand(6, 3), rand(6, 3)
    check_expected("aten.addcmul", [s, t1, t2], {"value": 0.1}, torch.addcmul(s, t1, t2, value=0.1),
                   dynamic=[0])
    si, ai, bi = (torch.randint(-5, 5, (4,)) for _ in range(3))
    check_expected("aten.addcmul", [si, ai, bi], {"value": 3}, torch.addcmul(si, ai, bi, value=3))


@pytest.mark.parametrize("weight", [0.0, 0.3, 0.5, 0.9, 1.0, -0.7, 1.5])
def test_lerp_scalar(weight):
    s, e = rand(4, 5), rand(4, 5)
    check_inplace("aten.lerp.Scalar", [s, e], {"weight": weight})
    check_inplace("aten.lerp_.Scalar", [s, e], {"weight": weight})


def test_lerp_tensor():
    s, e = rand(4, 5), rand(4, 5)
    w = torch.rand(4, 5) * 1.6 - 0.3
    check_inplace("aten.lerp.Tensor", [s, e, w])
    check_inplace("aten.lerp_.Tensor", [s, e, w])
    check_inplace("aten.lerp.Tensor", [s, rand(5), torch.rand(4, 1)])
    check_expected("aten.lerp.Tensor", [s, e, w], {}, torch.lerp(s, e, w), dynamic=[0])


SHAPES = [(3,), (2, 5), (4, 1, 3)]


def lists(k, positive=False):
    out = []
    for _ in range(k):
        ts = [rand(*s) for s in SHAPES]
        out.append([t.abs() + 0.5 for t in ts] if positive else ts)
    return out


def check_foreach(name, tensor_lists, args=None, **kw):
    """_foreach_ ops: the lists are flattened into the operands; the N results are the
    returned list, or for in-place forms the updated self list."""
    args = args or {}
    parts = name.split(".")
    packet = getattr(A, parts[1])
    overload = getattr(packet, parts[2] if len(parts) == 3 else "default")
    clones = [[t.clone() for t in ts] for ts in tensor_lists]
    out = overload(*clones, **args)
    expected = clones[0] if out is None else list(out)
    flat = [t for ts in tensor_lists for t in ts]
    check_expected(name, flat, args, expected, **kw)


FOREACH_CASES = [
    ("_foreach_add.Scalar", 1, {"scalar": 0.5}),
    ("_foreach_add.List", 2, {}),
    ("_foreach_add.List", 2, {"alpha": -0.1}),
    ("_foreach_add.ScalarList", 1, {"scalars": [1.0, -2.0, 0.25]}),
    ("_foreach_sub.Scalar", 1, {"scalar": 2.0}),
    ("_foreach_sub.List", 2, {"alpha": 3.0}),
    ("_foreach_mul.Scalar", 1, {"scalar": 0.9}),
    ("_foreach_mul.List", 2, {}),
    ("_foreach_mul.ScalarList", 1, {"scalars": [0.5, 2.0, -1.0]}),
    ("_foreach_div.Scalar", 1, {"scalar": 4.0}),
    ("_foreach_div.List", 2, {}),
    ("_foreach_div.ScalarList", 1, {"scalars": [0.5, 2.0, -1.0]}),
    ("_foreach_addcmul.Scalar", 3, {"value": 0.999}),
    ("_foreach_addcmul.Scalar", 3, {}),
    ("_foreach_addcmul.ScalarList", 3, {"scalars": [1.0, 0.5, -0.25]}),
    ("_foreach_addcdiv.Scalar", 3, {"value": -0.01}),
    ("_foreach_addcdiv.ScalarList", 3, {"scalars": [1.0, 0.5, -0.25]}),
    ("_foreach_maximum.List", 2, {}),
    ("_foreach_sqrt", 1, {}),
    ("_foreach_neg", 1, {}),
    ("_foreach_exp", 1, {}),
    ("_foreach_abs", 1, {}),
    ("_foreach_reciprocal", 1, {}),
]


@pytest.mark.parametrize("inplace", [False, True])
@pytest.mark.parametrize("base,k,args", FOREACH_CASES)
def test_foreach(base, k, args, inplace):
    op, _, overload = base.partition(".")
    name = "aten." + op + ("_" if inplace else "") + ("." + overload if overload else "")
    positive = any(s in base for s in ("sqrt", "div", "reciprocal"))
    check_foreach(name, lists(k, positive), args)


def test_foreach_zero_and_dynamic():
    check_foreach("aten._foreach_zero_", lists(1))
    ts = [rand(6, 3), rand(6, 1)]
    us = [rand(6, 3), rand(6, 1)]
    check_foreach("aten._foreach_add_.List", [ts, us], {"alpha": 0.5}, dynamic=[0])
    check_foreach("aten._foreach_addcdiv_.Scalar",
                  [ts, us, [u.abs() + 1 for u in us]], {"value": 0.1}, dynamic=[0])


def test_foreach_lerp():
    # torch 1.13 has no _foreach_lerp; its semantics are lerp per element.
    s, e = lists(2)
    w = [torch.rand(*t.shape) for t in s]
    for inplace in ("", "_"):
        check_expected(f"aten._foreach_lerp{inplace}.Scalar", s + e, {"weight": 0.3},
                       [torch.lerp(a, b, 0.3) for a, b in zip(s, e)])
        check_expected(f"aten._foreach_lerp{inplace}.List", s + e + w, {},
                       [torch.lerp(a, b, c) for a, b, c in zip(s, e, w)])


def test_adam_step_matches_torch():
    """One Adam update written with the lowered ops, against torch.optim.Adam."""
    p, g = rand(5, 4), rand(5, 4)
    m, v = rand(5, 4) * 0.1, rand(5, 4).abs() * 0.01
    lr, b1, b2, eps, step = 1e-2, 0.9, 0.999, 1e-8, 3
    m1 = run_op("aten.lerp.Scalar", [m, g], {"weight": 1 - b1}, [m])[0]
    v1 = run_op("aten.addcmul_", [v * b2, g, g], {"value": 1 - b2}, [v])[0]
    bc1, bc2 = 1 - b1 ** step, 1 - b2 ** step
    denom = torch.from_numpy(v1).sqrt() / (bc2 ** 0.5) + eps
    p1 = run_op("aten.addcdiv_", [p, torch.from_numpy(m1), denom], {"value": -lr / bc1}, [p])[0]

    ref = p.clone().requires_grad_()
    opt = torch.optim.Adam([ref], lr=lr, betas=(b1, b2), eps=eps)
    opt.state[ref] = {"step": torch.tensor(float(step - 1)), "exp_avg": m.clone(),
                      "exp_avg_sq": v.clone()}
    ref.grad = g.clone()
    opt.step()
    np.testing.assert_allclose(p1, ref.detach().numpy(), rtol=1e-5, atol=1e-6)


# --- Random: Philox4x32-10 -------------------------------------------------

M0, M1, W0, W1, MASK32 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85, 0xFFFFFFFF


def philox4x32_10(ctr, key):
    """Reference Philox4x32-10 (Random123): four 32-bit counter words, two key words."""
    c, k = list(ctr), list(key)
    for r in range(10):
        if r:
            k = [(k[0] + W0) & MASK32, (k[1] + W1) & MASK32]
        p0, p1 = M0 * c[0], M1 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k[0]) & MASK32, p1 & MASK32,
             ((p0 >> 32) ^ c[3] ^ k[1]) & MASK32, p0 & MASK32]
    return c


def reference_uniform(seed, offset, numel):
    """u for elements 0..numel-1 under the convention of Random.cpp."""
    key = (seed & MASK32, (seed >> 32) & MASK32)
    out = []
    for i in range(numel):
        x = philox4x32_10((offset & MASK32, (offset >> 32) & MASK32, i & MASK32, i >> 32), key)[0]
        out.append((x >> 8) / 2.0 ** 24)
    return np.array(out)


def test_philox_reference_known_answers():
    # Random123's kat_vectors for philox4x32_10.
    assert philox4x32_10((0, 0, 0, 0), (0, 0)) == [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert philox4x32_10((MASK32,) * 4, (MASK32, MASK32)) == [
        0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]
    assert philox4x32_10((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
                         (0xA4093822, 0x299F31D0)) == [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]


@pytest.mark.parametrize("seed,offset", [(0, 0), (42, 7), (2**40 + 123, 2**33 + 5),
                                         (2**63 - 1, 2**62)])
def test_compiled_philox_bits_match_reference(seed, offset):
    x = rand(3, 5)
    got = run_op("aten.uniform_", [x], {"seed": seed, "offset": offset, "from": 0.0, "to": 1.0},
                 [x])[0]
    expected = reference_uniform(seed, offset, 15).reshape(3, 5).astype(np.float32)
    np.testing.assert_array_equal(got, expected)


def dropout(x, p, seed, offset, train=True, dynamic=()):
    out, mask = A.native_dropout(x, p, train)  # types only
    return run_op("aten.native_dropout", [x], {"p": p, "train": train, "seed": seed,
                                               "offset": offset}, [out, mask], dynamic)


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.9])
def test_dropout_statistics_and_scaling(p):
    x = rand(256, 256)
    out, mask = dropout(x, p, seed=1234, offset=0)
    assert mask.dtype == np.bool_
    kept = mask.mean()
    assert abs(kept - (1 - p)) < 0.01, kept
    np.testing.assert_allclose(out, x.numpy() * mask / (1 - p), rtol=1e-6, atol=1e-6)


def test_dropout_mask_matches_reference_bits():
    x = rand(4, 6)
    seed, offset, p = 2024, 96, 0.4
    _, mask = dropout(x, p, seed, offset)
    u = reference_uniform(seed, offset, 24).reshape(4, 6)
    np.testing.assert_array_equal(mask, u < 1 - p)


def test_dropout_determinism():
    x = rand(64, 33)
    a = dropout(x, 0.5, seed=7, offset=1000)
    b = dropout(x, 0.5, seed=7, offset=1000)
    c = dropout(x, 0.5, seed=7, offset=1000 + x.numel())
    d = dropout(x, 0.5, seed=8, offset=1000)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])
    assert (a[1] != c[1]).mean() > 0.3
    assert (a[1] != d[1]).mean() > 0.3


def test_dropout_edge_cases():
    x = rand(8, 9)
    out, mask = dropout(x, 0.0, 1, 2)
    assert mask.all()
    np.testing.assert_array_equal(out, x.numpy())
    out, mask = dropout(x, 1.0, 1, 2)
    assert not mask.any()
    np.testing.assert_array_equal(out, np.zeros_like(out))
    out, mask = dropout(x, 0.5, 1, 2, train=False)
    assert mask.all()
    np.testing.assert_array_equal(out, x.numpy())


def test_dropout_dynamic_and_seed_operands():
    x = rand(10, 7)
    out, mask = dropout(x, 0.25, seed=5, offset=70, dynamic=[0])
    np.testing.assert_array_equal(mask, reference_uniform(5, 70, 70).reshape(10, 7) < 0.75)
    np.testing.assert_allclose(out, x.numpy() * mask / 0.75, rtol=1e-6)
    # seed and offset as 0-d i64 operands (fresh per run) give the same bits.
    ref_out, ref_mask = A.native_dropout(x, 0.25, True)
    got = run_op("aten.native_dropout", [x, torch.tensor(5), torch.tensor(70)],
                 {"p": 0.25, "train": True}, [ref_out, ref_mask])
    np.testing.assert_array_equal(got[1], mask)
    np.testing.assert_array_equal(got[0], out)


def test_dropout_backward():
    g = rand(5, 6)
    mask = torch.rand(5, 6) > 0.3
    check_op("aten.native_dropout_backward", [g, mask], {"scale": 1 / 0.7})
    check_op("aten.native_dropout_backward", [g, mask], {"scale": 2.0}, dynamic=[0])


def test_bernoulli_and_uniform():
    x = rand(128, 128)
    got = run_op("aten.bernoulli_.float", [x], {"p": 0.2, "seed": 3, "offset": 0}, [x])[0]
    assert set(np.unique(got)) <= {0.0, 1.0}
    assert abs(got.mean() - 0.2) < 0.01
    np.testing.assert_array_equal(got, (reference_uniform(3, 0, x.numel()) < 0.2)
                                  .reshape(128, 128).astype(np.float32))
    got = run_op("aten.uniform_", [x], {"from": -2.0, "to": 3.0, "seed": 9, "offset": 4}, [x])[0]
    assert got.min() >= -2.0 and got.max() < 3.0 and abs(got.mean() - 0.5) < 0.05
    got = run_op("aten.bernoulli.p", [x], {"p": 0.7, "seed": 3, "offset": 0}, [x])[0]
    np.testing.assert_array_equal(got, (reference_uniform(3, 0, x.numel()) < 0.7)
                                  .reshape(128, 128).astype(np.float32))
    got = run_op("aten.rand", [], {"size": [2, 3], "seed": 11, "offset": 0}, [rand(2, 3)])[0]
    np.testing.assert_array_equal(got, reference_uniform(11, 0, 6).reshape(2, 3)
                                  .astype(np.float32))
    got = run_op("aten.rand_like", [x], {"seed": 9, "offset": 4}, [x])[0]
    np.testing.assert_array_equal(got, reference_uniform(9, 4, x.numel())
                                  .reshape(128, 128).astype(np.float32))

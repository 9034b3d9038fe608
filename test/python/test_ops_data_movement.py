"""Numerical tests of the data-movement lowerings (reshapes, transposes,
broadcasts, slicing, concatenation, gathers, embedding and their backward
ops) against eager PyTorch, through the compiled path. Data movement is
exact, so the tolerance is zero."""
import pytest
import torch

from oprunner import check_expected, check_op

torch.manual_seed(0)
A = torch.ops.aten
EXACT = {"rtol": 0, "atol": 0}
INT64_MAX = 2**63 - 1


def rand(*shape):
    return torch.randn(shape, dtype=torch.float32)


# --- Reshapes ------------------------------------------------------------

@pytest.mark.parametrize("src,dst", [
    ((2, 3, 4), (6, 4)), ((2, 3, 4), (2, 12)), ((2, 3, 4), (24,)), ((2, 3, 4), (4, 3, 2)),
    ((2, 3, 4), (2, 1, 3, 4)), ((2, 3, 4), (1, 24, 1)), ((3, 4), (2, 6)), ((6,), (1, 2, 1, 3, 1)),
    ((1, 5, 1), (5,)), ((), (1, 1)), ((1,), ()), ((2, 3), (2, 3)), ((4, 6), (3, 8)),
])
@pytest.mark.parametrize("name", ["aten.view", "aten._unsafe_view"])
def test_view_static(name, src, dst):
    check_op(name, [rand(*src)], {"size": list(dst)}, **EXACT)


def test_reshape_minus_one_and_ints():
    x = torch.arange(24).reshape(2, 3, 4)
    check_op("aten.reshape", [x], {"shape": [-1, 4]}, **EXACT)
    check_op("aten.view", [rand(5, 6)], {"size": [3, -1]}, **EXACT)
    check_op("aten.flatten.using_ints", [rand(2, 3, 4, 5)], {"start_dim": 1, "end_dim": 2}, **EXACT)


@pytest.mark.parametrize("src,size", [
    ((8, 3, 4), [8, 12]), ((8, 12), [8, 3, 4]), ((6, 4), [-1, 2, 4]), ((5, 2, 3), [-1]),
    ((4, 6), [-1, 3]), ((7, 1, 4), [7, 4]), ((3, 2, 5), [-1, 5, 1]),
])
def test_view_dynamic_batch(src, size):
    check_op("aten.view", [rand(*src)], {"size": size}, dynamic=[0], **EXACT)


def test_view_two_dynamic_dims():
    # Batch and sequence both dynamic: merging them is a collapse; splitting
    # needs the size arg (tensor.reshape with a shape tensor).
    check_op("aten.view", [rand(4, 6, 8)], {"size": [-1, 8]}, dynamic=[0, 1], **EXACT)
    check_op("aten.view", [rand(4, 6, 8)], {"size": [4, -1, 2, 4]}, dynamic=[0, 1], **EXACT)
    check_op("aten.view", [rand(24, 8)], {"size": [4, 6, 8]}, dynamic=[0, 1], **EXACT)


def test_unflatten_and_squeeze_dims():
    x = rand(2, 12, 3)
    check_expected("aten.unflatten.int", [x], {"dim": 1, "sizes": [3, 4]}, x.unflatten(1, (3, 4)),
                   **EXACT)
    # squeeze.dims (torch 2.x) drops the listed unit dims.
    y = rand(1, 3, 1, 2)
    check_expected("aten.squeeze.dims", [y], {"dim": [0, -2]}, y.squeeze(2).squeeze(0), **EXACT)
    check_expected("aten.squeeze.dims", [y], {"dim": [1]}, y, **EXACT)


def test_reshape_alias_contiguous():
    check_op("aten._reshape_alias", [rand(2, 3, 4)], {"size": [6, 4], "stride": [4, 1]}, **EXACT)


def test_reshape_alias_of_a_non_contiguous_view_is_its_reshaped_value():
    # reshape() of a permuted tensor that can still be viewed emits
    # _reshape_alias with strides of that eager layout; its value is the
    # logical reshape (graph values have no layout). Faster R-CNN hit this:
    # honouring the traced strides scattered gradients to wrong anchors.
    y = rand(2, 3, 8)[:, :, ::2]  # (2, 3, 4) with strides (24, 8, 2): viewable as (6, 4)
    out = y.reshape(6, 4)
    assert out._base is not None  # a view: torch used _reshape_alias
    check_expected("aten._reshape_alias", [y], {"size": [6, 4], "stride": [8, 2]}, out, **EXACT)


# --- Transposes and broadcasts ---------------------------------------------

@pytest.mark.parametrize("shape,dims", [((2, 3, 4), [2, 0, 1]), ((2, 3, 4), [-1, 0, 1]),
                                        ((5, 7), [1, 0]), ((2, 3, 4, 5), [0, 2, 1, 3]),
                                        ((3,), [0])])
def test_permute(shape, dims):
    check_op("aten.permute", [rand(*shape)], {"dims": dims}, **EXACT)
    check_op("aten.permute", [torch.randint(0, 9, shape)], {"dims": dims}, **EXACT)


def test_permute_dynamic():
    check_op("aten.permute", [rand(6, 3, 4)], {"dims": [1, 2, 0]}, dynamic=[0], **EXACT)


@pytest.mark.parametrize("d0,d1", [(0, 1), (0, -1), (-2, -1), (1, 1)])
def test_transpose(d0, d1):
    check_op("aten.transpose.int", [rand(2, 3, 5)], {"dim0": d0, "dim1": d1}, **EXACT)


def test_transpose_dynamic_and_t():
    check_op("aten.transpose.int", [rand(7, 3)], {"dim0": 0, "dim1": 1}, dynamic=[0], **EXACT)
    check_op("aten.t", [rand(4, 6)], **EXACT)
    check_op("aten.t", [rand(4)], **EXACT)
    check_op("aten.t", [rand(5, 2)], dynamic=[0], **EXACT)


@pytest.mark.parametrize("shape,size", [((3, 1), [2, 3, 4]), ((1,), [5]), ((3, 1), [-1, 4]),
                                        ((), [2, 3]), ((2, 1, 3), [4, 2, 5, 3]),
                                        ((4,), [2, 4])])
def test_expand(shape, size):
    check_op("aten.expand", [rand(*shape)], {"size": size}, **EXACT)


def test_expand_dynamic():
    check_op("aten.expand", [rand(6, 1)], {"size": [-1, 5]}, dynamic=[0], **EXACT)
    check_op("aten.expand", [rand(6, 1, 2)], {"size": [-1, 3, 2]}, dynamic=[0], **EXACT)


# --- Squeeze / unsqueeze ---------------------------------------------------

@pytest.mark.parametrize("shape,dim", [((3, 4), 0), ((3, 4), 1), ((3, 4), 2), ((3, 4), -1),
                                       ((3, 4), -3), ((), 0), ((5,), -1)])
def test_unsqueeze(shape, dim):
    check_op("aten.unsqueeze", [rand(*shape)], {"dim": dim}, **EXACT)


def test_unsqueeze_dynamic():
    check_op("aten.unsqueeze", [rand(5, 3)], {"dim": 1}, dynamic=[0], **EXACT)
    check_op("aten.unsqueeze", [rand(5, 3)], {"dim": 0}, dynamic=[0], **EXACT)


@pytest.mark.parametrize("shape,dim", [((3, 1, 4), 1), ((3, 1, 4), -2), ((3, 1, 4), 0),
                                       ((1,), 0), ((4, 1), -1), ((), 0)])
def test_squeeze_dim(shape, dim):
    check_op("aten.squeeze.dim", [rand(*shape)], {"dim": dim}, **EXACT)


def test_squeeze_all_and_dynamic():
    check_op("aten.squeeze", [rand(1, 3, 1, 2, 1)], **EXACT)
    check_op("aten.squeeze.dim", [rand(5, 1, 4)], {"dim": 1}, dynamic=[0], **EXACT)
    check_op("aten.squeeze.dim", [rand(5, 1, 4)], {"dim": 0}, dynamic=[0], **EXACT)


# --- Slicing -------------------------------------------------------------

@pytest.mark.parametrize("args", [
    {"dim": 1, "start": 1, "end": INT64_MAX, "step": 2},
    {"dim": 1, "start": -3, "end": -1, "step": 1},
    {"dim": 0, "end": 2},
    {"dim": 2, "start": None, "end": None, "step": 2},
    {"dim": -1, "start": 2, "end": 100, "step": 3},
    {"dim": 1, "start": -100, "end": 4, "step": 1},
    {"dim": 0, "start": 1},
    {"dim": 1, "start": 5, "end": 2},
    {"dim": 1, "start": 10, "end": INT64_MAX},
])
def test_slice(args):
    check_op("aten.slice.Tensor", [rand(4, 7, 5)], args, **EXACT)


@pytest.mark.parametrize("args", [
    {"dim": 0, "start": 1, "end": -1, "step": 1},
    {"dim": 0, "start": 0, "end": INT64_MAX, "step": 2},
    {"dim": 0, "start": -2, "end": INT64_MAX, "step": 1},
    {"dim": 1, "start": 1, "end": 3, "step": 1},
])
def test_slice_dynamic(args):
    check_op("aten.slice.Tensor", [rand(9, 5)], args, dynamic=[0], **EXACT)


# --- Writes through views, in functional form (tracing._functionalize) -----

@pytest.mark.parametrize("args,src", [
    ({"dim": 1, "start": 0, "end": 3}, (4, 3, 5)),
    ({"dim": 1, "start": 2, "end": INT64_MAX}, (4, 5, 5)),
    ({"dim": 0, "start": 1, "end": 4, "step": 2}, (2, 7, 5)),
    ({"dim": -1, "start": -2, "end": INT64_MAX}, (4, 7, 2)),
])
def test_slice_scatter(args, src):
    check_op("aten.slice_scatter", [rand(4, 7, 5), rand(*src)], args, **EXACT)


@pytest.mark.parametrize("args,src", [
    ({"dim": 0, "index": 2}, (7, 5)), ({"dim": 1, "index": -1}, (4, 5)), ({"dim": 2, "index": 0}, (4, 7)),
])
def test_select_scatter(args, src):
    check_op("aten.select_scatter", [rand(4, 7, 5), rand(*src)], args, **EXACT)


# diagonal views (a square and a wide matrix, offsets either way, past the
# end, dims of a batch, negative dims) and their functional forms.
DIAGONALS = [
    ((5, 5), {"offset": 0, "dim1": 0, "dim2": 1}),
    ((4, 6), {"offset": 2, "dim1": 0, "dim2": 1}),
    ((6, 4), {"offset": -3, "dim1": 0, "dim2": 1}),
    ((4, 3), {"offset": 5, "dim1": 0, "dim2": 1}),
    ((3, 4, 5), {"offset": 1, "dim1": 2, "dim2": 0}),
    ((2, 4, 4), {"offset": -1, "dim1": -2, "dim2": -1}),
]


@pytest.mark.parametrize("shape,args", DIAGONALS)
def test_diagonal(shape, args):
    check_op("aten.diagonal", [rand(*shape)], args, **EXACT)


@pytest.mark.parametrize("shape,args", DIAGONALS)
def test_diagonal_scatter_and_backward(shape, args):
    x = rand(*shape)
    src = torch.diagonal(x, **args).clone().normal_()
    check_op("aten.diagonal_scatter", [x, src], args, **EXACT)
    check_op("aten.diagonal_backward", [src], {"input_sizes": list(shape), **args}, **EXACT)


def test_diagonal_dynamic():
    # A batch of similarity matrices whose batch size is dynamic.
    check_op("aten.diagonal", [rand(6, 6)], {"offset": 0, "dim1": 0, "dim2": 1}, dynamic=[0, 1],
             **EXACT)
    check_op("aten.diagonal", [rand(3, 5, 4)], {"offset": 1, "dim1": 1, "dim2": 2}, dynamic=[0],
             **EXACT)
    x = rand(7, 7)
    check_op("aten.diagonal_scatter", [x, rand(7)], {"offset": 0, "dim1": 0, "dim2": 1},
             dynamic=[0, 1], **EXACT)


# as_strided views of a dense tensor that are blocks of it, reshaped: a
# block, a column (a select), rows with a step, the whole tensor read from
# its flat form, a single element, and a block of a flat tensor.
AS_STRIDED = [
    ((8, 5), {"size": [3, 2], "stride": [5, 1], "storage_offset": 7}),
    ((8, 3), {"size": [8], "stride": [3], "storage_offset": 1}),
    ((24,), {"size": [8], "stride": [3], "storage_offset": 0}),
    ((24,), {"size": [8, 3], "stride": [3, 1], "storage_offset": 0}),
    ((4, 6), {"size": [2, 3], "stride": [12, 1], "storage_offset": 2}),
    ((4, 6), {"size": [1, 1], "stride": [6, 1], "storage_offset": 13}),
    ((2, 8, 3), {"size": [8, 2], "stride": [3, 1], "storage_offset": 25}),
]


# as_strided views that run along a diagonal (autograd's CopySlices of a
# write through `m.diagonal()`): a whole one, one from the second column,
# the second matrix's of a batch, and one with a leading unit dim.
AS_STRIDED_DIAGONALS = [
    ((8, 8), {"size": [8], "stride": [9], "storage_offset": 0}),
    ((4, 6), {"size": [3], "stride": [7], "storage_offset": 1}),
    ((2, 4, 4), {"size": [4], "stride": [5], "storage_offset": 16}),
    ((5, 5), {"size": [1, 5], "stride": [25, 6], "storage_offset": 0}),
]


@pytest.mark.parametrize("shape,args", AS_STRIDED_DIAGONALS)
def test_as_strided_diagonal_runs(shape, args):
    check_op("aten.as_strided", [rand(*shape)], args, **EXACT)
    check_op("aten.as_strided_scatter", [rand(*shape), rand(*args["size"])], args, **EXACT)


@pytest.mark.parametrize("shape,args", AS_STRIDED)
def test_as_strided_blocks(shape, args):
    check_op("aten.as_strided", [rand(*shape)], args, **EXACT)


@pytest.mark.parametrize("shape,args", AS_STRIDED)
def test_as_strided_scatter_blocks(shape, args):
    check_op("aten.as_strided_scatter", [rand(*shape), rand(*args["size"])], args, **EXACT)


@pytest.mark.parametrize("name,args", [
    ("aten.split.Tensor", {"split_size": 3, "dim": 1}),   # 7 = 3 + 3 + 1
    ("aten.split.Tensor", {"split_size": 2, "dim": -1}),  # 5 = 2 + 2 + 1
    ("aten.split.Tensor", {"split_size": 4, "dim": 0}),   # one piece
    ("aten.split_with_sizes", {"split_sizes": [2, 0, 5], "dim": 1}),
])
def test_split(name, args):
    check_op(name, [rand(4, 7, 5)], args, **EXACT)


def test_split_dynamic():
    check_op("aten.split.Tensor", [rand(9, 5)], {"split_size": 2, "dim": 1}, dynamic=[0], **EXACT)
    check_op("aten.split_with_sizes", [rand(4, 7)], {"split_sizes": [3, 4], "dim": 1}, dynamic=[0],
             **EXACT)


@pytest.mark.parametrize("shape,dim,index", [((4, 7, 5), 1, -1), ((4, 7, 5), 0, 2),
                                             ((4, 7, 5), -1, 0), ((6,), 0, 3)])
def test_select(shape, dim, index):
    check_op("aten.select.int", [rand(*shape)], {"dim": dim, "index": index}, **EXACT)


def test_select_dynamic():
    check_op("aten.select.int", [rand(6, 3)], {"dim": 0, "index": -1}, dynamic=[0], **EXACT)
    check_op("aten.select.int", [rand(6, 3)], {"dim": 1, "index": 2}, dynamic=[0], **EXACT)


def test_slice_and_select_backward():
    g = rand(4, 3, 5)
    check_op("aten.slice_backward", [g], {"input_sizes": [4, 7, 5], "dim": 1, "start": 1,
                                          "end": INT64_MAX, "step": 2}, **EXACT)
    check_op("aten.slice_backward", [rand(4, 2, 5)], {"input_sizes": [4, 7, 5], "dim": -2,
                                                      "start": -3, "end": -1, "step": 1}, **EXACT)
    check_op("aten.select_backward", [rand(4, 5)], {"input_sizes": [4, 7, 5], "dim": 1,
                                                    "index": -2}, **EXACT)
    check_op("aten.select_backward", [rand(6, 5)], {"input_sizes": [6, 3, 5], "dim": 1,
                                                    "index": 0}, dynamic=[0], **EXACT)
    check_op("aten.slice_backward", [rand(6, 2)], {"input_sizes": [6, 5], "dim": 1, "start": 1,
                                                   "end": 5, "step": 2}, dynamic=[0], **EXACT)


# --- Concatenation -------------------------------------------------------

def cat_case(tensors, dim, **kw):
    expected = A.cat(list(tensors), dim)
    check_expected("aten.cat", tensors, {"dim": dim}, expected, **EXACT, **kw)


def test_cat():
    cat_case([rand(2, 3), rand(4, 3)], 0)
    cat_case([rand(2, 3), rand(2, 1), rand(2, 5)], 1)
    cat_case([rand(2, 3, 2), rand(2, 3, 1)], -1)
    cat_case([rand(5)], 0)
    cat_case([torch.randint(0, 5, (2, 2)), torch.randint(0, 5, (1, 2))], 0)
    # Mixed dtypes promote to the result type.
    cat_case([rand(2, 2), torch.randint(0, 5, (1, 2))], 0)
    # PyTorch skips legacy empty 1-d tensors.
    cat_case([rand(2, 3), torch.empty(0), rand(1, 3)], 0)


def test_cat_dynamic():
    cat_case([rand(5, 3), rand(5, 2)], 1, dynamic=[0])
    cat_case([rand(5, 3), rand(2, 3), rand(1, 3)], 0, dynamic=[0])


def stack_case(tensors, dim, **kw):
    expected = A.stack(list(tensors), dim)
    check_expected("aten.stack", tensors, {"dim": dim}, expected, **EXACT, **kw)


def test_stack():
    for dim in (0, 1, 2, -1, -3):
        stack_case([rand(2, 3), rand(2, 3), rand(2, 3)], dim)
    stack_case([rand(), rand()], 0)
    stack_case([rand(4, 3), rand(4, 3)], 1, dynamic=[0])


# --- Gathers -------------------------------------------------------------

def test_index_select():
    x = rand(5, 4, 3)
    for dim, idx in [(0, [4, 0, 0, 2]), (1, [3]), (-1, [2, 1, 0, 1, 2])]:
        i = torch.tensor(idx)
        check_expected("aten.index_select", [x, i], {"dim": dim}, A.index_select(x, dim, i), **EXACT)
    i32 = torch.tensor([1, 3], dtype=torch.int32)
    check_expected("aten.index_select", [x, i32], {"dim": 1}, A.index_select(x, 1, i32), **EXACT)
    i0 = torch.tensor(2)
    check_expected("aten.index_select", [x, i0], {"dim": 0}, A.index_select(x, 0, i0), **EXACT)


def test_index_select_dynamic():
    x, i = rand(6, 4), torch.tensor([0, 5, 2, 2, 1, 3, 4])
    check_expected("aten.index_select", [x, i], {"dim": 0}, A.index_select(x, 0, i),
                   dynamic=[0], **EXACT)


def test_gather():
    x = rand(4, 5, 3)
    i = torch.randint(0, 5, (4, 2, 3))
    check_expected("aten.gather", [x, i], {"dim": 1}, A.gather(x, 1, i), **EXACT)
    i = torch.randint(0, 4, (2, 5, 2))
    check_expected("aten.gather", [x, i], {"dim": 0}, A.gather(x, 0, i), **EXACT)
    i = torch.randint(0, 3, (3, 3, 3))
    check_expected("aten.gather", [x, i], {"dim": -1}, A.gather(x, -1, i), **EXACT)
    x, i = rand(7, 4), torch.randint(0, 4, (7, 6))
    check_expected("aten.gather", [x, i], {"dim": 1}, A.gather(x, 1, i), dynamic=[0], **EXACT)


def test_embedding():
    w = rand(10, 4)
    for shape in [(2, 3), (5,), ()]:
        idx = torch.randint(0, 10, shape)
        check_op("aten.embedding", [w, idx], **EXACT)
    check_op("aten.embedding", [w, torch.randint(0, 10, (3,), dtype=torch.int32)], **EXACT)
    check_op("aten.embedding", [w, torch.randint(0, 10, (6, 2))], {"padding_idx": 0}, **EXACT)


def test_embedding_dynamic():
    w, idx = rand(10, 4), torch.randint(0, 10, (7, 3))
    check_expected("aten.embedding", [w, idx], {}, A.embedding(w, idx), dynamic=[0], **EXACT)


@pytest.mark.parametrize("padding_idx", [-1, 2])
@pytest.mark.parametrize("scale", [False, True])
def test_embedding_dense_backward(padding_idx, scale):
    idx = torch.tensor([[2, 5, 2], [0, 2, 9]])
    g = rand(2, 3, 4)
    args = {"num_weights": 10, "padding_idx": padding_idx, "scale_grad_by_freq": scale}
    check_op("aten.embedding_dense_backward", [g, idx], args)


def test_embedding_dense_backward_shapes():
    args = {"num_weights": 7, "padding_idx": -1, "scale_grad_by_freq": False}
    check_op("aten.embedding_dense_backward", [rand(5, 3), torch.randint(0, 7, (5,))], args)
    check_op("aten.embedding_dense_backward", [rand(3), torch.tensor(4)], args)
    check_op("aten.embedding_dense_backward", [rand(6, 3), torch.randint(0, 7, (6,))], args,
             dynamic=[0])
    idx = torch.randint(0, 7, (4, 2))
    check_op("aten.embedding_dense_backward", [rand(4, 2, 3), idx], args, dynamic=[0])


def test_embedding_backward_matches_autograd():
    w = rand(12, 5).requires_grad_()
    idx = torch.randint(0, 12, (8, 4))
    out = torch.nn.functional.embedding(idx, w, padding_idx=3)
    g = rand(8, 4, 5)
    out.backward(g)
    args = {"num_weights": 12, "padding_idx": 3, "scale_grad_by_freq": False}
    check_expected("aten.embedding_dense_backward", [g, idx], args, w.grad)


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_unbind(dim):
    x = torch.randn(3, 4, 2)
    expected = torch.ops.aten.unbind.int(x, dim)
    check_expected("aten.unbind.int", [x], {"dim": dim}, expected)


def test_index_tensor_advanced_indexing():
    x = torch.randn(4, 5, 3)
    i = torch.tensor([0, 3, -1, 2, 2])
    j = torch.tensor([4, 0, 1, -5, 2])
    check_expected("aten.index.Tensor", [x, i], {}, x[i])
    check_expected("aten.index.Tensor", [x, i, j], {}, x[i, j])
    # Broadcasting index tensors: (2, 1) against (1, 3).
    a, b = torch.tensor([[0], [3]]), torch.tensor([[1, 2, 4]])
    check_expected("aten.index.Tensor", [x, a, b], {}, x[a, b])
    k = torch.tensor([1, 0, 2, 2, 0])
    check_expected("aten.index.Tensor", [x, i, j, k], {}, x[i, j, k])
    check_expected("aten.index.Tensor", [x, i], {}, x[i], dynamic=[1])


def test_gathers_check_each_index():
    # The bound check runs inside the gather's loop, called only when it
    # fails (terra-lower-graph): an index out of range still ends the run
    # with the op's message, wherever it sits among the elements.
    x = rand(4, 3)
    cases = [("aten.index.Tensor", [x, torch.tensor([0, 3, 4])], {}, (3, 3), "index: index out of range"),
             ("aten.index.Tensor", [x, torch.tensor([-5, 0])], {}, (2, 3), "index: index out of range"),
             ("aten.index_select", [x, torch.tensor([1, 2, 0, 7])], {"dim": 1}, (4, 4),
              "index_select: index out of range in self"),
             ("aten.embedding", [x, torch.tensor([[0, 1], [4, 2]])], {}, (2, 2, 3),
              "embedding: index out of range in self")]
    for name, args, kwargs, shape, message in cases:
        with pytest.raises(RuntimeError, match=message):
            check_expected(name, args, kwargs, rand(*shape))


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_every_dim_indexed(accumulate):
    x = torch.randn(3, 4)
    i = torch.tensor([0, 2, -1, 0])
    j = torch.tensor([1, 3, 0, 1])  # (0, 1) twice: the last value, or the sum
    v = torch.randn(4)
    expected = torch.ops.aten.index_put(x, [i, j], v, accumulate)
    check_expected("aten.index_put", [x, i, j, v], {"accumulate": accumulate}, expected)
    s = torch.tensor(7.0)
    expected = torch.ops.aten.index_put(x, [i, j], s, accumulate)
    check_expected("aten.index_put", [x, i, j, s], {"accumulate": accumulate}, expected)


@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_rows(accumulate):
    # Fewer index tensors than dims: whole rows, as the gradient of a
    # gather x[idx] puts them (repeats and a negative index included).
    x = torch.randn(5, 3, 2)
    i = torch.tensor([0, 3, -1, 0, 2, 3])
    v = torch.randn(6, 3, 2)
    expected = torch.ops.aten.index_put(x, [i], v, accumulate)
    check_expected("aten.index_put", [x, i, v], {"accumulate": accumulate}, expected, dynamic=[1, 2])
    one = torch.randn(1, 3, 2)  # one row for every index
    expected = torch.ops.aten.index_put(x, [i], one, accumulate)
    check_expected("aten.index_put", [x, i, one], {"accumulate": accumulate}, expected, dynamic=[1])
    # Two leading dims indexed, rows over the last one.
    j = torch.tensor([2, 0, 1, 2, 0, 2])
    w = torch.randn(6, 2)
    expected = torch.ops.aten.index_put(x, [i, j], w, accumulate)
    check_expected("aten.index_put", [x, i, j, w], {"accumulate": accumulate}, expected)


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("hw", [(4, 4), (3, 5), (1, 6)])
def test_affine_grid_generator(align_corners, hw):
    # Faster R-CNN's RoI grids: N follows theta (a dynamic count), H and W
    # fix the base grid (odd sizes and a size of 1 included).
    theta = torch.randn(7, 2, 3)
    size = [7, 5, *hw]
    expected = torch.ops.aten.affine_grid_generator(theta, size, align_corners)
    check_expected("aten.affine_grid_generator", [theta], {"size": size, "align_corners": align_corners},
                   expected, dynamic=[0])


@pytest.mark.parametrize("mask_dims", [1, 2, 3])
def test_index_with_a_boolean_mask(mask_dims):
    x = torch.randn(3, 4, 2)
    mask = torch.rand(x.shape[:mask_dims]) > 0.4
    check_expected("aten.index.Tensor", [x, mask], {}, x[mask], dynamic=[1])
    # An all-false mask selects nothing: an empty result.
    none = torch.zeros(x.shape[:mask_dims], dtype=torch.bool)
    check_expected("aten.index.Tensor", [x, none], {}, x[none])


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("mask_dims", [1, 3])
def test_index_put_with_a_boolean_mask(accumulate, mask_dims):
    # YOLOv3's backward of x[mask]: grad rows added into zeros at the mask.
    x = torch.randn(3, 4, 2)
    mask = torch.rand(x.shape[:mask_dims]) > 0.4
    count = int(mask.sum())
    v = torch.randn(count, *x.shape[mask_dims:])
    expected = torch.ops.aten.index_put(x, [mask], v, accumulate)
    check_expected("aten.index_put", [x, mask, v], {"accumulate": accumulate}, expected)
    s = torch.tensor(2.5)
    expected = torch.ops.aten.index_put(x, [mask], s, accumulate)
    check_expected("aten.index_put", [x, mask, s], {"accumulate": accumulate}, expected)


@pytest.mark.parametrize("pad", [[1, 0], [0, 2, 1, 1], [1, 2, 0, 0, 3, 1], [-1, 0], [1, -2, -1, 2]])
def test_constant_pad_nd(pad):
    x = torch.randn(2, 3, 4)
    check_op("aten.constant_pad_nd", [x], {"pad": pad, "value": 0.5}, **EXACT)
    check_op("aten.constant_pad_nd", [x], {"pad": pad}, **EXACT)


@pytest.mark.parametrize("shape,repeats", [((3,), (2,)), ((2, 3), (2, 2)), ((1, 3), (2, 4, 2)),
                                           ((2, 1, 3), (1, 3, 1)), ((4,), (3, 1))])
def test_repeat(shape, repeats):
    check_op("aten.repeat", [rand(*shape)], {"repeats": list(repeats)})


@pytest.mark.parametrize("shape,factor", [((1, 8, 3, 5), 2), ((2, 9, 2, 2), 3), ((3, 4, 4, 2, 2), 2)])
def test_pixel_shuffle_and_unshuffle(shape, factor):
    x = rand(*shape)
    check_op("aten.pixel_shuffle", [x], {"upscale_factor": factor}, **EXACT)
    y = torch.pixel_shuffle(x, factor)
    check_op("aten.pixel_unshuffle", [y], {"downscale_factor": factor}, **EXACT)


@pytest.mark.parametrize("shape,dims", [((5,), [0]), ((3, 4), [1]), ((2, 3, 4), [0, 2]), ((2, 3, 4), [-1])])
def test_flip(shape, dims):
    check_op("aten.flip", [rand(*shape)], {"dims": dims}, **EXACT)


@pytest.mark.parametrize("shape,dim,index,src", [
    ((5, 3), 0, [4, 0, 4, 2], (4, 3)),          # a repeated row accumulates in order
    ((4, 6), 1, [5, 1], (4, 2)),
    ((2, 5, 3), -2, [0, 0, 0], (2, 3, 3)),
    ((7,), 0, [6, 2, 6], (3,)),
])
@pytest.mark.parametrize("alpha", [1, 2.5])
def test_index_add(shape, dim, index, src, alpha):
    x, s = rand(*shape), rand(*src)
    idx = torch.tensor(index)
    want = torch.index_add(x, dim, idx, s, alpha=alpha)
    # With an alpha aten's vectorized add fuses the multiply (fmadd) and
    # its scalar tail does not: equal up to that rounding.
    tol = EXACT if alpha == 1 else {"rtol": 1e-6, "atol": 1e-6}
    check_expected("aten.index_add", [x, idx, s], {"dim": dim, "alpha": alpha}, want, **tol)
    check_expected("aten.index_add_", [x, idx, s], {"dim": dim, "alpha": alpha}, want, **tol)


def test_index_add_integers_and_bounds():
    x, s = torch.arange(12).view(4, 3), torch.ones(2, 3, dtype=torch.int64)
    idx = torch.tensor([3, 3])
    check_expected("aten.index_add", [x, idx, s], {"dim": 0, "alpha": 2},
                   torch.index_add(x, 0, idx, s, alpha=2))
    with pytest.raises(RuntimeError, match="index_add: index out of range"):
        check_expected("aten.index_add", [rand(4, 3), torch.tensor([4]), rand(1, 3)], {"dim": 0},
                       rand(4, 3))


# Windows that tile, overlap (step < size), skip elements (step > size),
# along an inner dim, and one window of the whole dim.
UNFOLDS = [((3, 10), 1, 4, 3), ((12,), 0, 3, 3), ((2, 9, 3), 1, 2, 4), ((4, 5), -1, 5, 1), ((6, 4), 0, 3, 1)]


@pytest.mark.parametrize("shape,dim,size,step", UNFOLDS)
def test_unfold(shape, dim, size, step):
    check_op("aten.unfold", [rand(*shape)], {"dimension": dim, "size": size, "step": step}, **EXACT)


@pytest.mark.parametrize("shape,dim,size,step", UNFOLDS)
def test_unfold_backward(shape, dim, size, step):
    windows = rand(*shape).unfold(dim, size, step).shape
    # Overlapping windows add up in an order aten may not share.
    check_op("aten.unfold_backward", [rand(*windows)],
             {"input_sizes": list(shape), "dim": dim, "size": size, "step": step}, rtol=1e-6, atol=1e-6)


def test_unfold_dynamic_batch():
    check_op("aten.unfold", [rand(5, 10)], {"dimension": 1, "size": 4, "step": 2}, dynamic=[0], **EXACT)

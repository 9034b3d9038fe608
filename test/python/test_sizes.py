"""Unit tests of the symbolic size arguments (python/terra/sizes.py): the
recorded forms, which must be exact for the traced iteration and follow
the shapes that change."""
import torch

from terra.sizes import SymDim, resolve, symbolize


def t(*shape):
    return torch.empty(shape)


def test_view_entries_follow_the_operand_dims_in_place():
    x = t(4, 12, 48)
    form = symbolize("aten.view", [4, 12, 2, 24], [x])
    # b and t are dims 0 and 1 of x; the first literal left becomes -1.
    assert form == [SymDim(0, 0), SymDim(0, 1), -1, 24]
    assert resolve(form, [x]) == [4, 12, -1, 24]
    assert resolve(form, [t(3, 7, 48)]) == [3, 7, -1, 24]
    assert t(3, 7, 48).view(resolve(form, [t(3, 7, 48)])).shape == (3, 7, 2, 24)


def test_a_product_of_dims_becomes_the_inferred_size():
    assert symbolize("aten._unsafe_view", [48, 16], [t(4, 12, 16)]) == [-1, SymDim(0, 2)]


def test_an_entry_learnt_to_change_gets_the_inferred_size_first():
    # [b * t, c] -> [b, t, c] with t changing: t is the one inferred.
    assert symbolize("aten.view", [4, 12, 16], [t(48, 16)], dynamic={1}) == [4, -1, SymDim(0, 1)]


def test_a_reshape_matches_its_kept_prefix_and_suffix_as_runs():
    # [b * h, t, d] -> [b, h, t, d]: t and d are the operand's last dims,
    # also when t == d by coincidence.
    assert symbolize("aten._unsafe_view", [4, 2, 6, 8], [t(8, 6, 8)]) == [-1, 2, SymDim(0, 1), SymDim(0, 2)]
    assert symbolize("aten._unsafe_view", [4, 2, 8, 8], [t(8, 8, 8)]) == [-1, 2, SymDim(0, 1), SymDim(0, 2)]


def test_only_the_corresponding_dim_matches_unless_learnt():
    # 8 is dim 0 of the grad here, but not in entry 1's position: a
    # coincidence unless entry 1 is known to change.
    assert symbolize("aten.slice_backward", [8, 8], [t(8, 2)]) == [SymDim(0, 0), 8]
    assert symbolize("aten.slice_backward", [8, 8], [t(8, 2)], dynamic={1}) == [SymDim(0, 0), SymDim(0, 0)]


def test_expand_aligns_trailing_dims_and_keeps_ones():
    mask = t(1, 1, 6, 6)
    assert symbolize("aten.expand", [4, 2, 6, 6], [mask]) == [4, 2, SymDim(0, 2), SymDim(0, 3)]
    assert symbolize("aten.expand", [1, 5], [t(5)]) == [1, SymDim(0, 0)]


def test_a_changing_size_no_operand_has_refers_to_an_earlier_value():
    grad = t()  # 0-d: SumBackward's expand
    earlier = object()
    extra: list = []
    form = symbolize("aten.expand", [7, 2], [grad], dynamic={0}, lookup=lambda v, i: (earlier, 0) if v == 7 else None,
                     extra=extra)
    assert form == [SymDim(1, 0), 2] and extra == [earlier]
    assert resolve(form, [grad, t(9, 8)]) == [9, 2]


def test_non_size_values_pass_through():
    assert symbolize("aten.view", [-1], [t(3, 4)]) == [-1]
    assert symbolize("aten.view", [0, 4], [t(0, 4)]) == [0, SymDim(0, 1)]


def test_new_zeros_sizes_do_not_follow_the_dtype_donor():
    # IndexBackward: new_zeros(grad [p, 85], input's shape [b, ...]); p == b
    # is a coincidence.
    assert symbolize("aten.new_zeros", [4, 3, 85], [t(4, 85)]) == [4, 3, 85]

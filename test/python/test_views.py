"""Which views of one memory a write through one of them makes stale
(tracing.regions_overlap): never one that shares an element with it, and
not the sibling chunks of a split (an RNN cell writes its gate chunks in
place, then reads the others)."""
from __future__ import annotations

import itertools
import random

import torch

from terra.tracing import _region, regions_overlap


def _views() -> list[torch.Tensor]:
    base = torch.arange(8 * 24)
    m = base.view(8, 24)
    views = list(m.split(8, dim=1)) + list(m.unsafe_split(6, dim=0)) + list(m.unbind(0))[:3]
    views += [m, m.t(), m[2:5], m[4:7], m[:, 3:11], m[:, 5], m[::2], m[1::2], m[0:1, 0:8], m[7:8, 16:24],
              base.view(2, 96)[1], base[10:40], base.view(4, 2, 24)[:, 1], base.view(4, 2, 24)[:, 0, :12],
              base.view(2, 4, 24).permute(2, 0, 1), m.diagonal()]
    rng = random.Random(0)
    for _ in range(40):  # random boxes of the matrix
        r0, c0 = rng.randrange(8), rng.randrange(24)
        views.append(m[r0:r0 + rng.randrange(1, 8), c0:c0 + rng.randrange(1, 24):rng.choice([1, 2, 3])])
    return views


def test_a_write_makes_every_overlapping_view_stale() -> None:
    for a, b in itertools.product(_views(), repeat=2):
        if set(a.flatten().tolist()) & set(b.flatten().tolist()):
            assert regions_overlap(_region(a), _region(b)), (a.shape, a.stride(), a.storage_offset(),
                                                             b.shape, b.stride(), b.storage_offset())


def test_sibling_chunks_and_disjoint_rows_are_told_apart() -> None:
    m = torch.arange(8 * 24).view(8, 24)
    chunks = m.unsafe_split(8, dim=1)
    for a, b in itertools.permutations(chunks, 2):
        assert not regions_overlap(_region(a), _region(b))
    assert not regions_overlap(_region(m[0:2]), _region(m[2:4]))
    assert not regions_overlap(_region(m[::2]), _region(m[1::2]))
    assert regions_overlap(_region(m[:, 3:11]), _region(chunks[1]))
    assert regions_overlap(_region(m), _region(chunks[2]))

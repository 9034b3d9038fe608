"""The loop counter (python/terra/loops.py and its C trace hook): iteration
counts and activations per frame, suspension while the tracer's own code
runs, and deference to another trace hook (a debugger)."""
import sys

from terra.loops import LoopCounter, loop_ranges
from terra.sites import capture


def _contexts(counter, n, stop):
    """Runs a loop of `n` iterations and returns the loop context seen at
    each iteration (as the tracer would at an op issued there)."""
    seen = []
    for _ in range(n):
        raw = []
        capture(sys._getframe(), stop, raw)
        seen.append(counter.context(raw))
    return seen


def test_counts_iterations_and_activations():
    counter = LoopCounter()
    stop = sys._getframe()
    with counter:
        first = _contexts(counter, 3, stop)
        second = _contexts(counter, 2, stop)
    # Counts are arrivals at the loop's first instruction by a backward
    # jump: the first iteration is 0.
    assert [c[-1].iteration for c in first] == [0, 1, 2]
    assert [c[-1].iteration for c in second] == [0, 1]
    # Two calls of the same function: the same loop, two activations.
    assert first[0][-1].site == second[0][-1].site
    assert first[0][-1].activation != second[0][-1].activation
    assert len({c[-1].activation for c in first}) == 1


def test_suspended_hook_counts_nothing():
    counter = LoopCounter()
    stop = sys._getframe()
    with counter:
        assert counter.suspend()
        assert not counter.suspend()  # already suspended: nothing to resume
        assert sys.gettrace() is None
        untraced = _contexts(counter, 3, stop)
        counter.resume()
        assert sys.gettrace() is not None
        traced = _contexts(counter, 3, stop)
    # Backward jumps while suspended are not counted.
    assert [c[-1].iteration for c in untraced] == [0, 0, 0]
    assert [c[-1].iteration for c in traced] == [0, 1, 2]
    assert sys.gettrace() is None


def test_another_trace_hook_is_left_alone():
    def debugger(frame, event, arg):
        return None
    sys.settrace(debugger)
    try:
        counter = LoopCounter()
        with counter:
            assert not counter.active
            assert sys.gettrace() is debugger
            assert counter.context([]) == ()
        assert sys.gettrace() is debugger
    finally:
        sys.settrace(None)


def test_loop_ranges_of_nested_loops():
    def nested():
        for i in range(2):
            for j in range(2):
                pass
        while False:
            pass
    ranges = loop_ranges(nested.__code__)
    assert len(ranges) >= 2
    (outer_start, outer_end), (inner_start, inner_end) = ranges[0], ranges[1]
    assert outer_start <= inner_start <= inner_end <= outer_end


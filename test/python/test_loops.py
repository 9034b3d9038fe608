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



def _iterations(counter, n, stop, late=None):
    """(site, loop context) at each of `n` iterations; `late` = (k, last,
    following, issued): the counter starts at iteration k, as a replay
    leaving its tape there would start it (replay._count_loops_from_here)."""
    seen = []
    for i in range(n):
        if late is not None and i == late[0]:
            raw = []
            capture(sys._getframe(), stop, raw)
            assert counter.start_late(sys._getframe(), raw, *late[1:])
        raw = []
        site, _ = capture(sys._getframe(), stop, raw)
        seen.append((site, counter.context(raw)))
    return seen


def test_a_late_start_goes_on_from_the_counts_of_the_last_event():
    # A replay runs without the hook and starts it where it leaves its tape:
    # the counts must go on from the tape's (its last event's context), or
    # the rest of the iteration would be recorded in other loop iterations.
    stop = sys._getframe()
    counter = LoopCounter()
    with counter:
        ref = _iterations(counter, 6, stop)
    issued = max(lv.activation for _, ctx in ref for lv in ctx)
    late_counter = LoopCounter()
    late_counter.defer = True
    with late_counter:
        assert not late_counter.active and sys.gettrace() is None  # deferred: no tracing mode
        late = _iterations(late_counter, 6, stop, late=(3, ref[2], None, issued))
        assert late_counter.active and not late_counter.unsure()
    assert [c for _, c in late[:3]] == [(), (), ()]  # before the start: nothing counted
    assert [c for _, c in late[3:]] == [c for _, c in ref[3:]]


def test_a_late_start_in_a_new_call_numbers_its_loops_afresh():
    # The frame holding the loop was called after the last event: no event
    # ran in its loop, so its counts start anew (and are not unknown).
    stop = sys._getframe()
    counter = LoopCounter()
    with counter:
        ref = _iterations(counter, 2, stop)
    late_counter = LoopCounter()
    late_counter.defer = True
    with late_counter:
        raw = []
        site, _ = capture(sys._getframe(), stop, raw)
        # The last event ran at this test's own line, outside any loop.
        assert late_counter.start_late(sys._getframe(), raw, (site, ()), None, 0)
        late = _iterations(late_counter, 2, stop)
    assert [[lv.iteration for lv in c] for _, c in late] == [[lv.iteration for lv in c] for _, c in ref]


def test_a_generator_started_before_a_late_start_makes_the_counts_unsure():
    # A generator suspended inside its loop when the counter starts late:
    # where its loop stands is unknown, and the co-executor must not trust
    # the contexts once it resumes (coexec.CoExecutor._validate).
    def numbers():
        for i in range(3):
            yield i

    stop = sys._getframe()
    counter = LoopCounter()
    counter.defer = True
    with counter:
        gen = numbers()
        next(gen)
        raw = []
        capture(sys._getframe(), stop, raw)
        assert counter.start_late(sys._getframe(), raw, None, None, 0)
        assert not counter.unsure()
        fresh = numbers()
        next(fresh)  # started after: known
        assert not counter.unsure()
        next(gen)
        assert counter.unsure()

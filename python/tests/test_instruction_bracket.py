"""The adapters' instruction bracket (perseus._perseus._bracket): what it records, which hooks it
calls and when, how it chooses a kind and a microbatch from the call's arguments, and that errors
pass through as a Python ``finally`` would pass them."""

import gc
import weakref

import pytest

from perseus import _perseus


class Hooks:
    def __init__(self, fail_begin=False, fail_end=False):
        self.calls = []
        self.fail_begin, self.fail_end = fail_begin, fail_end

    def begin(self, kind, stage):
        self.calls.append(("begin", kind, stage))
        if self.fail_begin:
            raise KeyError("begin failed")

    def end(self, kind, stage):
        self.calls.append(("end", kind, stage))
        if self.fail_end:
            raise KeyError("end failed")


def bracket(function, hooks, state, kind="forward", stage=2, microbatch=None):
    return _perseus._bracket(function, hooks.begin, hooks.end, state, kind, stage, microbatch)


def test_outside_an_iteration_only_the_function_runs():
    hooks, state = Hooks(), _perseus._BracketState()
    f = bracket(lambda *a, **k: (a, k), hooks, state)
    assert f(1, x=2) == ((1,), {"x": 2})
    assert hooks.calls == [] and state.last_iteration == [] and state.hook_seconds == 0.0


def test_inside_an_iteration_the_hooks_bracket_the_function_and_labels_are_recorded():
    hooks, state = Hooks(), _perseus._BracketState()
    seen = []

    def compute(chunk, *, scale=1):
        seen.append(len(hooks.calls))
        return chunk * scale

    fwd = bracket(compute, hooks, state, "forward", 2, (0, "fwd_chunk_id"))
    bwd = bracket(compute, hooks, state, "backward", 2)
    state.begin_iteration()
    assert state.in_step
    assert fwd(3, scale=2) == 6
    assert bwd(7) == 7
    assert bwd(9) == 9
    state.end_iteration()
    assert not state.in_step
    assert hooks.calls == [("begin", "forward", 2), ("end", "forward", 2),
                           ("begin", "backward", 2), ("end", "backward", 2),
                           ("begin", "backward", 2), ("end", "backward", 2)]
    assert seen == [1, 3, 5]  # each call ran between its begin and its end
    # forward's microbatch from its first argument; backward's numbered in run order
    assert state.last_iteration == ["2F3", "2B0", "2B1"]
    assert state.hook_seconds > 0.0
    state.begin_iteration()  # numbering starts again each iteration
    bwd(1)
    state.end_iteration()
    assert state.last_iteration == ["2B0"]


def test_a_kind_chosen_by_an_argument_by_position_keyword_or_default():
    hooks, state = Hooks(), _perseus._BracketState()
    choice = ("backward", "backward_input", 2, "full_backward", True)
    f = bracket(lambda bwd_chunk_id, loss=None, full_backward=True: 0, hooks, state, choice, 0,
                (0, "bwd_chunk_id"))
    state.begin_iteration()
    f(0)                          # default: backward
    f(1, None, False)             # by position
    f(bwd_chunk_id=2, full_backward=False)  # by keyword (microbatch too)
    f(3, full_backward=1)
    state.end_iteration()
    assert state.last_iteration == ["0B0", "0I1", "0I2", "0B3"]
    assert [c[1] for c in hooks.calls[::2]] == ["backward", "backward_input", "backward_input",
                                                "backward"]


def test_a_microbatch_by_keyword_only_or_missing_is_numbered_in_run_order():
    hooks, state = Hooks(), _perseus._BracketState()
    f = bracket(lambda *a, **k: None, hooks, state, "forward", 1, (-1, "current_microbatch"))
    state.begin_iteration()
    f(5)                          # position -1: a positional argument is not the microbatch
    f(current_microbatch=7)
    f(current_microbatch=None)
    f(current_microbatch="x")     # not an int: numbered as if missing
    state.end_iteration()
    assert state.last_iteration == ["1F0", "1F7", "1F2", "1F3"]


def test_the_end_hook_runs_when_the_function_raises_and_its_error_comes_through():
    hooks, state = Hooks(), _perseus._BracketState()

    def boom():
        raise ZeroDivisionError("the training's own error")

    f = bracket(boom, hooks, state)
    state.begin_iteration()
    with pytest.raises(ZeroDivisionError, match="own error"):
        f()
    assert [c[0] for c in hooks.calls] == ["begin", "end"]


def test_a_failing_end_hook_raises_with_the_functions_error_as_its_context():
    hooks, state = Hooks(fail_end=True), _perseus._BracketState()

    def boom():
        raise ZeroDivisionError("first")

    state.begin_iteration()
    with pytest.raises(KeyError) as caught:
        bracket(boom, hooks, state)()
    assert isinstance(caught.value.__context__, ZeroDivisionError)
    with pytest.raises(KeyError):
        bracket(lambda: 1, hooks, state)()  # the function's result is dropped


def test_a_failing_begin_hook_stops_before_the_function():
    hooks, state = Hooks(fail_begin=True), _perseus._BracketState()
    ran = []
    state.begin_iteration()
    with pytest.raises(KeyError, match="begin failed"):
        bracket(lambda: ran.append(1), hooks, state)()
    assert ran == [] and [c[0] for c in hooks.calls] == ["begin"]


def test_bad_arguments_are_refused_when_the_bracket_is_made():
    hooks, state = Hooks(), _perseus._BracketState()
    with pytest.raises(ValueError, match="instruction kind 'sideways'"):
        bracket(print, hooks, state, "sideways")
    with pytest.raises(ValueError, match="stage must be >= 0"):
        bracket(print, hooks, state, stage=-1)
    with pytest.raises(ValueError, match="kind choice"):
        bracket(print, hooks, state, ("backward", "backward_input"))
    with pytest.raises(TypeError, match="callables"):
        _perseus._bracket(print, 3, hooks.end, state, "forward", 0)


def test_a_cycle_through_the_bracket_is_collected():
    """An object holding its own bracketed method (as a torch stage does once attached) is freed
    when dropped: the bracket takes part in the garbage collector."""

    class Stage:
        def forward_one_chunk(self):
            return 1

    hooks, state = Hooks(), _perseus._BracketState()
    stage = Stage()
    stage.forward_one_chunk = bracket(stage.forward_one_chunk, hooks, state)
    assert stage.forward_one_chunk.__wrapped__.__self__ is stage
    assert "forward of stage 2" in repr(stage.forward_one_chunk)
    alive = weakref.ref(stage)
    del stage
    gc.collect()
    assert alive() is None

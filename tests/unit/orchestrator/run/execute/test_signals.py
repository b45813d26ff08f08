"""Stop signals recorded, not raised, while a block runs (run/execute/signals.py), and never
lost: a block that ends with a stop recorded and not acted on raises it."""

from __future__ import annotations

import os
import signal

import pytest

from orchestrator.errors import Interrupted
from orchestrator.run.execute.signals import StopRequest, recording_signals


def test_a_signal_inside_the_block_is_recorded_and_the_block_goes_on():
    with pytest.raises(Interrupted) as stopped:
        with recording_signals(StopRequest()) as stop:
            os.kill(os.getpid(), signal.SIGTERM)
            assert stop.requested  # delivered to this thread before kill returns
            went_on = True
    assert went_on
    assert stopped.value.exit_code == 143


def test_a_stop_after_the_last_check_is_raised_as_the_block_ends_with_the_handlers_back():
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    with pytest.raises(Interrupted) as stopped:
        with recording_signals(StopRequest()) as stop:
            stop.check()
            os.kill(os.getpid(), signal.SIGINT)
    assert stopped.value.exit_code == 130
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_block_without_a_stop_ends_quietly_and_an_error_inside_is_not_replaced():
    with recording_signals(StopRequest()) as stop:
        pass
    assert not stop.requested
    with pytest.raises(ValueError):
        with recording_signals(StopRequest()):
            os.kill(os.getpid(), signal.SIGTERM)
            raise ValueError("the block's own error goes on")


def test_nested_blocks_with_one_request_raise_once_at_the_inner_end():
    request = StopRequest()
    raised = []
    with pytest.raises(Interrupted):
        with recording_signals(request):
            try:
                with recording_signals(request):
                    os.kill(os.getpid(), signal.SIGTERM)
            except Interrupted as e:
                raised.append(e)
                # the outer block's handler is back until it ends
                assert signal.getsignal(signal.SIGTERM) == request.record
                raise
    assert len(raised) == 1

"""Ctrl-C and the GIL: SIGINT stops a run or a sweep within a second and raises Stopped (a
KeyboardInterrupt) holding what finished, Python's own handler is back afterwards and the
next call runs; while a call simulates, other Python threads run."""

import os
import signal
import threading
import time

import pytest

import bitsim
from conftest import column


def interrupt_after(seconds):
    """SIGINT to this process after `seconds`; returns a list that gets the time it was sent."""
    sent = []

    def fire():
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)

    t = threading.Timer(seconds, fire)
    t.daemon = True
    t.start()
    return sent


def test_ctrl_c_stops_a_run_within_a_second_keeping_the_tokens_done():
    bitsim.run(model="synthetic:tiny", prompt="Hi", tokens=1)  # warm: model and timings cached
    sent = interrupt_after(1.0)
    with pytest.raises(bitsim.Stopped) as e:
        bitsim.run(model="synthetic:tiny", prompt="Hi", tokens=500, stop_at_capacity=True)
    stopped = time.monotonic()
    assert isinstance(e.value, KeyboardInterrupt)
    assert sent and stopped - sent[0] < 1.0, f"stopped {stopped - sent[0]:.2f} s after SIGINT"
    assert e.value.signal == signal.SIGINT
    assert "SIGINT" in str(e.value)
    partial = e.value.partial
    assert partial.stopped and 0 < len(partial.tokens) < 500
    assert all(column(partial.tokens, "logits_equal"))
    assert partial.summary["tokens"] == len(partial.tokens)
    # Python's handler is back, and the next call runs.
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert len(bitsim.run(model="synthetic:tiny", prompt="Hi", tokens=2).tokens) == 5


def test_ctrl_c_stops_a_sweep_keeping_the_points_done():
    grid = {"clock.mhz": [100 + i for i in range(40)]}
    bitsim.sweep(grid={"clock.mhz": [100]}, tokens=1, context=8, check_model=None)  # warm
    sent = interrupt_after(1.5)
    with pytest.raises(bitsim.Stopped) as e:
        bitsim.sweep(grid=grid, tokens=1, context=8, check_model=None)
    stopped = time.monotonic()
    assert sent and stopped - sent[0] < 1.0, f"stopped {stopped - sent[0]:.2f} s after SIGINT"
    rows = e.value.partial
    assert rows.attrs["partial"] is True and rows.attrs["points_total"] == 40
    assert 0 < len(rows) < 40
    assert column(rows, "clock.mhz") == [100.0 + i for i in range(len(rows))]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_call_releases_the_gil():
    ticks = []
    done = threading.Event()

    def count():
        while not done.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    try:
        t0 = time.monotonic()
        bitsim.run(model="synthetic:tiny", prompt="The capital of France is", tokens=16, cache=False)
        elapsed = time.monotonic() - t0
    finally:
        done.set()
        t.join()
    # A thread sleeping 1 ms per tick gets hundreds of ticks per second when the GIL is free.
    assert len(ticks) > 100 * elapsed, f"{len(ticks)} ticks in {elapsed:.2f} s"


def test_a_call_from_another_thread_runs_without_touching_the_handlers():
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", bitsim.run(model="synthetic:tiny", prompt="Hi", tokens=1)))
    t.start()
    t.join()
    assert len(out["r"].tokens) == 4
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("call", ["eval", "validate"])
def test_ctrl_c_stops_eval_and_validate_within_a_second(tmp_path, call):
    """The long calls without partial results: eval over many windows (each position checks
    the signal), validate (the timing oracle's batches check it too)."""
    text = tmp_path / "long.txt"
    text.write_text("".join(f"in the beginning was the word and the word was {i}\n" for i in range(3000)))
    sent = interrupt_after(1.0)
    with pytest.raises(bitsim.Stopped) as e:
        if call == "eval":
            bitsim.eval("synthetic:tiny", text, threads=1)
        else:
            bitsim.validate()
    stopped = time.monotonic()
    assert isinstance(e.value, KeyboardInterrupt)
    assert sent and stopped - sent[0] < 1.0, f"{call} stopped {stopped - sent[0]:.2f} s after SIGINT"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

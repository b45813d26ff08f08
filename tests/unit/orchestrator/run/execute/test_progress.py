"""Progress: a bar per engine on a terminal, periodic lines otherwise, ETA from tokens."""

from __future__ import annotations

import io

from orchestrator.run.execute.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_eta_comes_from_tokens_not_settings():
    clock = Clock()
    progress = Progress(total=3, stream=io.StringIO(), clock=clock)
    progress.engine("e", "tiny/hf/fp32/none", total=100, replicas=1)
    clock.now += 10
    progress.chunk("e", 0, samples=20, tokens=2000)  # 200 tok/s, 100 tokens per sample
    line = progress.engines["e"]
    assert (line.samples, line.tokens) == (20, 2000)
    tok_s, eta = line.rates(clock.now)
    assert tok_s == 200 and eta == "40s"  # 80 samples x 100 tokens / 200 tok/s
    # what a replica reports of the chunk in flight counts, until that chunk is stored
    progress.replica("e", 0, {"phase": "generating", "chunk_done": 5, "chunk_tokens": 500})
    assert (line.samples, line.tokens) == (25, 2500)
    progress.chunk("e", 0, samples=8, tokens=800)
    assert (line.samples, line.tokens) == (28, 2800)


def test_off_a_terminal_a_line_per_engine_every_interval(caplog):
    clock = Clock()
    progress = Progress(total=1, stream=io.StringIO(), clock=clock, every_s=30)
    with caplog.at_level("INFO", logger="reprogrid.progress"):
        progress.engine("e", "tiny/hf/fp32/none", total=164, replicas=2)
        for second in range(1, 95):  # one long setting, no chunk stored for 94 s
            clock.now += 1
            done = min(second, 40)
            progress.replica(
                "e", 0, {"phase": "generating", "chunk_done": done, "chunk_tokens": 10 * done}
            )
            progress.tick()
    lines = [r.message for r in caplog.records if "samples (" in r.message]
    assert len(lines) == 3  # at 30, 60 and 90 s
    assert lines[0].startswith("tiny/hf/fp32/none: 30/164 samples (18%)")
    assert "tok/s, ETA" in lines[0] and "2 replica(s) generating" in lines[0]
    assert lines[-1].startswith("tiny/hf/fp32/none: 40/164 samples")


def test_failures_and_completions_are_lines_with_the_count(caplog):
    progress = Progress(total=2, stream=io.StringIO())
    with caplog.at_level("INFO", logger="reprogrid.progress"):
        progress.fail("x", "Boom: y")
        progress.finished("z", 0.25)
    assert "FAILED x: Boom: y [1/2]" in caplog.text and "complete z: 25.00 [2/2]" in caplog.text


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_on_a_terminal_a_bar_per_engine():
    clock = Clock()
    out = Terminal()
    progress = Progress(total=1, stream=out, clock=clock)
    progress.engine("a", "tiny/hf/fp32/none", total=10, replicas=1)
    progress.engine("b", "tiny/hf/bf16/none", total=20, replicas=1)
    clock.now += 5
    progress.chunk("a", 0, samples=4, tokens=400)
    progress.tick()
    progress.close()
    text = out.getvalue()
    assert "tiny/hf/fp32/none" in text and "tiny/hf/bf16/none" in text
    assert "4/10 samples" in text and "80 tok/s" in text


def test_the_eta_bounds_the_samples_in_flight_by_their_token_budget():
    """At 37/40 one sample runs toward its 2048-token limit: the ETA keeps its estimate from the
    mean sample (100 tokens) and adds the bound that sample's budget sets, which counts down as
    it runs; once it is back, the estimate alone."""
    clock = Clock()
    progress = Progress(total=1, stream=io.StringIO(), clock=clock)
    progress.engine("e", "tiny/hf/fp32/none", total=40, replicas=1)
    clock.now += 100
    progress.chunk("e", 0, samples=36, tokens=3600)
    running = {"running": 1, "running_budget": 2048, "running_s": 5.0}
    progress.replica(
        "e", 0, {"phase": "generating", "chunk_done": 1, "chunk_tokens": 100, **running}
    )
    line = progress.engines["e"]
    tok_s, eta = line.rates(clock.now)
    assert (line.samples, tok_s) == (37, 37.0)
    estimate = 3 * 100 / 37  # 8.1 s: the three samples left at the mean
    bound = 2048 / 37 - 5 + 2 * 100 / 37  # the running one at its budget, less 5 s, then two
    assert eta == f"{int(estimate)}s (up to {int(bound)}s)" == "8s (up to 55s)"
    clock.now += 20  # no report since: the call has run 20 s more
    tok_s, eta = line.rates(clock.now)
    bound = 2048 / tok_s - 25 + 2 * 100 / tok_s
    assert eta == f"{int(3 * 100 / tok_s)}s (up to {int(bound)}s)" == "9s (up to 47s)"
    # the call returns: nothing in flight, the estimate alone
    progress.replica("e", 0, {"phase": "generating", "chunk_done": 2, "chunk_tokens": 2148})
    per_sample, tok_s = (3600 + 2148) / 38, (3600 + 2148) / 120
    assert line.rates(clock.now)[1] == f"{int(2 * per_sample / tok_s)}s" == "6s"
    assert "ETA 6s, 1 replica(s) generating" in line.text(clock.now)


def test_an_idle_replica_has_nothing_in_flight_and_a_stored_chunk_ends_its_call():
    clock = Clock()
    progress = Progress(total=1, stream=io.StringIO(), clock=clock)
    progress.engine("e", "tiny/hf/fp32/none", total=40, replicas=2)
    clock.now += 10
    progress.chunk("e", 1, samples=10, tokens=1000)
    call = {"running": 4, "running_budget": 4 * 512, "running_s": 0.0}
    progress.replica("e", 0, {"phase": "generating", "chunk_done": 0, **call})
    line = progress.engines["e"]
    # two replicas at 100 tok/s together: each call at 50 tok/s, 2048 tokens take 41 s
    assert line.rates(clock.now)[1] == "30s (up to 1m06s)"  # 41 s, then 26 samples: 26 s
    progress.replica("e", 0, {"phase": "idle", **call})  # a stale count while idle is no call
    assert line.calls == {} and line.rates(clock.now)[1] == "30s"
    progress.replica("e", 0, {"phase": "generating", "chunk_done": 0, **call})
    progress.chunk("e", 0, samples=4, tokens=400)
    assert line.calls == {}

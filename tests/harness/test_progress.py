"""The progress line: in-place redraws on a terminal, whole lines in logs."""

import io
import time

from harness.chaos.progress import ProgressLine, run_status


class FakeTty(io.StringIO):
    def isatty(self):
        return True


def test_log_output_is_whole_lines_and_the_last_state_is_always_shown():
    out = io.StringIO()
    state = {"n": 0}

    def render():
        state["n"] += 1
        return f"tick {state['n']}"

    line = ProgressLine(render, out=out, interval=3600).start()
    line.stop()
    assert out.getvalue() == "tick 1\n", "stop draws the final state even before the first interval"


def test_terminal_output_redraws_in_place():
    out = FakeTty()
    texts = iter(["a long first line", "short"])
    line = ProgressLine(lambda: next(texts), out=out, interval=3600).start()
    line._draw()
    line.stop()
    assert out.getvalue() == "\ra long first line\rshort            \n"


def test_a_failing_render_does_not_break_the_run():
    out = io.StringIO()
    line = ProgressLine(lambda: 1 / 0, out=out, interval=3600).start()
    line.stop()
    assert "progress unavailable: division by zero" in out.getvalue()


def test_status_text():
    text = run_status(time.monotonic() - 12, 60, {"ok": 5, "info": 1}, ["partition"], "n3")
    assert text.split()[0] in {"12s/60s", "13s/60s"}
    assert "ok 5  fail 0  info 1  faults: partition  leader: n3" in text
    assert "faults: none  leader: ?" in run_status(time.monotonic(), 60, {}, [], None)


def test_leader_watch_counts_changes_not_silences():
    from harness.chaos.progress import LeaderWatch

    watch = LeaderWatch("n1")
    for seen in ("n1", None, "n2", "n2", None, "n1"):
        watch.see(seen)
    assert (watch.leader, watch.changes) == ("n1", 2)
    assert "leader: n1 (2 changes)" in run_status(time.monotonic(), 60, {}, [], watch.leader, watch.changes)

"""Off a terminal, progress is a plain line every so often (never silence, never one giant line)."""

from __future__ import annotations

from toolsweep.cluster.progress import LogProgress, make_progress


def test_a_line_every_period_and_at_the_end():
    now = [0.0]
    lines: list[str] = []
    p = LogProgress(100, "sweep", lines.append, every_s=30, clock=lambda: now[0])
    for _ in range(9):
        now[0] += 10
        p.set_postfix({"ep/s": "1.0"})
        p.update(10)
    assert len(lines) == 3  # at 30, 60 and 90 s
    assert lines[0].startswith("sweep: 30/100 units (30%)") and "ETA 1.2 min" in lines[0] and "ep/s 1.0" in lines[0]
    now[0] += 1
    p.update(10)
    assert len(lines) == 4 and lines[-1].startswith("sweep: 100/100 units (100%)")
    assert all("\r" not in line for line in lines)


def test_without_a_terminal_the_bar_becomes_lines():
    assert isinstance(make_progress(10, "s", True, print), LogProgress)  # pytest's stderr is not a terminal

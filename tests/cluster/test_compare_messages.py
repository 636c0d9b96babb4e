"""`toolsweep compare`: a wrong path is a message with exit 2, LaTeX says what it needs and marks as the
other formats do, and a subset run names the command that finishes its partial cells."""

from __future__ import annotations

from toolsweep.cluster.cli import finishing_command, main
from toolsweep.cluster.compare import render
from toolsweep.evaluator.floor import ABOVE, BELOW


def test_compare_on_a_missing_run_dir_is_a_message_and_exit_2(tmp_path, capsys):
    assert main(["compare", str(tmp_path / "runs" / "nope" / "main")]) == 2
    err = capsys.readouterr().err
    assert "is not a finished run directory" in err and "runs/<sweep>/<run-id>" in err
    assert "Errno" not in err and "Traceback" not in err


def _row(model: str, vs: str | None, floor: bool = False) -> dict:
    return {"benchmark": "b", "setting": "s", "metric": "accuracy", "model": model, "value": 0.5, "ci_low": 0.4,
            "ci_high": 0.6, "n": 10, "is_floor": floor, "vs_floor": vs, "floor_model": "floor", "floor_value": 0.5,
            "minus_floor": 0.1, "minus_floor_ci_low": 0.05, "minus_floor_ci_high": 0.15}


def test_latex_carries_the_same_marks_as_text_and_names_its_packages():
    rows = [_row("floor", None, floor=True), _row("a", ABOVE), _row("b", BELOW)]
    text, latex = render(rows, [], "text"), render(rows, [], "latex")
    body = [line for line in latex.splitlines() if line.startswith("b &")][0]
    assert "▲" in text and "▼" in text
    assert body.index(r"$\blacktriangle$") < body.index(r"$\blacktriangledown$")  # a above, b below
    assert "uparrow" not in latex and "downarrow" not in latex
    assert r"\usepackage{booktabs}" in latex.splitlines()[0] and r"\usepackage{amssymb}" in latex.splitlines()[0]


def test_the_finishing_command_drops_only_the_subset_options():
    argv = ["run", "configs/sweeps/toolmaze.yaml", "--limit", "1", "--settings=C1-P0-std", "--output-dir", "/tmp/x y",
            "--models", "a,b", "--benchmarks", "toolmaze", "--no-progress"]
    assert finishing_command(argv) == "toolsweep run configs/sweeps/toolmaze.yaml --output-dir '/tmp/x y' --no-progress"

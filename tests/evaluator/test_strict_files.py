"""What a run leaves is readable by anyone and any JSON parser: strict JSON (an undefined metric is
null, not NaN) read back as NaN, and files with the usual mode of a new file, not owner-only."""

from __future__ import annotations

import json
import math
import stat

from toolsweep.evaluator.rundir import RunDirectory, atomic_write_text, read_summary, strict_json


def test_undefined_values_are_null_in_the_file_and_nan_when_read_back(tmp_path):
    summary = {"cells": [{"metrics": {"prr": {"value": math.nan, "ci_low": math.nan, "ci_high": 1.0}}}],
               "paired": [{"metric": "prr", "value": math.inf, "ci_low": 0.0, "ci_high": 0.1}],
               "composites": {"x": math.nan, "y": 0.5}}
    text = strict_json(summary)
    assert "NaN" not in text and "Infinity" not in text
    json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))  # what JSON.parse accepts
    path = tmp_path / "summary.json"
    atomic_write_text(path, text)
    back = read_summary(path)
    assert math.isnan(back["cells"][0]["metrics"]["prr"]["value"]) and back["cells"][0]["metrics"]["prr"]["ci_high"] == 1.0
    assert math.isnan(back["paired"][0]["value"]) and math.isnan(back["composites"]["x"]) and back["composites"]["y"] == 0.5


def test_written_files_get_the_usual_mode_of_a_new_file(tmp_path):
    from toolsweep.evaluator import rundir

    rd = RunDirectory(tmp_path / "run")
    rd.write_manifest({"sweep": "s", "x": math.nan})
    mode = stat.S_IMODE(rd.manifest_path.stat().st_mode)
    assert mode == 0o666 & ~rundir._UMASK  # 0644 under the usual umask; mkstemp alone gives 0600
    plain = tmp_path / "plain"
    plain.write_text("")
    assert mode == stat.S_IMODE(plain.stat().st_mode)
    assert json.loads(rd.manifest_path.read_text())["x"] is None

"""`toolsweep compare` puts models side by side with their intervals, in every format it offers."""

from __future__ import annotations

import csv
import io
import json

from test_sweep_end_to_end import _run, make_config

from toolsweep.cluster.cli import main


def test_compare_in_every_format(ray_local, tmp_path, capsys):
    out = _run(make_config(tmp_path, name="cmp", n_tasks=4, seeds=[0], mlflow=False))
    outputs = {}
    for fmt in ("text", "md", "csv", "latex", "json"):
        assert main(["compare", str(out.run_dir.path), "--format", fmt]) == 0
        outputs[fmt] = capsys.readouterr().out
    data = json.loads(outputs["json"])
    oracle = [c for c in data["cells"] if c["model"] == "oracle"]
    assert {c["setting"] for c in oracle} == {"small", "large"} and all(c["value"] == 1.0 for c in oracle)
    assert any(p["model_a"] in ("oracle", "random") for p in data["paired"])
    assert outputs["md"].splitlines()[0] == "| benchmark | setting | metric (%) | oracle | random |"
    rows = list(csv.DictReader(io.StringIO(outputs["csv"])))
    assert len(rows) == 4 and {r["model"] for r in rows} == {"oracle", "random"}
    assert outputs["latex"].splitlines()[1].startswith(r"\begin{tabular}") and r"\bottomrule" in outputs["latex"]
    assert "booktabs" in outputs["latex"].splitlines()[0]  # what the table needs, said where it is pasted
    assert "100.0 [100.0, 100.0]" in outputs["text"] and "paired differences" in outputs["text"]
    # two runs: the same model labelled by its run
    assert main(["compare", str(out.run_dir.path), str(out.run_dir.path), "--format", "csv"]) == 0
    assert "oracle@cmp/main" in capsys.readouterr().out

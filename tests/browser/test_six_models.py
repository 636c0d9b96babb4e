"""Six models and the floor on ToolMaze, run with `--limit 1` (so every cell is partial): every table of
report.html reads in a 1600-px window (the summary's model columns included), and every number that
rests on a partial cell carries its `*`, in the summary and in the paper's Tables 21/22 alike."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from browser_helpers import _full_page, _wait_for_text
from test_report_tables import TABLE_CHECK, table_problems

pytestmark = pytest.mark.browser

MODELS = ["qwen3-32b-instruct", "llama-3.3-70b-instruct", "mistral-small-3.2-24b", "gpt-oss-120b-high",
          "deepseek-v3.1-chat", "gemma-3-27b-instruct"]


@pytest.fixture(scope="module")
def six_models(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("six")
    models = "\n".join(f"  - {{name: {m}, kind: scripted, policy: {'oracle' if i % 2 else 'random'}}}"
                       for i, m in enumerate(MODELS))
    config = work / "six.yaml"
    config.write_text(textwrap.dedent("""
        name: six
        seeds: 1
        floor: true
        benchmarks:
          - name: toolmaze
            settings: [C1-P0-std, C2-P3-std, C3-P4-hint, C4-P2-std]
            tasks: {limit: 15}
        concurrency: {workers: 1, episodes_per_worker: 32}
        bootstrap: {n_resamples: 500, live_n_resamples: 100}
        models:
    """) + models + "\n")
    done = subprocess.run(
        [str(Path(sys.executable).parent / "toolsweep"), "run", str(config), "--no-progress", "--no-mlflow",
         "--limit", "1", "--output-dir", str(work / "runs")],
        cwd=work, capture_output=True, text=True, timeout=900,
        env=dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "partial cells (*) are finished by the sweep's whole command: toolsweep run" in done.stdout
    assert "--limit" not in done.stdout.split("whole command:")[1].splitlines()[0]
    return work / "runs" / "six" / "main"


def test_six_models_and_the_floor_read_at_1600px_with_partial_marks(browser, six_models, screenshots):  # noqa: F811
    browser.set_window_size(1600, 1000)
    browser.get((six_models / "report.html").as_uri())
    _wait_for_text(browser, "Summary", "Table 21")
    browser.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
    tables = browser.execute_script(TABLE_CHECK)
    _full_page(browser, screenshots / "report-six-models.png")
    summary = tables[0]  # the summary: settings down, the floor and the models across
    assert summary["columns"] == 1 + 6  # the setting and six model columns (the floor first) in one table
    assert table_problems(tables) == []
    text = browser.execute_script("return document.body.innerText")
    for number in ("21", "22"):
        start = text.index(f"ToolMaze Table {number}")
        block = text[start:start + 3000]
        assert "100.00*" in block or "0.00*" in block, block[:600]  # the partial cells' numbers are marked
        assert "100.00\t" not in block and "0.00\t" not in block, block[:600]  # and none is plain

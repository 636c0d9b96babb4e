"""What a person looks at, opened in a real headless Chromium: the quick start's report.html, its
experiment in the MLflow UI (`mlflow ui`, as the README says) with a run per cell, and an episode's
transcript in MLflow's Traces view.

Needs Debian's `chromium` and `chromium-driver` and the `browser` extra (selenium); `.ci/run`
installs them. Run with `python -m pytest -m browser`. Screenshots go to $TOOLSWEEP_SCREENSHOT_DIR
(CI keeps them) or the test's temporary directory.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from browser_helpers import _free_port, _full_page, _wait_for_text

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def mlflow_ui(quickstart) -> str:
    """`mlflow ui --backend-store-uri sqlite:///mlflow.db`, as the README says, on 127.0.0.1."""
    port = _free_port()
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "mlflow"), "ui", "--backend-store-uri", quickstart["uri"],
         "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        cwd=quickstart["work"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env=dict(os.environ, MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false"),
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=2).read()
                break
            except OSError:
                if time.time() > deadline or proc.poll() is not None:
                    pytest.fail("mlflow ui did not start within 120 s")
                time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def _experiment_id(uri: str) -> str:
    from mlflow.tracking import MlflowClient

    return MlflowClient(uri).get_experiment_by_name("quickstart").experiment_id


def test_the_report_reads_top_to_bottom_in_a_1600px_window(browser, quickstart, screenshots):
    browser.set_window_size(1600, 1000)
    browser.get((quickstart["run_dir"] / "report.html").as_uri())
    _wait_for_text(browser, "Summary")
    page = browser.execute_script(
        """const d = document.documentElement;
        return {scroll: d.scrollWidth, client: d.clientWidth,
                sections: Array.from(document.querySelectorAll('section > h2')).map(h => h.innerText),
                summary: document.querySelector('#summary').innerText,
                emptyTables: Array.from(document.querySelectorAll('table'))
                    .filter(t => !t.querySelector('tbody tr')).length,
                openDetails: document.querySelectorAll('details[open]').length};"""
    )
    _full_page(browser, screenshots / "report.png")
    assert page["scroll"] <= page["client"], f"the page scrolls sideways: {page['scroll']} px in {page['client']}"
    assert page["sections"][:4] == ["Summary", "apb", "planbench_xl", "toolmaze"]
    for headline in ("apb: correct (%)", "planbench_xl: accuracy (%)", "toolmaze: tsr (%)"):
        assert headline in page["summary"]
    assert "oracle" in page["summary"] and "random" in page["summary"]
    assert "100.0 ▲\n[100.0, 100.0]" in page["summary"]  # the value and its mark, the interval under them
    assert page["emptyTables"] == 0 and page["openDetails"] == 0


def test_the_experiment_has_a_run_per_cell_in_the_mlflow_ui(browser, quickstart, mlflow_ui, screenshots):
    browser.set_window_size(1600, 1400)
    exp = _experiment_id(quickstart["uri"])
    browser.get(f"{mlflow_ui}/#/experiments/{exp}/runs?workflowType=machine_learning")
    _wait_for_text(browser, "quickstart-main")
    # the cell runs are nested under the sweep's run: unfold it as a person would
    browser.execute_script(
        """const row = Array.from(document.querySelectorAll('[role=row]')).find(r => r.innerText.includes('quickstart-main'));
        row.querySelector('button').click();"""
    )
    cells = [f"{m} | {b} | {s}" for m in ("oracle", "random", "floor") for b, s in
             [("apb", "holistic"), ("planbench_xl", "default"), ("toolmaze", "C1-P0-std")]]
    text = _wait_for_text(browser, *cells)
    _full_page(browser, screenshots / "mlflow-runs.png", height=1400)
    assert "31 matching runs" in text  # the sweep's run and its 30 cells (oracle, random and the floor)


def _a_failed_trace(uri: str, experiment_id: str):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    traces = client.search_traces(
        locations=[experiment_id], filter_string="tags.`toolsweep.termination` != 'answered'", max_results=50
    )
    traces = [client.get_trace(t.info.trace_id) for t in traces]
    return max(traces, key=lambda t: len(t.data.spans))  # the longest conversation


def test_an_episode_transcript_opens_in_the_traces_view(browser, quickstart, mlflow_ui, screenshots):
    browser.set_window_size(1600, 1000)
    exp = _experiment_id(quickstart["uri"])
    trace = _a_failed_trace(quickstart["uri"], exp)
    root = trace.data.spans[0]
    turns = [s.name for s in trace.data.spans if s.name.startswith("turn ") and ":" not in s.name]
    assert len(turns) >= 2
    user = next(m for m in root.inputs["messages"] if m["role"] == "user")["content"]
    browser.get(f"{mlflow_ui}/#/experiments/{exp}/traces?selectedEvaluationId={trace.info.trace_id}")
    text = _wait_for_text(browser, root.name, *turns, user[:60])
    _full_page(browser, screenshots / "mlflow-trace.png", height=1000)
    assert "NaN" not in text  # outputs are strict JSON
    # the last turn: what the model replied is there when its span is opened
    last = next(s for s in trace.data.spans if s.name == turns[-1])
    reply = last.outputs["message"]
    words = re.findall(r"[A-Za-z_][A-Za-z0-9_]{7,}", reply["content"] or "")
    expected = reply["tool_calls"][0]["name"] if reply.get("tool_calls") else max(words, key=len)
    browser.execute_script(
        """const name = arguments[0];
        const node = Array.from(document.querySelectorAll('span,div')).find(e => e.childElementCount === 0 && e.innerText === name);
        node.click();""",
        turns[-1],
    )
    _wait_for_text(browser, expected)
    _full_page(browser, screenshots / "mlflow-trace-last-turn.png", height=1000)
    assert json.dumps(trace.data.spans[0].outputs).count("termination") == 1


def test_the_traces_list_says_whose_each_episode_is(browser, quickstart, mlflow_ui, screenshots):
    """Model, benchmark, setting, task and seed are read off MLflow's Traces list, without opening a trace."""
    from mlflow.tracking import MlflowClient

    browser.set_window_size(1600, 1000)
    exp = _experiment_id(quickstart["uri"])
    traces = MlflowClient(quickstart["uri"]).search_traces(locations=[exp], max_results=20, include_spans=False)
    info = traces[0].info
    tags = info.tags
    name = f"{tags['model']} | {tags['benchmark']} | {tags['setting']} | {tags['task_id']} | seed {tags['seed']}"
    assert info.request_preview.startswith(name + ":")  # the Request column opens with whose episode it is
    browser.get(f"{mlflow_ui}/#/experiments/{exp}/traces")
    text = _wait_for_text(browser, "seed ")
    _full_page(browser, screenshots / "mlflow-traces-list.png", height=1000)
    shown = re.findall(r"(\S+) \| (apb|planbench_xl|toolmaze) \| (\S+) \| (\S+) \| seed (\d+)", text)
    assert len(shown) >= 5, text[:2000]  # row after row names its model, benchmark, setting, task and seed
    assert len({s[0] for s in shown}) >= 2 and len({s[1] for s in shown}) >= 2

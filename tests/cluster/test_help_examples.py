"""Every example in a command's `--help` and every command of the README's "Using it" block, as a user
would type it: the configs it names exist and accept its --models/--benchmarks/--settings/--limit,
and the commands on a run directory (`report`, `show`, `compare`, `sync-mlflow`) run with exit 0 on
a real quick-start run directory."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
from pathlib import Path

import pytest

from conftest import REPO, shared_dir
from toolsweep.cluster.cli import main

COMMANDS = [[], ["run"], ["validate"], ["report"], ["sync-mlflow"], ["benchmarks"], ["plan"], ["preflight"],
            ["show"], ["compare"], ["models"], ["models", "prepare"]]

PLACEHOLDERS = {
    # what a reader substitutes for the README's placeholders
    "my_sweep.yaml": "configs/sweeps/quickstart.yaml", "sweep.yaml": "configs/sweeps/quickstart.yaml",
    "runs/<sweep>/<run-id>": "runs/quickstart/main", "runs/<sweep>/main": "runs/quickstart/main",
    "qwen3-8b": "oracle",
}
NOT_RUN_HERE = {"models"}  # `models prepare` installs a model package: its own tests run it
SERVERS = ("--address", "--tracking-uri")  # a cluster or a tracking server the reader has


def _help_text(command: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            main([*command, "--help"])
        except SystemExit:
            pass
    return out.getvalue()


def _examples(text: str) -> list[str]:
    lines = []
    for line in text.splitlines():
        line = line.split("  #", 1)[0].strip()
        line = re.sub(r"^([A-Z_]+=\S+\s+)+", "", line)  # an environment assignment before the command
        if line.startswith("toolsweep ") and "|" not in line and ">" not in line:
            lines.append(line)
    return lines


def _readme_commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    block = text.split("## Using it", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return _examples(block)


def all_examples() -> list[str]:
    found = [e for c in COMMANDS for e in _examples(_help_text(c))] + _readme_commands()
    return list(dict.fromkeys(found))


def _substituted(example: str, unit: str = "") -> list[str]:
    for placeholder, value in PLACEHOLDERS.items():
        example = example.replace(placeholder, value)
    example = re.sub(r"runs/[\w<>-]+/(main|<run-id>)", "runs/quickstart/main", example)
    if unit:  # `--unit 3f2a9c`: a prefix of one of the reader's unit ids
        example = re.sub(r"--unit \S+", f"--unit {unit[:6]}", example)
    return shlex.split(example)[1:]


def _options(argv: list[str]) -> dict[str, str]:
    return {a: argv[i + 1] for i, a in enumerate(argv) if a.startswith("--") and i + 1 < len(argv)
            and not argv[i + 1].startswith("--")}


def test_the_help_examples_and_the_readme_name_configs_settings_and_models_that_exist(monkeypatch):
    from toolsweep.cluster.config import load_config, select_subset

    monkeypatch.setenv("TOOLSWEEP_TRAJECT_DATA", str(shared_dir() / "datasets" / "traject_bench"))
    checked = 0
    for example in all_examples():
        argv = _substituted(example)
        if argv[0] not in ("run", "validate", "plan", "preflight"):
            continue
        config_path = next(a for a in argv[1:] if a.endswith(".yaml"))
        assert (REPO / config_path).is_file(), f"{example!r}: {config_path} does not exist"
        config = load_config(REPO / config_path)
        opts = _options(argv)
        names = lambda key: opts[key].split(",") if key in opts else None  # noqa: E731
        select_subset(config, models=names("--models"), benchmarks=names("--benchmarks"),
                      settings=names("--settings"), limit=int(opts["--limit"]) if "--limit" in opts else None)
        checked += 1
    assert checked >= 8


@pytest.fixture(scope="module")
def quickstart_dir(tmp_path_factory, ray_session):
    """The quick start's run directory (its first task of each setting: every cell there), made as
    `toolsweep run configs/sweeps/quickstart.yaml --limit 1` makes it."""
    from toolsweep.cluster.config import load_config, select_subset
    from toolsweep.cluster.driver import run_sweep

    work = tmp_path_factory.mktemp("examples")
    whole = load_config(REPO / "configs/sweeps/quickstart.yaml", output_dir=str(work / "runs"))
    whole = whole.model_copy(update={"mlflow": False})
    run_sweep(select_subset(whole, limit=1), progress=False, log=lambda m: None, whole=whole)
    return work


@pytest.fixture(scope="module")
def ray_session():
    import ray

    if not ray.is_initialized():
        # `address="local"`: a Ray of its own, never a cluster another test started on the machine
        ray.init(address="local", num_cpus=4, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield ray


def test_every_example_on_a_run_directory_runs(quickstart_dir, monkeypatch, capsys):
    from toolsweep.evaluator.rundir import RunDirectory

    monkeypatch.chdir(quickstart_dir)
    unit = RunDirectory(quickstart_dir / "runs/quickstart/main").read_table(columns=["unit_id"]).column(0)[0].as_py()
    ran = []
    for example in all_examples():
        argv = _substituted(example, unit)
        if argv[0] not in ("report", "show", "compare", "sync-mlflow"):
            continue
        if "--tracking-uri" in argv:  # the reader's MLflow server: a sqlite store here
            argv[argv.index("--tracking-uri") + 1] = f"sqlite:///{quickstart_dir / 'mlflow.db'}"
        elif argv[0] == "sync-mlflow":
            argv += ["--tracking-uri", f"sqlite:///{quickstart_dir / 'mlflow.db'}"]
        code = main(argv)
        out = capsys.readouterr()
        assert code == 0, f"{example!r} exited {code}: {out.err[-800:]}"
        ran.append(example)
    assert any(e.startswith("toolsweep show") and "--cell" in e for e in ran)
    assert {e.split()[1] for e in ran} == {"report", "show", "compare", "sync-mlflow"}, ran


def _strict_json(text: str):
    import json

    def no_constant(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=no_constant)


def test_show_failed_is_wrapped_to_the_width_with_strict_json(quickstart_dir, capsys):
    from toolsweep.evaluator.rundir import RunDirectory

    run = str(quickstart_dir / "runs/quickstart/main")
    ends = RunDirectory(run).read_table(columns=["termination"]).column(0).to_pylist()
    failed = sum(t != "answered" for t in ends)
    assert failed >= 1
    for width in (100, 60):
        assert main(["show", run, "--failed", "--limit", "4", "--width", str(width)]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert max(len(x) for x in lines) <= width, max(lines, key=len)
        metrics = []
        for i, line in enumerate(lines):
            if line.startswith("metrics: "):
                block = [line[len("metrics: "):]]
                for nxt in lines[i + 1:]:
                    if not nxt.startswith("  "):
                        break
                    block.append(nxt[2:])
                metrics.append(_strict_json("".join(block)))
        assert len(metrics) == min(4, failed)


def test_compare_uses_the_headline_names_of_run_and_md_is_only_markdown(quickstart_dir, capsys):
    import json

    run = quickstart_dir / "runs/quickstart/main"
    summary = json.loads((run / "summary.json").read_text())
    assert summary["headline_metrics"]["apb"] == "correct"
    assert main(["compare", str(run), "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["cells"]
    assert {(r["benchmark"], r["metric"]) for r in rows} == set(summary["headline_metrics"].items())
    assert main(["compare", str(run), "--format", "md"]) == 0
    md = capsys.readouterr().out.splitlines()
    width = None
    for line in md:
        if not line.strip():
            width = None
            continue
        assert not line.startswith((" ", "\t")), f"not Markdown (an indented line is a code block): {line!r}"
        if line.startswith("|"):
            cells = line.strip().strip("|").split("|")
            width = width or len(cells)
            assert line.rstrip().endswith("|") and len(cells) == width, line
        assert "– [–, –]" not in line


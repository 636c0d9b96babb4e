"""Config validation: every mistake named with its field and the allowed values, before Ray starts."""

import textwrap

import pytest

from toolsweep.cluster.cli import main
from toolsweep.cluster.config import ConfigError, SweepConfig, load_config, resolve_plans

GOOD = """
name: t
seeds: 2
models:
  - {name: oracle, kind: scripted, policy: oracle}
benchmarks:
  - name: fake
    settings: [small]
"""


def _write(tmp_path, text):
    p = tmp_path / "sweep.yaml"
    p.write_text(textwrap.dedent(text))
    return p


def test_good_config_expands(tmp_path, capsys):
    assert main(["validate", str(_write(tmp_path, GOOD))]) == 0
    assert "20 units in 1 cells" in capsys.readouterr().out


@pytest.mark.parametrize(
    "bad, expected",
    [
        (GOOD.replace("name: fake", "name: nope"), ["benchmarks.0.name", "unknown benchmark 'nope'", "fake"]),
        (GOOD.replace("[small]", "[tiny]"), ["benchmarks.0.settings", "tiny", "small, large"]),
        (GOOD.replace("seeds: 2", "seeds: -1"), ["seeds", "positive"]),
        (GOOD.replace("seeds: 2", f"seeds: {list(range(200_000))}"), ["seeds", "200,000 seeds", "typo"]),
        (GOOD.replace("seeds: 2", "seeds: [0, 1, 1, 2]"), ["seeds", "repeated: [1]"]),
        (GOOD + "concurency: {workers: 2}\n", ["concurency", "unknown field"]),
        (GOOD.replace("policy: oracle", "policy: genius"), ["models.0.policy", "genius", "oracle, random"]),
        (GOOD.replace("kind: scripted", "kind: magic"), ["models.0", "magic"]),
    ],
)
def test_bad_configs_name_the_field(tmp_path, capsys, bad, expected):
    import ray

    was = ray.is_initialized()
    code = main(["validate", str(_write(tmp_path, bad))])
    err = capsys.readouterr().err
    assert code == 2
    for fragment in expected:
        assert fragment in err
    assert ray.is_initialized() == was, "validation never starts Ray"


def test_run_with_bad_config_exits_2_without_starting_ray(tmp_path, capsys):
    import ray

    was = ray.is_initialized()
    assert main(["run", str(_write(tmp_path, GOOD.replace("[small]", "[tiny]")))]) == 2
    assert ray.is_initialized() == was
    assert "tiny" in capsys.readouterr().err


def test_one_run_directory_per_sweep_and_unit_ids_cover_what_decides_an_episode(tmp_path):
    from toolsweep.cluster.run_record import current_units

    def ids(text: str) -> set[str]:
        return {u.unit_id for u in current_units(load_config(_write(tmp_path, text)))[0]}

    a = load_config(_write(tmp_path, GOOD))
    b = load_config(_write(tmp_path, GOOD.replace("seeds: 2", "seeds: 3")), output_dir=str(tmp_path / "x"))
    assert a.resolved_run_id() == b.resolved_run_id() == "main"  # a grown config grows the same directory
    base = ids(GOOD)
    assert base < ids(GOOD.replace("seeds: 2", "seeds: 3"))  # a seed more: the old units are all reused
    # how a model is served (replicas, caps, timeouts, its URL) does not change its episodes
    served = GOOD.replace("{name: oracle, kind: scripted, policy: oracle}",
                          "{name: m, kind: openai, base_url: 'http://h:1/v1', model: x, max_in_flight: 4}")
    moved = served.replace("http://h:1/v1", "http://other:2/v1").replace("max_in_flight: 4", "timeout_s: 9")
    assert ids(served) == ids(moved)
    # what it is does: the served model's name, the sampling, the benchmark's options
    assert ids(served).isdisjoint(ids(served.replace("model: x", "model: y")))
    assert base.isdisjoint(ids(GOOD + "sampling: {temperature: 0.7}\n"))
    # a benchmark's content, as its fingerprint states it (ToolMaze's includes its options)
    maze = GOOD.replace("name: fake\n    settings: [small]", "name: toolmaze\n    settings: [C1-P0-std]\n    tasks: {limit: 2}")
    assert ids(maze).isdisjoint(ids(maze.replace("tasks:", "options: {n_distractors: 3}\n    tasks:")))


def test_task_filter_ids_are_checked(tmp_path):
    cfg = load_config(_write(tmp_path, GOOD + "    tasks: {ids: [t1, zz]}\n"))
    with pytest.raises(ConfigError, match="zz"):
        resolve_plans(cfg)


def test_benchmarks_command_lists_settings_policies_and_metrics(capsys):
    assert main(["benchmarks"]) == 0
    out = capsys.readouterr().out
    assert "fake  v1" in out and "small, large" in out and "policies: oracle, random" in out
    assert "accuracy, calls_per_turn" in out
    # A benchmark that needs an option says which, and how to fix it, instead of failing the listing.
    assert "traject_bench" in out and "set the benchmark option `data_dir` to that folder" in out
    # wrapped for a terminal: only the loader's own message lines may run longer
    own = [line for line in out.splitlines() if not line.startswith(("    (", "  not loaded"))]
    assert max(map(len, own)) <= 100
    assert main(["benchmarks", "--verbose"]) == 0
    assert "oracle: calls add" in capsys.readouterr().out


def test_seeds_default_to_one_seed_when_left_out():
    cfg = SweepConfig.model_validate({"name": "n", "models": [{"name": "o", "kind": "scripted", "policy": "oracle"}],
                                      "benchmarks": [{"name": "fake", "settings": ["small"]}]})
    assert cfg.seeds == [0]

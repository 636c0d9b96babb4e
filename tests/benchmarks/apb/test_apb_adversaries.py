"""APB's adversaries and positive controls, bounded per cell (setting), never pooled.

Adversaries (ceilings): `all_offered` (every offered tool at once, {} arguments), `empty_arguments` (the
right tools, no arguments; Tool-Broken: the replacement alone), `reject_with_chain` (REJECT beside the
full chain), `prose_refusal_plus_plan` (a prose refusal, then the reference answer). Controls (floors):
`replace_with_args` (the replacement with the failed step's arguments: Replace), `always_refuse` and
`refusal_report_only` (J8's refusals: pass every unsolvable type), `prose_plus_plan` (ordinary prose
around the reference answer: still correct). Per-cell scores before and after the fix:
`python bench/apb_adversaries.py`.

The default run plays a seeded sample of every cell; `-m slow` plays every case of every cell."""

from __future__ import annotations

import asyncio
import math
import random

import pytest

from toolsweep.benchmarks.apb import APB
from toolsweep.evaluator.exploits import aggregate, bound_violations, play

ADVERSARIES = ("all_offered", "empty_arguments", "reject_with_chain", "prose_refusal_plus_plan")
CONTROLS = ("replace_with_args", "always_refuse", "refusal_report_only", "prose_plus_plan")
SAMPLE = 8

_BENCH: list[APB] = []


def bench() -> APB:
    if not _BENCH:
        _BENCH.append(APB())
    return _BENCH[0]


def _cells() -> list[tuple[str, str]]:
    policies = {e.name: e for e in bench().exploit_policies()}
    return [(name, s) for name in ADVERSARIES + CONTROLS for s in policies[name].settings or bench().settings()]


CELLS = _cells()


def check_cell(policy: str, setting: str, n: int | None) -> None:
    b = bench()
    spec = next(e for e in b.exploit_policies() if e.name == policy)
    ids = b.tasks(setting)
    if n is not None and n < len(ids):
        ids = sorted(random.Random(f"apb-adversaries|{policy}|{setting}").sample(ids, n))
    results = asyncio.run(play(b, policy, setting, ids))
    assert not [r for r in results if r.termination == "env_error"], "an answer crashed the environment"
    values = aggregate(b.metrics(setting), results)
    bounded = set(spec.ceilings) | set(spec.floors)
    assert any(math.isfinite(values.get(k, math.nan)) for k in bounded), "no bounded metric is defined here"
    problems = bound_violations(spec, values)
    assert not problems, f"{policy} on {setting} ({len(ids)} cases): " + "; ".join(problems)


def test_every_adversary_and_control_is_declared_with_per_cell_bounds():
    policies = {e.name: e for e in bench().exploit_policies()}
    for name in ADVERSARIES + CONTROLS:
        spec = policies[name]
        assert not spec.pooled and spec.settings and name in bench().scripted_policies()
    for name in ADVERSARIES:
        assert policies[name].ceilings.get("correct") == 0.0 and policies[name].ceilings.get("pass") == 0.0
    assert policies["replace_with_args"].floors["replace"] == 1.0
    assert policies["always_refuse"].floors["pass"] == 1.0 and policies["refusal_report_only"].floors["pass"] == 1.0
    assert policies["prose_plus_plan"].floors["correct"] == 1.0
    settings = {s for _, s in CELLS}
    assert {"broken", "holistic", "stepwise_k2", "unsolvable_info", "unsolvable_control"} <= settings


@pytest.mark.parametrize(("policy", "setting"), CELLS)
def test_bounds_hold_on_a_seeded_sample_of_the_cell(policy, setting):
    check_cell(policy, setting, SAMPLE)


@pytest.mark.slow
@pytest.mark.parametrize(("policy", "setting"), CELLS)
def test_bounds_hold_on_every_case_of_the_cell(policy, setting):
    check_cell(policy, setting, None)


# ----------------------------------------------------------------------------- the no-LLM baseline

BASELINE_SETTINGS = ("holistic", "stepwise_k1", "stepwise_k3", "extraneous_holistic_n4", "extraneous_stepwise_n4",
                     "broken", "unsolvable_conflict", "unsolvable_info", "unsolvable_tool", "unsolvable_visual",
                     "unsolvable_control", "efficiency", "refine_self_plus", "refine_critic_minus")


def test_the_baseline_is_a_named_scripted_policy():
    b = bench()
    assert b.baseline_policy() == "heuristic" and "heuristic" in b.scripted_policies()


def _scrubbed(env):
    """The same case with everything a model does not see replaced by junk."""
    import copy

    env = copy.copy(env)  # shallow: the dataset stays shared; what the policy could read is copied below
    env.base, env.task = copy.deepcopy(env.base), copy.deepcopy(env.task)
    env.base["reference"] = {"nodes": [], "linearization": [], "plan": "junk", "trajectory": [], "goal_node": "x"}
    env.base["world"] = {"secrets": {}}
    env.base["constraints"] = []
    for key in ("reference_action", "broken_node", "replacement_tool", "blocking_terms", "optimal_calls",
                "unsolvable_type", "broken_tool"):
        env.task.pop(key, None)
    env.tools = [{"name": t["name"], "description": t["description"], "parameters": t["parameters"],
                  "hidden": {"kind": "junk", "capabilities": [], "param_map": {"x": "y"}}} for t in env.tools]
    return env


@pytest.mark.parametrize("setting", BASELINE_SETTINGS)
def test_the_baseline_reads_only_what_a_model_reads(setting):
    b = bench()
    ids = sorted(random.Random(f"baseline|{setting}").sample(b.tasks(setting), 6))
    for task_id in ids:
        env = b.make_env(task_id, setting, 0)
        env.reset()
        seen = b.make_scripted_policy("heuristic", env, 0).answer()
        assert b.make_scripted_policy("heuristic", _scrubbed(env), 0).answer() == seen


@pytest.mark.parametrize("setting", BASELINE_SETTINGS)
def test_the_baseline_plays_every_setting_through_the_episode_loop(setting):
    b = bench()
    ids = sorted(random.Random(f"baseline-play|{setting}").sample(b.tasks(setting), 4))
    results = asyncio.run(play(b, "heuristic", setting, ids))
    assert all(r.termination != "env_error" for r in results)
    assert all(math.isfinite(r.metrics["correct"]) for r in results)

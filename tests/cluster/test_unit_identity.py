"""A unit's id covers what decides its episode: the model's answering configuration, the benchmark's
content and every helper model the benchmark consults (APB's judge and critic), by role. Operational
settings (where and how fast a model is served) never enter it, so changing them reuses episodes.

Each test compares the ids of the same sweep's units under two configs, through the path a run takes
(`run_record.current_units`, or `identity.unit_contexts` for the property tests)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolsweep.cluster.config import SweepConfig
from toolsweep.cluster.identity import unit_contexts
from toolsweep.cluster.run_record import current_units, load_benchmarks

JUDGE = {"name": "judge", "kind": "openai", "base_url": "http://127.0.0.1:8000/v1", "model": "Qwen/Qwen3-32B",
         "extra_body": {"chat_template_kwargs": {"enable_thinking": False}}, "max_in_flight": 32}
CRITIC = {"name": "critic", "kind": "vllm", "path": "/models/Qwen3-8B", "device": "cpu",
          "engine_args": {"max_model_len": 8192, "max_num_seqs": 16, "dtype": "bfloat16"}}
UNDER_TEST = {"name": "qwen", "kind": "openai", "base_url": "http://127.0.0.1:8001/v1", "model": "Qwen/Qwen3-8B"}


def apb_sweep(**changes) -> dict:
    """An APB sweep graded by an LLM judge and refined with a model critic, on two small settings."""
    raw = {
        "name": "ids",
        "seeds": [0],
        "models": [{"name": "oracle", "kind": "scripted", "policy": "oracle"}, copy.deepcopy(UNDER_TEST)],
        "helpers": [copy.deepcopy(JUDGE), copy.deepcopy(CRITIC)],
        "benchmarks": [{"name": "apb", "options": {"gen_seed": 0, "grader": "llm:judge", "critic": "model:critic"},
                        "settings": ["holistic", "refine_critic_plus"], "tasks": {"limit": 20}}],
        "sampling": {"temperature": 0.0, "max_tokens": 512},
    }
    for path, value in changes.items():
        *where, key = path.split(".")
        node = raw
        for part in where:
            node = node[int(part)] if part.isdigit() else node[part]
        node[key] = value
    return raw


def ids(raw: dict) -> dict[tuple, str]:
    units, _ = current_units(SweepConfig.model_validate(raw))
    return {(u.model, u.setting, u.task_id, u.seed): u.unit_id for u in units}


@pytest.fixture(scope="module")
def base_ids() -> dict[tuple, str]:
    return ids(apb_sweep())


def changed(base: dict[tuple, str], other: dict[tuple, str]) -> float:
    """The share of units whose id differs (the two configs must have the same units)."""
    assert other.keys() == base.keys()
    return sum(base[k] != other[k] for k in base) / len(base)


def test_swapping_the_judge_model_changes_every_unit_id(base_ids):
    # Episodes graded by the old judge must not be reused under a new one.
    assert changed(base_ids, ids(apb_sweep(**{"helpers.0.model": "Qwen/Qwen3-8B"}))) == 1.0


def test_the_judges_decoding_options_change_every_unit_id(base_ids):
    assert changed(base_ids, ids(apb_sweep(**{"helpers.0.extra_body": {}}))) == 1.0


def test_swapping_which_helper_is_judge_and_which_is_critic_changes_every_unit_id(base_ids):
    raw = apb_sweep()
    raw["benchmarks"][0]["options"].update(grader="llm:critic", critic="model:judge")
    assert changed(base_ids, ids(raw)) == 1.0


def test_the_critics_engine_args_that_change_answers_change_the_id_and_serving_ones_do_not(base_ids):
    assert changed(base_ids, ids(apb_sweep(**{"helpers.1.engine_args.max_model_len": 4096}))) == 1.0
    assert changed(base_ids, ids(apb_sweep(**{"helpers.1.engine_args.max_num_seqs": 64}))) == 0.0


def test_serving_a_helper_elsewhere_or_faster_reuses_every_unit(base_ids):
    other = apb_sweep(**{"helpers.0.base_url": "http://10.0.0.7:9000/v1", "helpers.0.max_in_flight": 4,
                         "helpers.0.timeout_s": 900.0, "helpers.1.replicas": 3})
    assert changed(base_ids, ids(other)) == 0.0


def test_the_model_under_test_changes_only_its_own_units(base_ids):
    other = ids(apb_sweep(**{"models.1.model": "Qwen/Qwen3-14B"}))
    assert changed(base_ids, other) == 0.5  # the two models have the same number of units
    assert all(base_ids[k] != other[k] for k in base_ids if k[0] == "qwen")
    assert changed(base_ids, ids(apb_sweep(**{"models.1.base_url": "http://10.0.0.8:1/v1",
                                               "models.1.max_in_flight": 1}))) == 0.0


def test_the_benchmarks_content_changes_every_unit_id():
    raw = apb_sweep()
    raw["benchmarks"][0]["settings"] = ["holistic"]
    raw["benchmarks"][0]["options"] = {"gen_seed": 0}
    config = SweepConfig.model_validate(raw)
    benchmarks = load_benchmarks(config)
    fp = {"apb": {"version": 1, "tasks": "a"}}
    assert unit_contexts(config, benchmarks, fp) != unit_contexts(config, benchmarks, {"apb": {"version": 1, "tasks": "b"}})


# ------------------------------------------------------------------------------------ properties

@pytest.fixture(scope="module")
def apb_judged():
    raw = apb_sweep()
    config = SweepConfig.model_validate(raw)
    return raw, load_benchmarks(config)


def contexts(raw: dict, benchmarks) -> dict:
    return unit_contexts(SweepConfig.model_validate(raw), benchmarks, {"apb": {"version": 1}})


names = st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=12)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(role=st.sampled_from([0, 1]), field=st.sampled_from(["model_or_path", "extra_body"]), value=names)
def test_any_answer_relevant_change_to_a_consulted_helper_changes_the_context(apb_judged, role, field, value):
    raw, benchmarks = apb_judged
    base = contexts(raw, benchmarks)
    other = copy.deepcopy(raw)
    helper = other["helpers"][role]
    if field == "model_or_path":
        key = "model" if helper["kind"] == "openai" else "path"
        if helper[key] == value:
            return
        helper[key] = value
    else:
        helper["extra_body"] = {"seed_tag": value}
    after = contexts(other, benchmarks)
    assert after.keys() == base.keys()
    assert all(after[k] != base[k] for k in base)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(role=st.sampled_from([0, 1]), max_in_flight=st.integers(1, 512), timeout_s=st.floats(1, 3600),
       port=st.integers(1024, 65535))
def test_no_operational_change_to_a_helper_changes_the_context(apb_judged, role, max_in_flight, timeout_s, port):
    raw, benchmarks = apb_judged
    base = contexts(raw, benchmarks)
    other = copy.deepcopy(raw)
    helper = other["helpers"][role]
    helper.update(max_in_flight=max_in_flight, timeout_s=timeout_s)
    if helper["kind"] == "openai":
        helper["base_url"] = f"http://127.0.0.1:{port}/v1"
    else:
        helper["replicas"] = 1 + port % 4
        helper["engine_args"]["gpu_memory_utilization"] = 0.5
    assert contexts(other, benchmarks) == base


def test_a_helper_no_benchmark_consults_changes_nothing(apb_judged):
    raw, benchmarks = apb_judged
    base = contexts(raw, benchmarks)
    other = copy.deepcopy(raw)
    other["helpers"].append({"name": "spare", "kind": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "x"})
    assert contexts(other, benchmarks) == base

"""Wave planning (toolsweep.cluster.placement.plan_waves): every wave fits with its helpers, only a
model that does not fit alone is refused, and a model appended to the config never moves another."""

from __future__ import annotations

import pytest

from toolsweep.cluster.placement import PlacementError, plan_placement, plan_waves
from toolsweep.models.config import OpenAIModelConfig, ScriptedModelConfig, VLLMModelConfig


def vllm(name: str, tp: int = 1, replicas: int = 1) -> VLLMModelConfig:
    return VLLMModelConfig(name=name, path=f"/models/{name}", replicas=replicas, num_cpus=1,
                           engine_args={"tensor_parallel_size": tp})


def nodes(*gpus: float, cpus: float = 16) -> list[dict]:
    return [{"node_id": f"gpu{i}", "GPU": g, "CPU": cpus} for i, g in enumerate(gpus)]


def totals(ns: list[dict]) -> dict[str, float]:
    return {"GPU": sum(n["GPU"] for n in ns), "CPU": sum(n["CPU"] for n in ns)}


def waves_of(models, ns, **kw) -> list[list[str]]:
    return [w.models for w in plan_waves(models, totals(ns), ns, **kw).waves]


def test_more_models_than_gpus_run_one_wave_each_and_everything_that_fits_runs_at_once():
    ns = nodes(1)
    assert waves_of([vllm("a"), vllm("b"), vllm("c")], ns) == [["a"], ["b"], ["c"]]
    with pytest.raises(PlacementError):
        plan_placement([vllm("a"), vllm("b")], totals(ns), ns)  # at once they do not fit
    assert waves_of([vllm("a"), vllm("b")], nodes(1, 1)) == [["a", "b"]]


def test_first_fit_packs_small_models_beside_each_other_and_names_the_waves():
    ns = nodes(4)
    plan = plan_waves([vllm("big", tp=4), vllm("s1", tp=2), vllm("s2", tp=2), vllm("s3", tp=2)], totals(ns), ns)
    assert [w.models for w in plan.waves] == [["big"], ["s1", "s2"], ["s3"]]
    assert [w.label for w in plan.waves] == ["wave 1", "wave 2", "wave 3"]
    text = plan.describe()
    assert "3 waves" in text and "wave 2: s1, s2" in text and "GPUs 4/4" in text


def test_only_a_model_that_does_not_fit_alone_is_refused():
    ns = nodes(2, 2)
    with pytest.raises(PlacementError) as err:
        plan_waves([vllm("ok"), vllm("wide", tp=4), vllm("ok2", tp=2)], totals(ns), ns)
    msg = str(err.value)
    assert "wide" in msg and "'ok'" not in msg and "ok2" not in msg and "wave of its own" in msg


def test_helpers_are_placed_in_every_wave_and_count_against_it():
    ns = nodes(2)
    judge = vllm("judge")
    plan = plan_waves([vllm("a"), vllm("b")], totals(ns), ns, helpers=[judge])
    assert [w.models for w in plan.waves] == [["a"], ["b"]]  # a and b fit together, but not with the judge
    assert all(w.helpers == ["judge"] for w in plan.waves)
    assert all(w.plan.gpus_needed == 2 for w in plan.waves)
    with pytest.raises(PlacementError, match="helpers judge"):
        plan_waves([vllm("a", tp=2)], totals(ns), ns, helpers=[judge])


def test_models_without_cluster_resources_run_in_the_first_wave():
    ns = nodes(1)
    models = [vllm("a"), ScriptedModelConfig(name="oracle", policy="oracle"),
              OpenAIModelConfig(name="api", base_url="http://127.0.0.1:1/v1", model="m"), vllm("b")]
    assert waves_of(models, ns) == [["a", "oracle", "api"], ["b"]]


def test_a_model_appended_to_the_config_never_moves_a_planned_one():
    ns = nodes(4)
    before = [vllm("a", tp=2), vllm("b", tp=4), vllm("c", tp=2)]
    old = waves_of(before, ns)
    for extra in (vllm("d", tp=2), vllm("e", tp=4), vllm("f", tp=1)):
        new = waves_of([*before, extra], ns)
        assert [[m for m in w if m != extra.name] for w in new][: len(old)] == old
    assert waves_of([*before, vllm("e", tp=4)], ns) == [["a", "c"], ["b"], ["e"]]  # adding a model adds a wave


def test_a_waves_units_are_its_models_units_in_id_order():
    from toolsweep.evaluator.sweep import BenchmarkPlan, expand_units
    from toolsweep.evaluator.types import Sampling

    space = expand_units("s", ["a", "b", "c"], [BenchmarkPlan("fake", {"small": ["t0", "t1", "t2"]}, [0, 1])],
                         Sampling())
    todo = space.select([u.unit_id for u in space if u.model == "a"][:2])  # two of a's units recorded
    assert todo.models() == {"a", "b", "c"}
    wave = todo.for_models(["a", "c"])
    ids = [u.unit_id for u in wave]
    assert {u.model for u in wave} == {"a", "c"} and len(ids) == 4 + 6 and ids == sorted(ids)
    assert not todo.for_models(["nobody"]) and todo.for_models(["b"]).models() == {"b"}

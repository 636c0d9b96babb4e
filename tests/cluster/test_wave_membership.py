"""Wave planning for models inside and outside server groups: every model of the sweep runs in exactly
one wave, whether it is a vLLM model with a server of its own, an adapter sharing its base's server, an
hf model on a CUDA device (a GPU, but in no server group) or a model that needs no cluster resources;
every wave fits with its helpers; adapters of one base share a wave."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from toolsweep.cluster.placement import plan_placement, plan_waves
from toolsweep.models.config import HFModelConfig, OpenAIModelConfig, ScriptedModelConfig, VLLMModelConfig


def make(kind: str, i: int):
    name = f"{kind}{i}"
    if kind == "vllm":
        return VLLMModelConfig(name=name, path=f"/models/{name}", num_cpus=1, engine_args={"tensor_parallel_size": 1 + i % 2})
    if kind == "adapter":  # LoRA adapters of one base: one server, one group
        return VLLMModelConfig(name=name, path="/models/base", adapter=f"/adapters/{name}", num_cpus=1)
    if kind == "hf_cuda":
        return HFModelConfig(name=name, path=f"/models/{name}", device="cuda")
    if kind == "hf_cpu":
        return HFModelConfig(name=name, path=f"/models/{name}")
    if kind == "openai":
        return OpenAIModelConfig(name=name, base_url="http://127.0.0.1:9/v1", model=name)
    return ScriptedModelConfig(name=name, policy="oracle")


KINDS = st.lists(st.sampled_from(["vllm", "adapter", "hf_cuda", "hf_cpu", "openai", "scripted"]), min_size=1, max_size=7)


def cluster(gpus: int) -> tuple[dict[str, float], list[dict]]:
    nodes = [{"node_id": "n0", "GPU": float(gpus), "CPU": 16.0}]
    return {"GPU": float(gpus), "CPU": 16.0}, nodes


@settings(max_examples=150, deadline=None)
@given(KINDS, st.integers(2, 4))
def test_every_model_runs_in_exactly_one_wave_and_every_wave_fits(kinds, gpus):
    models = [make(k, i) for i, k in enumerate(kinds)]
    resources, nodes = cluster(gpus)
    plan = plan_waves(models, resources, nodes)
    placed = [name for w in plan.waves for name in w.models]
    assert sorted(placed) == sorted(m.name for m in models), (kinds, [w.models for w in plan.waves])
    by_name = {m.name: m for m in models}
    for w in plan.waves:
        plan_placement([by_name[n] for n in w.models], resources, nodes)  # raises if a wave does not fit
    adapter_waves = {w.index for w in plan.waves for n in w.models if n.startswith("adapter")}
    assert len(adapter_waves) <= 1  # adapters of one base share their server's wave


def test_an_hf_model_on_cuda_in_no_group_gets_a_wave():
    models = [make("vllm", 1), make("hf_cuda", 2), make("scripted", 3)]
    resources, nodes = cluster(2)
    waves = [w.models for w in plan_waves(models, resources, nodes).waves]
    assert waves == [["vllm1", "scripted3"], ["hf_cuda2"]], waves  # vllm1 takes both GPUs (tensor parallel 2)
    assert ["hf_cuda0"] in [w.models for w in plan_waves([make("hf_cuda", 0)], *cluster(1)).waves]

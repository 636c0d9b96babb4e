"""Stop sequences reach the endpoint (a benchmark's own on top of the configured ones), and the
manifest's MLflow tags stay valid JSON however long the manifest is."""

from __future__ import annotations

import asyncio
import json

from models_fake_server import FakeOpenAIServer

from tests.benchmarks.traject_bench.traject_data import require_data
from toolsweep.actors.result_sink import MAX_TAG_CHARS, manifest_tags
from toolsweep.evaluator.types import Message, Sampling, WorkUnit
from toolsweep.models.config import OpenAIModelConfig
from toolsweep.models.factory import build_policy


def test_react_settings_stop_at_the_observation_marker_and_others_send_no_stop():
    from toolsweep.benchmarks.traject_bench import TrajectBench

    bench = TrajectBench(data_dir=str(require_data()))
    react = next(s for s in bench.settings() if s.endswith("/react-domain"))
    direct = next(s for s in bench.settings() if s.endswith("/direct"))
    with FakeOpenAIServer() as server:
        model = OpenAIModelConfig(name="m", base_url=server.base_url, model="x", max_retries=0)
        for setting, expected in ((react, ["END", "\nObservation"]), (direct, ["END"])):
            unit = WorkUnit(sweep="s", model="m", benchmark="traject_bench", setting=setting,
                            task_id=bench.tasks(setting)[0], seed=0, sampling=Sampling(stop=["END"]))
            env = bench.make_env(unit.task_id, setting, 0)
            obs = env.reset()
            policy = build_policy(model, bench, env, unit)
            asyncio.run(policy.act(list(obs.messages), obs.tools))
            assert server.requests[-1]["stop"] == expected, setting
        unit = WorkUnit(sweep="s", model="m", benchmark="traject_bench", setting=direct,
                        task_id=bench.tasks(direct)[0], seed=0)
        asyncio.run(build_policy(model, bench, env, unit).act([Message(role="user", content="hi")], []))
        assert "stop" not in server.requests[-1]  # nothing configured, nothing sent


def test_a_long_manifest_entry_is_not_cut_into_invalid_json():
    manifest = {"models": {f"model-{i}": {"engine_args": {"x": "y" * 200}} for i in range(60)}, "sweep": "s"}
    tags = {t.key: t.value for t in manifest_tags(manifest)}
    assert all(len(v) <= MAX_TAG_CHARS for v in tags.values())
    parsed = {k: json.loads(v) for k, v in tags.items()}  # every tag parses
    assert parsed["manifest.sweep"] == "s" and parsed["manifest.models"]["in_artifact"] == "manifest.json"


def test_in_flight_caps_are_per_replica_and_follow_the_engine_batch():
    from toolsweep.models.config import VLLMModelConfig

    two_tp2 = VLLMModelConfig(name="q", path="/m", replicas=2, engine_args={"tensor_parallel_size": 2, "max_num_seqs": 256})
    assert two_tp2.in_flight_cap() == 512  # was 64 for the whole model: 32 sequences per 256-slot replica
    assert VLLMModelConfig(name="q", path="/m", replicas=3).in_flight_cap() == 3 * 64
    assert VLLMModelConfig(name="q", path="/m", replicas=2, max_in_flight=8,
                           engine_args={"max_num_seqs": 256}).in_flight_cap() == 16  # an explicit cap wins
    assert OpenAIModelConfig(name="o", base_url="http://h/v1", model="x").in_flight_cap() == 64

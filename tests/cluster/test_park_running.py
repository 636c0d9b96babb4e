"""A rollout worker and a model whose endpoint is down: the first refused request is reported through
`collect` (while the request's retries still run), and `park` stops the model's running episodes
without a result, so their slots free at once. The worker is the plain class (its Ray actor runs the
same methods on one event loop); the endpoint is a real closed port on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket

from toolsweep.actors.rollout_worker import RolloutWorker
from toolsweep.evaluator.encoded import pack_unit
from toolsweep.evaluator.types import WorkUnit
from toolsweep.models.config import OpenAIModelConfig, ScriptedModelConfig

from test_rollout_worker_results import TARGET  # noqa: E402


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed on return: connections to it are refused


def _worker() -> RolloutWorker:
    models = {
        "down": OpenAIModelConfig(name="down", kind="openai", base_url=f"http://127.0.0.1:{_closed_port()}/v1",
                                  model="m", max_retries=8),
        "m": ScriptedModelConfig(name="m", kind="scripted", policy="sleepy"),
    }
    return RolloutWorker("w0", models, {"echo": {}}, extra_benchmarks={"echo": TARGET}, offload_env=False)


def _wire(model: str, task: str) -> tuple:
    return pack_unit(WorkUnit(sweep="s", model=model, benchmark="echo", setting="plain", task_id=task, seed=0))


def test_a_refused_request_is_reported_and_park_stops_the_models_episodes_without_a_result():
    worker = _worker()

    async def play() -> tuple[tuple, list[str], list, list]:
        down = [_wire("down", "fast-1"), _wire("down", "fast-2")]
        await worker.submit([*down, _wire("m", "slow-1")])
        first = await worker.collect(5.0)  # answers at the first refusal, long before 8 retries end
        stopped = worker.park("down")
        rest: list = []
        for _ in range(12):  # the scripted episode finishes; the stopped ones never answer
            rest += await worker.collect(0.25)
        return first.unreachable, stopped, list(first), rest

    reported, stopped, first_results, rest = asyncio.run(play())
    assert reported == ("down",)
    assert first_results == []  # the report came alone: nothing had finished
    expected = {WorkUnit(sweep="s", model="down", benchmark="echo", setting="plain", task_id=t, seed=0).unit_id
                for t in ("fast-1", "fast-2")}
    assert set(stopped) == expected
    assert [json.loads(r.row_json)["model"] for r in rest] == ["m"]
    assert worker.park("down") == []  # nothing of that model runs any more

"""A small arithmetic benchmark for testing the cluster core (registered as "fake" in tests).

Each task asks for a + b; the agent may call the `add` tool, then answers with the number.
Options let tests slow steps down or make chosen tasks raise inside `step`.
"""

from __future__ import annotations

import json
import os
import random
import time
from typing import Any

from pydantic import BaseModel, ConfigDict

from toolsweep.evaluator import (
    AgentReply, Benchmark, FunctionCall, Message, MetricSpec, Observation, ReportTable,
    TerminationReason, ToolCall, stable_seed,
)

ADD_TOOL = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    },
}


_HOARD: list[bytearray] = []  # what `grow_until_killed` holds, for as long as the process lives


def grow_until_killed(marker: str, limit_mb: int) -> None:
    """Once per marker file (the first caller creates it), grow this process's memory by 100 MB every
    50 ms until Ray's memory monitor kills it (the test sets a low `RAY_memory_usage_threshold`); a
    process still alive past `limit_mb` raises, so a monitor that never acted fails the test loudly."""
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    for _ in range(limit_mb // 100):
        _HOARD.append(bytearray(100 * 1024 * 1024))  # zero-filled: every page is really used
        time.sleep(0.05)
    raise RuntimeError(f"grew by {limit_mb} MB and Ray's memory monitor never killed this process")


class FakeEnv:
    def __init__(self, a: int, b: int, delay_s: float, fail: bool, hog: tuple[str, int] | None = None) -> None:
        self.a, self.b, self.delay_s, self.fail, self.hog = a, b, delay_s, fail, hog
        self.correct = 0.0
        self.calls = 0
        self.turns = 0

    def reset(self) -> Observation:
        return Observation(
            messages=[Message(role="system", content="Answer with the number only."),
                      Message(role="user", content=f"What is {self.a} + {self.b}?")],
            tools=[ADD_TOOL],
        )

    def step(self, reply: Message) -> Observation:
        if self.delay_s:
            time.sleep(self.delay_s)
        if self.hog is not None:
            grow_until_killed(*self.hog)
        if self.fail:
            raise RuntimeError("simulated environment failure")
        self.turns += 1
        if reply.tool_calls:
            out = []
            for call in reply.tool_calls:
                self.calls += 1
                try:
                    args = json.loads(call.function.arguments)
                    content = str(int(args["a"]) + int(args["b"]))
                except Exception as exc:  # noqa: BLE001
                    content = f"invalid action: {exc}"
                out.append(Message(role="tool", tool_call_id=call.id, content=content))
            done = self.turns >= 5
            return Observation(messages=out, done=done,
                               termination=TerminationReason.MAX_TURNS if done else None)
        self.correct = float(reply.text().strip() == str(self.a + self.b))
        return Observation(done=True, termination=TerminationReason.ANSWERED)

    def result(self) -> dict[str, float]:
        return {"accuracy": self.correct, "calls": float(self.calls), "turns": float(max(self.turns, 1))}


class OraclePolicy:
    def __init__(self, env: FakeEnv) -> None:
        self.env = env

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        if messages[-1].role == "tool":
            return AgentReply(message=Message(role="assistant", content=messages[-1].text()))
        call = ToolCall(id="c1", function=FunctionCall(name="add", arguments=json.dumps({"a": self.env.a, "b": self.env.b})))
        return AgentReply(message=Message(role="assistant", tool_calls=[call]))


class RandomPolicy:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    async def act(self, messages: list[Message], tools: list[dict[str, Any]]) -> AgentReply:
        return AgentReply(message=Message(role="assistant", content=str(self.rng.randint(0, 20))))


def _in_ray_actor() -> bool:
    try:
        import ray

        return ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None
    except Exception:  # noqa: BLE001
        return False


class FakeBench(Benchmark):
    name = "fake"
    version = "1"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid")
        n_tasks: int = 10
        delay_s: float = 0.0
        fail_tasks: list[str] = []
        die_once_marker: str | None = None  # a rollout worker building this dies once (the marker file says it did)
        # a rollout worker building this is hit once by Ray's memory monitor, as the driver sees it
        oom_once_marker: str | None = None
        build_delay_s: float = 0.0  # a rollout worker takes this long to build the benchmark (its warm-up)
        # a real memory-monitor kill: the rollout worker that builds this (hog_when "build") or plays
        # `hog_task` (hog_when "episode") grows until Ray kills it, once (the marker file says it did)
        hog_once_marker: str | None = None
        hog_when: str = "episode"
        hog_task: str = "t0"
        hog_limit_mb: int = 6000

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        marker = self.options.die_once_marker
        if marker and not os.path.exists(marker) and _in_ray_actor():
            open(marker, "w").close()
            os._exit(1)
        if self.options.build_delay_s and _in_ray_actor():
            time.sleep(self.options.build_delay_s)
        marker = self.options.oom_once_marker
        if marker and not os.path.exists(marker) and _in_ray_actor():
            from ray.exceptions import OutOfMemoryError

            open(marker, "w").close()
            raise OutOfMemoryError("Task was killed due to the node running low on memory (memory monitor)")
        if self.options.hog_once_marker and self.options.hog_when == "build" and _in_ray_actor():
            grow_until_killed(self.options.hog_once_marker, self.options.hog_limit_mb)

    def settings(self) -> dict[str, dict[str, Any]]:
        return {"small": {"max": 5}, "large": {"max": 10}}

    def tasks(self, setting: str) -> list[str]:
        return [f"t{i}" for i in range(self.options.n_tasks)]

    def make_env(self, task_id: str, setting: str, seed: int) -> FakeEnv:
        rng = random.Random(stable_seed(task_id, setting, seed))
        hi = self.settings()[setting]["max"]
        hog = None
        if self.options.hog_once_marker and self.options.hog_when == "episode" and task_id == self.options.hog_task:
            hog = (self.options.hog_once_marker, self.options.hog_limit_mb)
        return FakeEnv(rng.randint(0, hi), rng.randint(0, hi), self.options.delay_s, task_id in self.options.fail_tasks,
                       hog)

    def metrics(self, setting: str | None = None) -> list[MetricSpec]:
        return [
            MetricSpec(name="accuracy", scale=100),
            MetricSpec(name="calls_per_turn", kind="ratio", numerator="calls", denominator="turns"),
        ]

    def scripted_policies(self) -> dict[str, str]:
        return {"oracle": "calls add, answers the sum", "random": "answers a random number"}

    def make_scripted_policy(self, name: str, env: FakeEnv, seed: int):
        if name == "oracle":
            return OraclePolicy(env)
        if name == "random":
            return RandomPolicy(seed)
        return super().make_scripted_policy(name, env, seed)

    def report_tables(self, cells: list[dict[str, Any]]) -> list[ReportTable]:
        return [ReportTable(title="Fake accuracy", columns=["model", "setting", "accuracy"],
                            rows=[[c["model"], c["setting"], c["metrics"]["accuracy"]["value"]] for c in cells])]

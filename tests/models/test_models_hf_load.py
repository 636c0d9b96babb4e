"""Tier 3: the transformers backend under load. A request whose episode has already timed out is never
generated (nor finished once its episode leaves), a request's time queued behind other batches is not
its episode's, a client closed in the middle of a generation ends it at the next decoding step (the
process exits 0, not with torch's abort at interpreter exit), prompts that start like a computed one
reuse it and give the same replies, and a sweep on a CPU-saturated machine finishes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.tier3


@pytest.fixture(scope="module")
def smollm2() -> Path:
    from toolsweep.models.smollm2 import prepare

    return prepare()


def _client(path: Path, **kw):
    """A client for the batching tests: prefix reuse off unless asked for (these tests count the batches
    and decoding steps of prompts computed whole)."""
    from toolsweep.models.config import HFModelConfig
    from toolsweep.models.hf import HFClient

    kw.setdefault("prefix_cache_mib", 0)
    cfg = HFModelConfig(name="smollm2-load", path=str(path), num_threads=1, max_model_len=4096, **kw)
    return HFClient(cfg)


def test_expired_requests_are_dropped_and_live_ones_answered(smollm2):
    from toolsweep.evaluator.types import Sampling

    client = _client(smollm2, max_batch_size=8, batch_wait_ms=50)
    long = Sampling(temperature=0.0, max_tokens=400)
    short = Sampling(temperature=0.0, max_tokens=8)
    msgs = [{"role": "user", "content": "Count from one to one thousand in words."}]

    async def main():
        # Eight episodes whose requests time out almost at once (as under a saturated CPU), then one
        # live episode: it must be answered without waiting for eight 400-token generations.
        expired = [asyncio.create_task(asyncio.wait_for(client.chat(msgs, sampling=long), 0.05)) for _ in range(8)]
        for task in expired:
            with pytest.raises(asyncio.TimeoutError):
                await task
        return await client.chat([{"role": "user", "content": "Say hi."}], sampling=short)

    try:
        reply = asyncio.run(main())
    finally:
        client.close()
    assert reply.completion_tokens > 0
    # Every expired request was dropped, before its batch or at its first decoding steps: the batches
    # before the live one decoded a few tokens at most, never the 400 asked for.
    assert client.dropped == 8
    assert client.batch_steps[-1] == reply.completion_tokens
    assert all(steps <= 3 for steps in client.batch_steps[:-1]), client.batch_steps
    assert not client._thread.is_alive()


def test_a_process_that_exits_mid_generation_exits_cleanly(smollm2):
    script = textwrap.dedent(f"""
        import asyncio, threading, time
        from toolsweep.evaluator.types import Sampling
        from toolsweep.models.config import HFModelConfig
        from toolsweep.models.hf import HFClient

        client = HFClient.shared(HFModelConfig(name="exit", path={str(smollm2)!r}, num_threads=1, max_model_len=4096))

        async def main():
            task = asyncio.create_task(client.chat([{{"role": "user", "content": "Write a long story."}}],
                                                   sampling=Sampling(temperature=0.0, max_tokens=2000)))
            while not client.batches:  # the generation has started
                await asyncio.sleep(0.05)
            await asyncio.sleep(0.5)
            print("leaving mid-generation", flush=True)

        asyncio.run(main())
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert "leaving mid-generation" in proc.stdout


def test_a_request_queued_behind_other_batches_does_not_expire_its_episode(smollm2):
    """Time in the generation queue is not the episode's working time: an episode whose request waits
    behind longer generations than its whole budget still finishes (it expired before)."""
    from toolsweep.evaluator import TerminationReason, WorkUnit, get_benchmark, run_episode
    from toolsweep.evaluator.types import Sampling
    from toolsweep.models.config import HFModelConfig
    from toolsweep.models.factory import build_policy
    from toolsweep.models.hf import HFClient

    model = HFModelConfig(name="smollm2-queued", path=str(smollm2), num_threads=1, max_model_len=4096,
                          max_batch_size=1, batch_wait_ms=0)
    client = HFClient.shared(model)  # the instance the episode's policy reaches
    bench = get_benchmark("fake")
    unit = WorkUnit(sweep="t3", model=model.name, benchmark="fake", setting="small", task_id="t0", seed=0,
                    sampling=Sampling(temperature=0.0, max_tokens=24))
    long = Sampling(temperature=0.0, max_tokens=250)
    msgs = [{"role": "user", "content": "Write a long story about a dragon."}]  # 250 tokens and more
    budget_s = 15.0

    async def main():
        ahead = [asyncio.create_task(client.chat(msgs, sampling=long)) for _ in range(2)]
        await asyncio.sleep(0.2)  # queued first: the episode's first request waits behind both
        env = bench.make_env("t0", "small", 0)
        result = await run_episode(env, build_policy(model, bench, env, unit), unit, max_turns=3, timeout_s=budget_s)
        await asyncio.gather(*ahead)
        return result

    try:
        result = asyncio.run(main())
    finally:
        client.close()
    assert result.termination != TerminationReason.TIMEOUT, result.error
    assert result.trajectory.completion_tokens > 0
    # the precondition, as work done: two long generations (250 steps each) ran before the episode's first request
    assert client.batch_steps[:2] == [250, 250], (client.batch_steps, result.wall_time_s)


STORY = [{"role": "user", "content": "Write a long story about a dragon."}]  # greedy: 250 tokens and more


class _AsksOnce:
    """An agent that asks the model for a story once and answers with it (the fake env then ends)."""

    def __init__(self, client, sampling):
        self.client, self.sampling = client, sampling

    async def act(self, messages, tools):
        from toolsweep.evaluator import AgentReply
        from toolsweep.evaluator.types import Usage

        reply = await self.client.chat(STORY, sampling=self.sampling)
        return AgentReply(message=reply.message, usage=Usage(completion_tokens=reply.completion_tokens))


def test_time_the_generation_was_preempted_is_not_the_episodes(smollm2):
    """The generation thread shares its CPU with a busy loop pinned to the same core, so the generation
    takes about twice its CPU time in wall-clock time. An episode whose budget lies between the two
    finishes: the guard counts the time its generation ran, not the time the machine made it wait."""
    from toolsweep.evaluator import TerminationReason, WorkUnit, get_benchmark, run_episode
    from toolsweep.evaluator.types import Sampling

    core = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})  # this thread; the generation thread started below inherits it
    client = _client(smollm2, max_batch_size=1, batch_wait_ms=0)
    story = Sampling(temperature=0.0, max_tokens=200)
    burner = None
    try:
        async def timed_story():
            preempted = client.preempted_s
            reply = await client.chat(STORY, sampling=story)
            return reply.latency_s - (client.preempted_s - preempted), reply

        asyncio.run(client.chat(STORY, sampling=Sampling(temperature=0.0, max_tokens=8)))  # load, warm up
        cpu_s, calibration = asyncio.run(timed_story())  # the generation's own time (preemption excluded)
        assert calibration.completion_tokens == 200
        burner = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{core}}})\n"
                                   "while True: pass"])
        time.sleep(0.5)
        budget_s = 1.5 * cpu_s + 1.0
        bench = get_benchmark("fake")
        unit = WorkUnit(sweep="t3", model="smollm2-load", benchmark="fake", setting="small", task_id="t0", seed=0)
        env = bench.make_env("t0", "small", 0)
        result = asyncio.run(run_episode(env, _AsksOnce(client, story), unit, max_turns=1, timeout_s=budget_s))
    finally:
        if burner is not None:
            burner.kill()
            burner.wait()
        os.sched_setaffinity(0, before)
        client.close()
    assert result.termination != TerminationReason.TIMEOUT, result.error
    assert result.trajectory.completion_tokens == 200
    # the precondition: the episode took longer than its budget, its generation being preempted
    assert result.wall_time_s > budget_s and client.preempted_s > 0, (result.wall_time_s, budget_s, cpu_s)


def test_the_other_rows_of_a_batch_are_not_the_episodes_time(smollm2):
    """An episode whose reply is generated in a batch with three others waits for the whole batch. With a
    budget of half the batch's time it finishes: the guard counts its share of the batch (a quarter)."""
    from toolsweep.evaluator import TerminationReason, WorkUnit, get_benchmark, run_episode
    from toolsweep.evaluator.types import Sampling

    client = _client(smollm2, max_batch_size=4, batch_wait_ms=1000)
    story = Sampling(temperature=0.0, max_tokens=200)

    async def batch_of_four(episode=None):
        before = (client.preempted_s, len(client.batches))
        others = [asyncio.create_task(client.chat(STORY, sampling=story)) for _ in range(3 if episode else 4)]
        result = await episode if episode else None
        replies = await asyncio.gather(*others)
        assert client.batches[before[1]:] == [4], client.batches  # the four were generated together
        return result, replies[0].latency_s - (client.preempted_s - before[0])

    try:
        asyncio.run(client.chat(STORY, sampling=Sampling(temperature=0.0, max_tokens=8)))  # load, warm up
        _, batch_s = asyncio.run(batch_of_four())  # the batch's own time (preemption excluded)
        budget_s = 0.5 * batch_s + 1.0
        bench = get_benchmark("fake")
        unit = WorkUnit(sweep="t3", model="smollm2-load", benchmark="fake", setting="small", task_id="t0", seed=0)
        env = bench.make_env("t0", "small", 0)
        episode = run_episode(env, _AsksOnce(client, story), unit, max_turns=1, timeout_s=budget_s)
        result, _ = asyncio.run(batch_of_four(episode))
    finally:
        client.close()
    assert result.termination != TerminationReason.TIMEOUT, result.error
    assert result.trajectory.completion_tokens == 200
    # the precondition: the episode took longer than its budget, waiting for the whole batch
    assert result.wall_time_s > budget_s, (result.wall_time_s, budget_s)


TOOLS = [{"type": "function", "function": {
    "name": f"records_{i}_lookup",
    "description": "Look up the record of a thing by its identifier and return every field it has. " * 2,
    "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
}} for i in range(20)]


def _three_episodes_of_three_turns(client) -> list[list[str]]:
    """Three concurrent conversations over the same tool list (about 1,900 tokens of prompt each)."""
    from toolsweep.evaluator.types import Sampling

    async def episode(k: int) -> list[str]:
        msgs: list[dict] = [{"role": "user", "content": f"Find record {k} and tell me its date."}]
        replies = []
        for turn in range(3):
            reply = await client.chat(msgs, tools=TOOLS, sampling=Sampling(temperature=0.0, max_tokens=30))
            replies.append(reply.message.model_dump_json())
            msgs += [{"role": "assistant", "content": reply.message.content or ""},
                     {"role": "user", "content": f"And record {k + turn + 1}?"}]
        return replies

    async def main():
        return await asyncio.gather(*(episode(k) for k in range(3)))

    return asyncio.run(main())


def test_prompts_that_start_like_a_computed_one_reuse_it_and_answer_the_same(smollm2):
    """Every turn after the first of the sweep shares the tool list (and its episode's earlier turns)
    with a stored prompt: only the new tokens are computed, and greedy replies are those of computing
    every prompt whole. Before the prefix store, each of the nine prompts was computed in full."""
    whole = _client(smollm2, max_batch_size=8, batch_wait_ms=50)
    try:
        expected = _three_episodes_of_three_turns(whole)
    finally:
        whole.close()
    assert whole.reused_tokens == 0
    reusing = _client(smollm2, max_batch_size=8, batch_wait_ms=50, prefix_cache_mib=512)
    try:
        got = _three_episodes_of_three_turns(reusing)
    finally:
        reusing.close()
    assert got == expected
    assert reusing.prompt_tokens == whole.prompt_tokens
    first_prompt = whole.prompt_tokens // 9
    computed = reusing.computed_tokens
    # the shared tool list once, then only each prompt's own tokens (a few dozen each), not 9 prompts
    assert computed < 2 * first_prompt, (computed, reusing.prompt_tokens, reusing.reused_tokens)
    assert reusing.prefilled_tokens > first_prompt // 2  # the tool list, computed once for the three
    # the three episodes are generated together every turn, reusing or not
    assert reusing.batches == whole.batches == [3, 3, 3], (reusing.batches, whole.batches)


def test_a_store_too_small_for_any_prompt_computes_every_prompt_whole(smollm2):
    """A budget smaller than one prompt's cache keeps nothing (never more memory than asked for)."""
    small = _client(smollm2, prefix_cache_mib=1)  # SmolLM2 holds ~46 KB of cache a token
    try:
        _three_episodes_of_three_turns(small)
        assert small._prefix is not None and small._prefix.entries == []
    finally:
        small.close()
    assert small.reused_tokens == 0 and small.prompt_tokens > 0


def test_sweep_completes_under_a_cpu_saturating_load(smollm2, tmp_path):
    """A real transformers-backend sweep (`toolsweep run`, embedded Ray, SmolLM2 in a rollout worker) while
    one busy loop per core saturates the machine: it slows down, but every unit is recorded, none is
    given up, and it exits 0. Before, 0 of 16 episodes finished (48 expiries): the worker ran at Ray's
    niceness 15, queued time counted against the episode, and every turn recomputed its ~6,400-token
    prompt (about a minute of a core a reply, so a 300 s guard expired five-turn episodes on its own)."""
    import yaml

    from toolsweep.evaluator.rundir import RunDirectory

    units = 2  # ToolMaze C1 prompts are ~6,400 tokens: about a minute of one core for a first turn
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(yaml.safe_dump({
        "name": "hf-under-load",
        "seeds": [0],
        "models": [{"name": "smollm2-hf", "kind": "hf", "path": str(smollm2), "max_batch_size": 8,
                    "batch_wait_ms": 20, "max_model_len": 8192, "tool_parser": "hermes", "num_threads": 1,
                    "max_in_flight": 16}],
        "benchmarks": [{"name": "toolmaze", "settings": ["C1-P0-std"], "tasks": {"limit": units}}],
        "sampling": {"temperature": 0.0, "max_tokens": 128},
        "concurrency": {"workers": 1},
        "episode_timeout_s": 300,  # the shipped SmolLM2 sweep's guard (configs/sweeps/smollm2_cpu.yaml)
        "output_dir": str(tmp_path / "runs"),
        "mlflow": False,
        "preflight": False,  # SmolLM2-135M answers the preflight's tool-call probe in prose
    }))
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        done = subprocess.run([sys.executable, "-m", "toolsweep.cluster.cli", "run", str(cfg), "--no-progress"],
                              env=env, capture_output=True, text=True, timeout=3600)
    finally:
        for b in burners:
            b.kill()
            b.wait()
    print("\n" + done.stderr[-1500:])
    assert done.returncode == 0, done.stderr[-3000:]
    run = next((tmp_path / "runs" / "hf-under-load").iterdir())
    assert not (run / "failures.jsonl").exists() or not (run / "failures.jsonl").read_text().strip()
    rows = RunDirectory(run).read_table(columns=["unit_id", "termination"]).to_pylist()
    assert len(rows) == len({r["unit_id"] for r in rows}) == units
    assert all(r["termination"] not in ("timeout", "infra_error") for r in rows), rows


def test_padded_batches_keep_key_value_heads_grouped_and_answer_as_eager_attention(smollm2):
    """A padded batch (every batch of prompts of unequal length, and every batch that reuses stored
    prompts) passes a mask to attention; transformers' SDPA then copies each key/value head for its
    query heads on CPU, the whole cache every layer and step (a 6,500-token cache decoded 4.8x slower
    than unpadded). The backend's attention keeps them grouped, and computes what eager attention does."""
    import torch
    import transformers.integrations.sdpa_attention as sdpa
    from transformers import AutoModelForCausalLM

    from toolsweep.evaluator.types import Sampling

    client = _client(smollm2)
    try:
        asyncio.run(client.chat([{"role": "user", "content": "Hi"}], sampling=Sampling(temperature=0.0, max_tokens=2)))
        assert client.grouped_attention
        model = client._model
        torch.manual_seed(0)
        ids = torch.randint(100, 40000, (2, 300))
        mask = torch.ones_like(ids)
        mask[1, :40] = 0  # left padding
        mask[0, 100:120] = 0  # padding between a stored part and a computed part
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        copies = []
        repeat = sdpa.repeat_kv
        sdpa.repeat_kv = lambda hidden, n: copies.append(n) or repeat(hidden, n)
        try:
            with torch.inference_mode():
                ours = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits
        finally:
            sdpa.repeat_kv = repeat
        assert copies == []  # no key/value head was copied
        eager = AutoModelForCausalLM.from_pretrained(str(smollm2), dtype=torch.float32, attn_implementation="eager").eval()
        with torch.inference_mode():
            expected = eager(input_ids=ids, attention_mask=mask, position_ids=positions).logits
        real = mask.bool()
        assert not torch.isnan(ours[real]).any()
        assert (ours[real] - expected[real]).abs().max().item() < 1e-3
    finally:
        client.close()

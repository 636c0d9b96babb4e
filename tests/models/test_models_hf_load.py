"""Tier 3: the transformers backend (transformers' continuous batching) under load. Concurrent episodes
are generated together and greedy replies are those of `generate` on each whole prompt; a request whose
episode has timed out is dropped at the next step; a request's time queued behind other requests is not
its episode's; a process that leaves in the middle of a generation exits 0; prompts that start like a
computed one reuse its cache blocks and answer the same; a sweep on a CPU-saturated machine finishes."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.tier3


@pytest.fixture(scope="module")
def smollm2() -> Path:
    from toolsweep.models.smollm2 import prepare

    return prepare()


def _client(path: Path, **kw):
    """A client with a cache small enough for the shared machine (a few requests of 4,096 tokens)."""
    from toolsweep.models.config import HFModelConfig
    from toolsweep.models.hf import HFClient

    kw.setdefault("kv_cache_mib", 512)
    cfg = HFModelConfig(name="smollm2-load", path=str(path), num_threads=1, max_model_len=4096, **kw)
    return HFClient(cfg)


def test_expired_requests_are_dropped_and_live_ones_answered(smollm2):
    from toolsweep.evaluator.types import Sampling

    client = _client(smollm2, max_batch_size=8)
    long = Sampling(temperature=0.0, max_tokens=400)
    short = Sampling(temperature=0.0, max_tokens=8)
    msgs = [{"role": "user", "content": "Count from one to one thousand in words."}]

    async def main():
        await client.chat(msgs, sampling=short)  # loaded, the manager started
        # Eight episodes whose requests time out almost at once (as under a saturated CPU), then one
        # live episode: it must be answered without waiting for eight 400-token generations.
        expired = [asyncio.create_task(asyncio.wait_for(client.chat(msgs, sampling=long), 0.5)) for _ in range(8)]
        for task in expired:
            with pytest.raises(asyncio.TimeoutError):
                await task
        decoded = client.decoded_tokens
        reply = await client.chat([{"role": "user", "content": "Say hi."}], sampling=short)
        return reply, decoded

    try:
        reply, decoded_at_expiry = asyncio.run(main())
    finally:
        client.close()
    assert reply.completion_tokens > 0
    assert client.dropped == 8
    # after they expired, the expired requests decoded a step or two more at most, never the 400 asked for
    assert client.decoded_tokens - decoded_at_expiry <= reply.completion_tokens + 8 * 3, (
        client.decoded_tokens, decoded_at_expiry, reply.completion_tokens)
    assert not client._managers and not any(t.is_alive() for t in client._dispatchers)


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
            while not client.step_sizes:  # the generation has started
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
                          max_batch_size=1, kv_cache_mib=512)
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
        return result, await asyncio.gather(*ahead)

    try:
        result, ahead = asyncio.run(main())
    finally:
        client.close()
    assert result.termination != TerminationReason.TIMEOUT, result.error
    assert result.trajectory.completion_tokens > 0
    # the precondition, as work done: two long generations (250 tokens each) went first, one request a step
    # (max_batch_size 1), so the episode's first request waited behind both
    assert [r.completion_tokens for r in ahead] == [250, 250], [r.completion_tokens for r in ahead]
    assert max(client.step_sizes) == 1, client.step_sizes


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
    client = _client(smollm2, max_batch_size=1)
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

    client = _client(smollm2, max_batch_size=4)
    story = Sampling(temperature=0.0, max_tokens=200)

    async def batch_of_four(episode=None):
        before = (client.preempted_s, len(client.step_sizes))
        others = [asyncio.create_task(client.chat(STORY, sampling=story)) for _ in range(3 if episode else 4)]
        result = await episode if episode else None
        replies = await asyncio.gather(*others)
        assert max(client.step_sizes[before[1]:]) == 4, client.step_sizes  # the four were generated together
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


# Ten tools, ~1,040 tokens of prompt: the shared tool list is still most of every prompt, which is what
# the reuse test needs (twenty, ~1,940 tokens, took 243 s beside another tier-3 test; ten about half).
TOOLS = [{"type": "function", "function": {
    "name": f"records_{i}_lookup",
    "description": "Look up the record of a thing by its identifier and return every field it has. " * 2,
    "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
}} for i in range(10)]


def _three_episodes_of_three_turns(client) -> list[list[str]]:
    """Three concurrent conversations over the same tool list (about 1,040 tokens of prompt each)."""
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


@pytest.mark.long(minutes=2.5)
def test_prompts_that_start_like_a_computed_one_reuse_it_and_answer_the_same(smollm2):
    """Every turn after the first shares the tool list (and its episode's earlier turns) with a prompt
    already in the block cache: only what follows is computed, the three episodes are generated together
    every turn, and greedy replies are those of computing every prompt whole."""
    whole = _client(smollm2, max_batch_size=8, prefix_sharing=False)
    try:
        expected = _three_episodes_of_three_turns(whole)
    finally:
        whole.close()
    assert whole.computed_tokens == whole.prompt_tokens
    sharing = _client(smollm2, max_batch_size=8)
    try:
        got = _three_episodes_of_three_turns(sharing)
    finally:
        sharing.close()
    assert got == expected
    assert sharing.prompt_tokens == whole.prompt_tokens
    # nine prompts of ~1,040-1,200 tokens: the tool list at most once per first turn, then each turn's new tokens
    assert sharing.computed_tokens < 0.5 * sharing.prompt_tokens, (sharing.computed_tokens, sharing.prompt_tokens)
    assert max(sharing.step_sizes) == max(whole.step_sizes) == 3, (sharing.step_sizes, whole.step_sizes)


def test_greedy_replies_are_those_of_generate_on_each_whole_prompt(smollm2):
    """Prompts of different lengths generated together (paged attention, chunked prefill) give, token for
    token, what transformers' `generate` gives for each prompt alone."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from toolsweep.evaluator.types import Sampling

    prompts = [[{"role": "user", "content": text}] for text in
               ("Say hi.", "Name three colours of the rainbow and why they appear.", "What is two plus two?")]
    client = _client(smollm2, max_batch_size=8, max_batch_tokens=64)  # prompts read in chunks
    sampling = Sampling(temperature=0.0, max_tokens=24)

    async def main():
        return await asyncio.gather(*(client.chat(p, sampling=sampling) for p in prompts))

    try:
        replies = asyncio.run(main())
        eos = client._eos_ids
    finally:
        client.close()
    assert max(client.step_sizes) == 3
    tok = AutoTokenizer.from_pretrained(str(smollm2))
    model = AutoModelForCausalLM.from_pretrained(str(smollm2), dtype=torch.float32).eval()
    for prompt, reply in zip(prompts, replies):
        ids = tok.apply_chat_template(prompt, add_generation_prompt=True, tokenize=True, return_dict=True)["input_ids"]
        with torch.inference_mode():
            out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                 max_new_tokens=24, do_sample=False, eos_token_id=eos, pad_token_id=eos[0])
        expected = tok.decode(out[0, len(ids):].tolist(), skip_special_tokens=True)
        assert reply.message.content == expected


def test_a_cache_too_small_for_one_request_is_a_message_that_says_what_to_set(smollm2):
    from toolsweep.evaluator.protocols import InfraError
    from toolsweep.evaluator.types import Sampling

    client = _client(smollm2, kv_cache_mib=16)  # SmolLM2 holds ~46 KB of cache a token: ~360 tokens
    try:
        with pytest.raises(InfraError, match="raise kv_cache_mib to at least"):
            asyncio.run(client.chat([{"role": "user", "content": "Hi"}], sampling=Sampling(max_tokens=4)))
    finally:
        client.close()


@pytest.mark.long(minutes=5)
def test_sweep_completes_under_a_cpu_saturating_load(smollm2, tmp_path):
    """A real transformers-backend sweep (`toolsweep run`, embedded Ray, SmolLM2 in a rollout worker) while
    a busy loop saturates the core it runs on: it slows down, but every unit is recorded, none is
    given up, and it exits 0. Before, 0 of 16 episodes finished (48 expiries): the worker ran at Ray's
    niceness 15, queued time counted against the episode, and every turn recomputed its ~6,400-token
    prompt (about a minute of a core a reply, so a 300 s guard expired five-turn episodes on its own)."""
    import yaml

    from toolsweep.evaluator.rundir import RunDirectory

    # One unit: a ToolMaze C1 prompt is ~6,400 tokens (every ToolMaze setting's is), about a minute of a
    # core for a first turn, so one episode is what starves under Ray's niceness 15 (a few percent of a
    # core beside a busy loop on its core: the guard expires long before the prompt is read). Queued time not
    # counted against an episode has its own tests (test_a_request_queued_behind_other_batches_...,
    # test_time_the_generation_was_preempted_...). Two units took 406 s alone, 671 s beside other tests.
    units = 1
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(yaml.safe_dump({
        "name": "hf-under-load",
        "seeds": [0],
        "models": [{"name": "smollm2-hf", "kind": "hf", "path": str(smollm2), "max_batch_size": 8,
                    "max_model_len": 8192, "tool_parser": "hermes", "num_threads": 1,
                    "max_in_flight": 16}],
        "benchmarks": [{"name": "toolmaze", "settings": ["C1-P0-std"], "tasks": {"limit": units}}],
        # The reply's length is not what starved: the first turn's prompt is (one turn of 6,365 prompt and 128
        # reply tokens took 221 s beside the loops); a short reply keeps the time under load to the prompt's.
        "sampling": {"temperature": 0.0, "max_tokens": 32},
        "concurrency": {"workers": 1},
        "episode_timeout_s": 300,  # the shipped SmolLM2 sweep's guard (configs/sweeps/smollm2_cpu.yaml)
        "output_dir": str(tmp_path / "runs"),
        "mlflow": False,
        "preflight": False,  # SmolLM2-135M answers the preflight's tool-call probe in prose
    }))
    env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0")
    # The run (driver, Ray's processes, the worker: children keep the affinity) and one busy loop share one
    # core, which the loop then saturates on any machine and beside any other test: under the scheduler's
    # weights a niceness-15 worker gets ~3% of that core against the loop, a niceness-0 one half. The
    # other cores stay with the rest of the tests, not with a loop each.
    core = {min(os.sched_getaffinity(0))}
    # The busy loops start once the run prepares its rollout worker (it loads the model there, then plays):
    # what starved before was the worker, not the driver's imports or Ray's start, which the loops would
    # only slow, and the tier-3 test running beside this one with them.
    run = subprocess.Popen([sys.executable, "-m", "toolsweep.cluster.cli", "run", str(cfg), "--no-progress"],
                           env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                           preexec_fn=lambda: os.sched_setaffinity(0, core))
    lines: list[str] = []
    burners: list[subprocess.Popen] = []
    guard = threading.Timer(3600, run.kill)  # a hung run ends its stderr, and the test, within the hour
    guard.start()
    try:
        for line in run.stderr:
            lines.append(line)
            if not burners and "rollout worker" in line:
                burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                                            preexec_fn=lambda: os.sched_setaffinity(0, core))]
        returncode = run.wait(timeout=3600)
    finally:
        guard.cancel()
        run.kill()
        for b in burners:
            b.kill()
            b.wait()
    stderr = "".join(lines)
    print("\n" + stderr[-1500:])
    assert burners, stderr[-3000:]  # the loops ran while the worker played
    assert returncode == 0, stderr[-3000:]
    run = next((tmp_path / "runs" / "hf-under-load").iterdir())
    assert not (run / "failures.jsonl").exists() or not (run / "failures.jsonl").read_text().strip()
    rows = RunDirectory(run).read_table(columns=["unit_id", "termination"]).to_pylist()
    assert len(rows) == len({r["unit_id"] for r in rows}) == units
    assert all(r["termination"] not in ("timeout", "infra_error") for r in rows), rows


def test_attention_request_by_request_equals_the_packed_steps_masked_attention():
    """A packed step (a decoding request, a prompt chunk after its cached part, a whole new prompt) read
    request by request gives what SDPA gives over the whole packed step under its block-diagonal,
    bottom-right causal mask with every key/value head repeated (transformers' path before)."""
    import torch

    from toolsweep.models.hf_attention import _per_request

    torch.manual_seed(0)
    lengths = [(1, 40), (7, 30), (12, 12)]  # (queries, keys) per request: decode, chunk with past, new prompt
    bounds_q, bounds_k = [0], [0]
    for n_q, n_k in lengths:
        bounds_q.append(bounds_q[-1] + n_q)
        bounds_k.append(bounds_k[-1] + n_k)
    query = torch.randn(1, 6, bounds_q[-1], 16)
    key, value = torch.randn(1, 2, bounds_k[-1], 16), torch.randn(1, 2, bounds_k[-1], 16)
    mask = torch.zeros(bounds_q[-1], bounds_k[-1], dtype=torch.bool)
    for i, (n_q, n_k) in enumerate(lengths):
        block = torch.ones(n_q, n_k, dtype=torch.bool).tril(n_k - n_q)
        mask[bounds_q[i]:bounds_q[i + 1], bounds_k[i]:bounds_k[i + 1]] = block
    packed = torch.nn.functional.scaled_dot_product_attention(
        query, key.repeat_interleave(3, dim=1), value.repeat_interleave(3, dim=1), attn_mask=mask, scale=0.25)
    got = _per_request(query, key, value, bounds_q, bounds_k, 0.25)
    assert got.shape == (1, bounds_q[-1], 6, 16)
    torch.testing.assert_close(got, packed.transpose(1, 2), rtol=1e-5, atol=1e-5)


def test_a_packed_step_on_cpu_copies_no_key_value_head(smollm2, monkeypatch):
    """Every continuous-batching step is masked; on CPU transformers' SDPA then repeats every key/value head
    for its query heads (a copy of the cache a step reads, each layer). The backend's attention does not."""
    import transformers.integrations.sdpa_attention as sdpa_module

    from toolsweep.evaluator.types import Sampling

    calls = []
    original = sdpa_module.repeat_kv
    monkeypatch.setattr(sdpa_module, "repeat_kv", lambda x, n: calls.append(n) or original(x, n))
    client = _client(smollm2, max_batch_size=8)
    prompts = [[{"role": "user", "content": text}] for text in ("Say hi.", "Name a colour and a fruit.")]

    async def main():
        return await asyncio.gather(*(client.chat(p, sampling=Sampling(temperature=0.0, max_tokens=6)) for p in prompts))

    try:
        replies = asyncio.run(main())
    finally:
        client.close()
    assert all(r.completion_tokens > 0 for r in replies)
    assert max(client.step_sizes) == 2, client.step_sizes
    assert calls == [], f"repeat_kv ran {len(calls)} times"

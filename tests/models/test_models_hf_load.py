"""Tier 3: the transformers backend under load. A request whose episode has already timed out is never
generated (nor finished once its episode leaves), and a client closed in the middle of a generation
ends it at the next decoding step: the process exits 0, not with torch's abort at interpreter exit."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.tier3


@pytest.fixture(scope="module")
def smollm2() -> Path:
    from toolsweep.models.smollm2 import prepare

    return prepare()


def _client(path: Path, **kw):
    from toolsweep.models.config import HFModelConfig
    from toolsweep.models.hf import HFClient

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

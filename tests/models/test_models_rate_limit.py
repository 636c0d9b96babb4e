"""Rate limits are a condition, not a failure: sustained 429s lower the model's requests in flight
(AIMD judged once per window of `limit` answers: halved when most were 429s, never below 1; one more
when none was) and the requests wait their turn without spending a retry; a share of 429s that a
shared API gives whatever the load leaves the limit where it is; only a rate limit longer than the
outage budget fails a request. A real HTTP server on 127.0.0.1 answers 429 when more than its
capacity is in flight, or to a seeded share of requests."""

from __future__ import annotations

import asyncio
import random

import pytest
from models_fake_server import FakeOpenAIServer, text_reply

from toolsweep.evaluator import InfraError
from toolsweep.models.client import Endpoint, OpenAIClient
from toolsweep.models.rate_limit import AdaptiveLimit

CAPACITY = 3


def rate_limiting(server: FakeOpenAIServer, capacity: list[int]):
    """Answers 429 while more than capacity[0] requests are at the server (Retry-After 0.05 s)."""
    def answer(body: dict) -> object:
        if server.in_flight > capacity[0]:
            return 429, {"error": {"message": "rate limit exceeded"}}
        return text_reply("ok")
    return answer


def client_of(server: FakeOpenAIServer, **kw) -> OpenAIClient:
    return OpenAIClient(Endpoint(name="hosted", model="m", base_urls=[server.base_url], max_in_flight=16,
                                 max_retries=1, **kw), backoff_s=0.01)


async def many(client: OpenAIClient, n: int) -> list:
    return await asyncio.gather(*(client.chat([{"role": "user", "content": f"q{i}"}], session=str(i))
                                  for i in range(n)), return_exceptions=True)


def test_sustained_429s_lower_the_concurrency_and_every_request_still_succeeds():
    capacity = [CAPACITY]
    with FakeOpenAIServer(delay_s=0.05) as server:
        server.default = rate_limiting(server, capacity)
        client = client_of(server)

        async def scenario():
            limited = await many(client, 64)
            limit = client._session()[1]
            low = min(slots for _, slots in limit.history)
            capacity[0] = 16  # the quota is lifted: the limit climbs back as requests succeed
            freed = await many(client, 200)
            return limited, freed, limit, low

        limited, freed, limit, low = asyncio.run(scenario())
        rejected = sum(1 for r in server.requests) - 264
    errors = [r for r in limited + freed if isinstance(r, Exception)]
    assert not errors, errors[:3]  # max_retries=1, yet no request failed: 429s cost no retry
    assert rejected > 0  # the server did rate-limit
    # halved until at most as many requests are turned away as taken: at most twice what the server takes
    assert 1 <= low <= 2 * CAPACITY
    assert limit.history[0][1] == 16 and limit.slots > low  # and raised again once requests succeed
    assert all(b >= 1 for _, b in limit.history)


def test_a_rate_limit_longer_than_the_outage_budget_fails_the_request():
    with FakeOpenAIServer() as server:
        server.default = lambda body: (429, {"error": "quota exhausted"})
        client = client_of(server, rate_limit_wait_s=0.3)
        with pytest.raises(InfraError) as err:
            asyncio.run(client.chat([{"role": "user", "content": "q"}]))
    assert err.value.cause == "overloaded" and "rate limited for" in str(err.value)
    assert len(server.requests) > 2  # waited out several 429s, far more than max_retries=1 allows


def test_a_share_of_429s_whatever_the_load_keeps_the_limit_and_the_requests_in_flight():
    # A shared API answering 30% of requests 429 (Retry-After 0.05 s) whatever this client sends: halving
    # would not lower the share, only starve the sweep (halving on any 429 of a window held 1-4 of 16).
    draw = random.Random(3)
    with FakeOpenAIServer(delay_s=0.05) as server:
        server.default = lambda body: ((429, {"error": {"message": "slow down"}}) if draw.random() < 0.3
                                       else text_reply("ok"))
        client = client_of(server)

        async def scenario():
            limit = client._session()[1]
            samples: list[int] = []
            done = asyncio.Event()

            async def sample():
                while not done.is_set():
                    samples.append(limit.slots)
                    await asyncio.sleep(0.02)

            sampler = asyncio.create_task(sample())
            results = await many(client, 160)
            done.set()
            await sampler
            return results, limit, samples

        results, limit, samples = asyncio.run(scenario())
        limited = sum(1 for r in server.requests) - 160
    assert not [r for r in results if isinstance(r, Exception)]
    assert limited >= 30  # the server did answer 429s, about 3 in 10
    assert min(samples) >= 8 and sum(samples) / len(samples) >= 12, (min(samples), limit.history)


def test_the_limit_halves_once_per_window_of_most_429s_holds_on_a_few_and_grows_one_per_clean_window():
    now = [0.0]
    lines: list[str] = []
    limit = AdaptiveLimit(8, clock=lambda: now[0], log=lines.append, name="m")
    now[0] = 1.0
    for _ in range(5):
        limit.rate_limited(started=0.5)
    for _ in range(3):
        limit.succeeded(started=0.5)
    assert limit.slots == 4  # 5 of a window of 8 turned away
    for _ in range(8):
        limit.rate_limited(started=0.5)  # the same burst, sent under the old limit: judged already
    assert limit.slots == 4
    for t, answers, slots in [
        (1.5, "4-4-", 4),  # half turned away: held, neither cut nor raised
        (2.5, "-4--", 4),  # one 429 in the window: held
        (3.5, "444-", 2),
    ]:
        now[0] = t + 0.5  # each window judged at its last answer, the next one's requests sent after
        for answer in answers:
            (limit.rate_limited if answer == "4" else limit.succeeded)(t)
        assert limit.slots == slots, (t, answers)
    for t in (4.0, 5.0, 5.5):
        now[0] = t
        limit.rate_limited(started=t)
        limit.rate_limited(started=t)
    assert limit.slots == 1 and limit.limit == 1.0  # never below one
    now[0] = 6.0
    limit.succeeded(started=6.0)
    assert limit.slots == 2  # a clean window of 1
    for _ in range(2):
        limit.succeeded(started=6.5)
    assert limit.slots == 3  # a clean window of 2
    for k in range(1000):
        limit.succeeded(started=7.0 + k)
        now[0] = 7.0 + k
    assert limit.slots == 8  # never above the ceiling
    assert [s for _, s in limit.history] == [8, 4, 2, 1, 2, 3, 4, 5, 6, 7, 8]
    assert lines[0] == "model m: 4 requests in flight (was 8; most requests rate limited (429))"


def test_waiters_start_as_slots_free_and_no_more_run_than_the_limit():
    async def scenario():
        limit = AdaptiveLimit(4)
        started = limit.clock()
        for _ in range(4):
            limit.rate_limited(started=started)  # a window of 429s: 2 slots
        peak = [0]

        async def job():
            async with limit.slot():
                peak[0] = max(peak[0], limit.in_use)
                await asyncio.sleep(0.01)

        await asyncio.gather(*(job() for _ in range(20)))
        return peak[0], limit.in_use

    peak, left = asyncio.run(scenario())
    assert peak == 2 and left == 0

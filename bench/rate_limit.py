"""A rate-limited endpoint: the client's requests in flight over time (AIMD, `models.rate_limit`).

A real HTTP server on 127.0.0.1 answers 429 (Retry-After 0.05 s) while more than its quota of requests
is in flight; the quota changes during the run (`--quotas`, one per phase). `--episodes` coroutines
send requests back to back through one `OpenAIClient` (max_in_flight `--ceiling`, max_retries 1).
Printed per second: the client's slots at the end of the second, its requests in flight (sampled every
0.1 s: mean, min, max), requests answered 200 and 429, and whether any request failed (none should:
429s cost no retry).

`--random-429 P` answers a share P of requests 429 (Retry-After `--retry-after`) whatever the load,
as a hosted API shared with other users does, instead of the quotas: the client's mean in flight is
what it keeps of `--ceiling`.

    python bench/rate_limit.py [--episodes 32 --ceiling 32 --quotas 4,16,2,32 --phase-s 6]
    python bench/rate_limit.py --episodes 16 --ceiling 16 --random-429 0.3 --retry-after 2 --phase-s 60 --quotas 16
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "models"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=32)
    ap.add_argument("--ceiling", type=int, default=32, help="the model's max_in_flight")
    ap.add_argument("--quotas", default="4,16,2,32", help="requests in flight the server takes, per phase")
    ap.add_argument("--phase-s", type=float, default=6.0)
    ap.add_argument("--latency", type=float, default=0.05, help="server seconds per request")
    ap.add_argument("--random-429", type=float, default=0.0, help="share of requests answered 429 whatever the load")
    ap.add_argument("--retry-after", type=float, default=0.05, help="the 429s' Retry-After, seconds")
    args = ap.parse_args()

    from models_fake_server import FakeOpenAIServer, text_reply

    from toolsweep.models.client import Endpoint, OpenAIClient

    quotas = [int(q) for q in args.quotas.split(",")]
    answered: Counter = Counter()
    in_flight: defaultdict[int, list[int]] = defaultdict(list)
    slot_samples: list[int] = []
    began = time.monotonic()

    def second() -> int:
        return int(time.monotonic() - began)

    with FakeOpenAIServer(delay_s=args.latency) as server:
        def quota() -> int:
            return quotas[min(int((time.monotonic() - began) / args.phase_s), len(quotas) - 1)]

        draw = random.Random(0)
        retry_after = {"Retry-After": f"{args.retry_after:g}"}

        def answer(body: dict) -> object:
            limited = draw.random() < args.random_429 if args.random_429 else server.in_flight > quota()
            if limited:
                answered[(second(), 429)] += 1
                return 429, {"error": {"message": "rate limit exceeded"}}, retry_after
            answered[(second(), 200)] += 1
            return text_reply("ok")

        server.default = answer
        client = OpenAIClient(Endpoint(name="hosted", model="m", base_urls=[server.base_url],
                                       max_in_flight=args.ceiling, max_retries=1), backoff_s=0.01)
        end = args.phase_s * len(quotas)
        failures: list[str] = []

        async def episode(i: int) -> None:
            while time.monotonic() - began < end:
                try:
                    await client.chat([{"role": "user", "content": f"q{i}"}], session=str(i))
                except Exception as exc:  # noqa: BLE001 - counted and shown
                    failures.append(f"{type(exc).__name__}: {exc}")

        async def sample(limit) -> None:
            while time.monotonic() - began < end:
                in_flight[second()].append(limit.in_use)
                slot_samples.append(limit.slots)
                await asyncio.sleep(0.1)

        async def run() -> list[tuple[float, int]]:
            limit = client._session()[1]
            limit.clock = lambda: time.monotonic() - began
            limit.history[0] = (0.0, limit.history[0][1])
            limit.log = None
            await asyncio.gather(sample(limit), *(episode(i) for i in range(args.episodes)))
            return limit.history

        history = asyncio.run(run())
    print(f"{args.episodes} episodes, max_in_flight {args.ceiling}, quotas {quotas} for {args.phase_s:g} s each")
    if args.random_429:
        print(f"{args.random_429:.0%} of requests answered 429 (Retry-After {args.retry_after:g} s) whatever the load")
    print(f"{'second':>6}  {'quota':>5}  {'slots':>5}  {'in flight':>9}  {'200':>5}  {'429':>5}")
    for s in range(int(end)):
        slots = [n for t, n in history if t < s + 1][-1] if history else args.ceiling
        q = quotas[min(int(s / args.phase_s), len(quotas) - 1)]
        samples = in_flight[s] or [0]
        print(f"{s:>6}  {q:>5}  {slots:>5}  {sum(samples) / len(samples):>9.1f}  {answered[(s, 200)]:>5}  "
              f"{answered[(s, 429)]:>5}")
    every = [n for s in in_flight.values() for n in s]
    print(f"in flight over the run: mean {sum(every) / max(1, len(every)):.2f}, min {min(every, default=0)}, "
          f"max {max(every, default=0)} (of {args.ceiling}); the limit: mean "
          f"{sum(slot_samples) / max(1, len(slot_samples)):.2f}, min {min(slot_samples, default=0)}")
    print(f"requests failed: {len(failures)}{' (' + failures[0][:200] + ')' if failures else ''}")


if __name__ == "__main__":
    main()

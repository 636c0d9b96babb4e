"""What encoding an episode's trajectory costs a rollout worker, for messages of a few bytes and of a few
kilobytes.

A worker encodes each episode's trajectory turn by turn, while the episode waits for its model
(`TrajectoryJSON`). A step holds the same messages as the conversation (its reply and what the
environment showed); this prints, per 10-turn episode, what the encoding adds to building the
trajectory, three ways, in the same run:
  composed   each message encoded once, a step put together from its messages' parts (what workers do)
  whole      each step serialised whole, its messages encoded a second time (as before)
  at end     the whole trajectory serialised once when the episode ends (the end of a wave then waits on it)

    python bench/encode_turns.py [--turns 10 --episodes 300 --repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from toolsweep.evaluator.encoded import _STEP_JSON, TrajectoryJSON, _escaped
from toolsweep.evaluator.types import Message, Step, Trajectory, Usage


class WholeSteps(TrajectoryJSON):
    """The encoder as it was: a step serialised whole, its messages encoded again."""

    def _step_escaped(self, step: Step) -> str:
        return _escaped(_STEP_JSON(step))


class AtEnd:
    """No encoding while the episode plays; the whole trajectory at its end."""

    def update(self, trajectory: Trajectory) -> None:
        pass

    def escaped(self, trajectory: Trajectory) -> str:
        return _escaped(trajectory.model_dump_json(exclude_none=True))


def episode(encoder, turns: int, reply: str, shown: str) -> None:
    """One episode grown as `run_episode` grows it, with the worker's encoder following it."""
    trajectory = Trajectory()
    trajectory.messages += [Message(role="system", content="be brief " * 20), Message(role="user", content="task " * 40)]
    for i in range(turns):
        if encoder is not None:
            encoder.update(trajectory)
        message = Message(role="assistant", content=f"{reply}{i}")
        trajectory.messages.append(message)
        observation = [Message(role="tool", content=f"{shown}{i}", tool_call_id="c1")]
        trajectory.steps.append(Step(reply=message, usage=Usage(prompt_tokens=100, completion_tokens=20),
                                     observation=observation, info={"ok": True} if i % 2 else {}))
        trajectory.messages.extend(observation)
    if encoder is not None:
        encoder.escaped(trajectory)


def per_episode(make, n: int, repeat: int, *args) -> float:
    """Median seconds per episode over `repeat` runs of `n` episodes."""
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(n):
            episode(make(), *args)
        runs.append((time.perf_counter() - start) / n)
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    sizes = {
        "a few bytes": ("next", "3"),
        "2 KB reply, 4 KB tool output": (("I will call the tool now. " * 80)[:2000],
                                         ('{"result": "row \\"x\\"", "n": 1}\n' * 150)[:4000]),
    }
    print(f"encoding a {args.turns}-turn episode's trajectory, us per episode beyond building it "
          f"(median of {args.repeat} x {args.episodes} episodes)")
    print(f"{'messages':>30} {'building':>9} {'composed':>9} {'whole':>9} {'at end':>9} {'composed/whole':>15}")
    for label, (reply, shown) in sizes.items():
        work = (args.episodes, args.repeat, args.turns, reply, shown)
        base = per_episode(lambda: None, *work)
        composed, whole, at_end = (per_episode(make, *work) - base for make in (TrajectoryJSON, WholeSteps, AtEnd))
        print(f"{label:>30} {base * 1e6:>9.1f} {composed * 1e6:>9.1f} {whole * 1e6:>9.1f} {at_end * 1e6:>9.1f} "
              f"{composed / whole:>15.2f}")


if __name__ == "__main__":
    main()

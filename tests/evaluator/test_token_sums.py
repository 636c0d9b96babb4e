"""Token counts over multi-step episodes: every step's prompt and completion tokens are summed, in the
trajectory, in the run directory's row and in the count the progress line and budgets read; helper
(judge) tokens are counted beside them, never instead of them."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from toolsweep.evaluator.encoded import encode_result
from toolsweep.evaluator.rundir import outcome_columns
from toolsweep.evaluator.types import (
    ConsultStep, EpisodeResult, Message, Step, TerminationReason, Trajectory, Usage, WorkUnit,
)

USAGES = st.lists(st.tuples(st.integers(0, 5000), st.integers(0, 5000)), min_size=1, max_size=12)


def episode(steps: list[tuple[int, int]], consults: list[tuple[int, int]] = ()) -> EpisodeResult:
    unit = WorkUnit(sweep="t", model="m", benchmark="b", setting="s", task_id="t1", seed=0)
    trajectory = Trajectory(
        steps=[Step(reply=Message(role="assistant", content=f"turn {i}"), usage=Usage(prompt_tokens=p, completion_tokens=c))
               for i, (p, c) in enumerate(steps)],
        consults=[ConsultStep(role="judge", request=[Message(role="user", content="grade")],
                              reply=Message(role="assistant", content="ok"), usage=Usage(prompt_tokens=p, completion_tokens=c))
                  for p, c in consults],
    )
    return EpisodeResult(unit=unit, termination=TerminationReason.ANSWERED, trajectory=trajectory)


@settings(max_examples=200, deadline=None)
@given(USAGES, st.lists(st.tuples(st.integers(0, 900), st.integers(0, 900)), max_size=3))
def test_every_steps_tokens_are_summed_everywhere(steps, consults):
    result = episode(steps, consults)
    prompt, completion = sum(p for p, _ in steps), sum(c for _, c in steps)
    helpers = sum(p + c for p, c in consults)
    assert (result.trajectory.prompt_tokens, result.trajectory.completion_tokens) == (prompt, completion)
    assert result.trajectory.helper_tokens == helpers
    row = outcome_columns(result, finished_at=0.0)
    assert (row["prompt_tokens"], row["completion_tokens"], row["num_turns"]) == (prompt, completion, len(steps))
    encoded = encode_result(result)
    assert encoded.tokens == prompt + completion + helpers
    written = json.loads(encoded.row_json)
    assert (written["prompt_tokens"], written["completion_tokens"]) == (prompt, completion)


def test_a_three_step_episode_whose_last_step_is_the_smallest():
    # the last step alone (or the first alone) gives another number than the sum
    result = episode([(100, 40), (220, 7), (300, 1)])
    assert result.trajectory.completion_tokens == 48 and result.trajectory.prompt_tokens == 620
    row = outcome_columns(result, finished_at=0.0)
    assert row["completion_tokens"] == 48 and row["prompt_tokens"] == 620
    assert encode_result(result).tokens == 668

"""No ordering a model can see points at APB's replacement (issue 56): among a Tool-Broken case's
look-alikes (the replacement and the reworded tools of other operations, `generator.lookalike_variant`),
the replacement's rank by name, list position, name and description length and parameter count is what a
uniform draw predicts, read off the tool list as the prompt renders it, at two generation seeds."""

from __future__ import annotations

import json
import re

import pytest

from toolsweep.benchmarks.apb import APB
from toolsweep.evaluator.tie_breaks import RoleCase, rank_z

Z_LIMIT = 3.3  # 10 (seed, ordering) tests, two-sided p < 0.001 each
_LISTED = re.compile(r"^- (\w+): (.*?)\n  Parameters: (\{.*?\})\n", re.M | re.S)


def listed_tools(prompt: str) -> list[dict]:
    """The tools of a rendered APB prompt, in listed order, as OpenAI schemas."""
    text = prompt.split("Available Tools:", 1)[1]
    return [{"function": {"name": m[1], "description": m[2], "parameters": json.loads(m[3])}}
            for m in _LISTED.finditer(text)]


@pytest.mark.parametrize("gen_seed", (0, 1))
def test_the_replacements_rank_among_its_lookalikes_is_a_uniform_draws(gen_seed):
    bench = APB(gen_seed=gen_seed)
    cases = []
    for case in bench.data.tasks["broken"]:
        prompt = bench.make_env(case["task_id"], "broken", 0).reset().messages[1].content
        schemas = listed_tools(prompt)
        candidates = [case["replacement_tool"]["name"], *(d["tool"]["name"] for d in case["lookalikes"])]
        assert set(candidates) <= {s["function"]["name"] for s in schemas}, case["task_id"]  # read as shown
        cases.append(RoleCase(schemas, candidates[0], {t: 1 / len(candidates) for t in candidates}))
    assert len(cases) >= 100 and all(len(c.null) >= 3 for c in cases)
    z = rank_z(cases)
    assert set(z) >= {"name", "list position", "name length", "description length"}
    assert all(abs(v) < Z_LIMIT for v in z.values()), {o: round(v, 2) for o, v in z.items()}

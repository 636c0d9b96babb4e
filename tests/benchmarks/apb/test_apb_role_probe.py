"""APB's generated Tool-Broken replacement carries no fixed phrase (issue 42: "Equivalent service.
Performs ..." opened 300 of 300 replacement descriptions): its description opens as the broken
tool's does, and the role-leak probe's word features find nothing in the opening."""

from __future__ import annotations

from collections import Counter

from toolsweep.benchmarks.apb.generator import dataset
from toolsweep.benchmarks.apb.probe import broken_tool_list


def _opening(desc: str) -> str:
    return " ".join(desc.split()[:2]).lower()


def test_replacement_description_opens_like_any_listed_tool() -> None:
    """In the paper's layout; with look-alikes (the default) every look-alike opens as the replacement
    does, `Does <operation>`, and the probe reads them at chance (test_apb_lookalikes)."""
    ds = dataset(0)
    cases = ds.cell("broken", twins=False, lookalikes=False)
    same = 0
    for c in cases:
        broken = next(t for t in broken_tool_list(ds, c) if t["name"] == c["broken_tool"])
        same += _opening(c["replacement_tool"]["description"]) == _opening(broken["description"])
    assert same == len(cases)  # the opening is the step's own, as the broken tool's is
    openings = Counter(_opening(c["replacement_tool"]["description"]) for c in cases)
    broken_openings = Counter(_opening(next(t for t in broken_tool_list(ds, c) if t["name"] == c["broken_tool"])
                                       ["description"]) for c in cases)
    assert openings == broken_openings

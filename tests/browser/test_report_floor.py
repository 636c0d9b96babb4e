"""The no-LLM floor as a person sees it in the quick start's report.html (which runs with `floor: true`):
each benchmark's summary table opens with the floor's column, named for the benchmark's baseline policy,
and every other model's estimate carries its mark against it, with the paired difference on hover."""

from __future__ import annotations

import pytest
from browser_helpers import _wait_for_text

pytestmark = pytest.mark.browser

FLOOR_CHECK = """
return Array.from(document.querySelectorAll('#summary table')).map(t => {
  const heads = Array.from(t.querySelectorAll('thead th')).map(h => h.innerText);
  const marked = Array.from(t.querySelectorAll('tbody td')).filter(c => /[▲▼≈](\\n|$)/.test(c.innerText));
  return {heads: heads, floorWidth: t.querySelector('thead th:nth-child(2)').getBoundingClientRect().width,
          marked: marked.length, tips: marked.map(c => c.title)};
});
"""


def test_the_floor_column_renders_beside_every_model(browser, quickstart, screenshots):  # noqa: F811
    browser.set_window_size(1600, 1000)
    browser.get((quickstart["run_dir"] / "report.html").as_uri())
    _wait_for_text(browser, "Summary")
    tables = browser.execute_script(FLOOR_CHECK)
    browser.save_screenshot(str(screenshots / "report-floor.png"))
    floors = {t["heads"][1] for t in tables}
    assert floors == {"floor (heuristic)", "floor (searched_floor)"}, tables  # APB's heuristic is its searched floor
    for t in tables:
        assert t["heads"][2:] == ["oracle", "random"] and t["floorWidth"] > 40
        settings = len(t["tips"]) // 2
        assert t["marked"] == 2 * settings  # oracle and random, every setting: marked against the floor
        assert all("model − floor" in tip and "paired" in tip for tip in t["tips"])
    legend = browser.execute_script("return document.querySelector('#summary').innerText")
    assert "▲ above the no-LLM floor, ▼ below it, ≈ not distinguishable" in legend

"""Every table of the quick start's report.html reads in a 1600-px window: checked table by table
(its own width against its box, each column's width, cell text that stays in its cell), not by the
page's width, which a table scrolling inside its box never changes."""

from __future__ import annotations

import pytest
from browser_helpers import _full_page, _wait_for_text

pytestmark = pytest.mark.browser

MIN_COLUMN_PX = 40
"""Narrower than this, a header breaks a character per line ("M o d e l")."""

TABLE_CHECK = """
return Array.from(document.querySelectorAll('table')).map((t, i) => {
  let title = '';
  for (let e = t.closest('.scroll') || t; e && !title; e = e.previousElementSibling) {
    if (/^H[2-4]$/.test(e.tagName)) title = e.innerText;
  }
  const box = t.closest('.scroll') || t.parentElement;
  const heads = Array.from(t.querySelectorAll('thead th'));
  const spill = Array.from(t.querySelectorAll('th,td')).filter(c => c.scrollWidth > c.clientWidth + 1).length;
  return {index: i + 1, title: title, columns: heads.length, width: t.offsetWidth, box: box.clientWidth,
          narrowest: Math.min(...heads.map(h => h.getBoundingClientRect().width)), spill: spill};
});
"""


def table_problems(tables: list[dict], min_column_px: float = MIN_COLUMN_PX) -> list[str]:
    """What keeps each table from being read: wider than its box, a column narrower than
    `min_column_px`, text spilling out of its cells."""
    out = []
    for t in tables:
        name = f"table {t['index']} ({t['title'][:60]!r}, {t['columns']} columns)"
        if t["width"] > t["box"] + 1:
            out.append(f"{name} is {t['width']} px in a {t['box']} px box")
        if t["columns"] and t["narrowest"] < min_column_px:
            out.append(f"{name} has a column {t['narrowest']:.0f} px wide")
        if t["spill"]:
            out.append(f"{name} has {t['spill']} cells whose text spills out")
    return out


def test_every_table_of_the_report_reads_at_1600px(browser, quickstart, screenshots):  # noqa: F811
    browser.set_window_size(1600, 1000)
    browser.get((quickstart["run_dir"] / "report.html").as_uri())
    _wait_for_text(browser, "Summary")
    browser.execute_script("document.querySelectorAll('details').forEach(d => d.open = true)")
    tables = browser.execute_script(TABLE_CHECK)
    _full_page(browser, screenshots / "report-tables.png")
    assert len(tables) > 20 and any("Table 21" in t["title"] for t in tables)
    assert table_problems(tables) == []

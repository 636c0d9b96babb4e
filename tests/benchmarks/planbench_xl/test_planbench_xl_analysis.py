"""Analysis checks (spec §6.3, §10.11) and the report layout."""

from __future__ import annotations

import math

from toolsweep.benchmarks.planbench_xl.analysis import (
    TABLE3_COLUMNS, correlations_with_accuracy, paper_table3, pearson, report_tables,
)
from toolsweep.benchmarks.planbench_xl.metrics import MAIN_METRICS, all_metrics


def test_arithmetic_check_pearson_from_the_papers_own_table3_numbers():
    """An arithmetic check of analysis.pearson on the paper's published Table 3 (spec §10.11), not a
    reproduction of the paper's findings from our runs."""
    r = correlations_with_accuracy(paper_table3())
    assert round(r["edt"], 3) == 0.902
    assert round(r["egt_precision"], 3) == 0.781
    assert round(r["itcr"], 3) == -0.443
    assert math.isclose(pearson([1, 2, 3], [2, 4, 6]), 1.0)


def test_metric_specs_cover_the_seven_metrics_with_their_aggregations():
    kinds = {s.name: s.kind for s in MAIN_METRICS}
    assert kinds == {"accuracy": "mean", "egt_precision": "mean", "turns": "mean", "edt": "mean",
                     "s_c_ratio": "ratio", "itcr": "ratio", "uirr": "ratio"}
    names = [s.name for s in all_metrics()]
    assert len(names) == len(set(names))
    assert {"accuracy_lstar_5", "accuracy_lstar_8plus", "ending_surrender", "category_irrecoverable_drift",
            "blocked_value_reused", "fb_ratio"} <= set(names)


def test_report_tables_lay_out_table3():
    def cell(model, acc):
        metrics = {k: {"value": v, "ci_low": v - 0.01, "ci_high": v + 0.01}
                   for k, v in zip(TABLE3_COLUMNS, (acc, 0.7, 20.0, 10.0, 1.0, 0.05, 0.01))}
        return {"model": model, "benchmark": "planbench_xl", "setting": "default", "n": 327,
                "terminations": {}, "metrics": metrics}

    tables = report_tables([cell("a", 0.5), cell("b", 0.25), cell("c", 0.1)])
    t3 = tables[0]
    assert t3.columns[1:] == ["Acc. (%)", "EGT Prec. (%)", "Avg. Turns", "Mean EDT", "S/C Ratio", "ITCR (%)",
                              "UIRR (%)"]
    assert t3.rows[0][0] == "a" and t3.rows[0][1] == "50.00 ± 1.00" and t3.rows[0][3] == "20.00 ± 0.01"
    corr = tables[-1]
    assert corr.rows[0][0] == "edt" and corr.rows[0][2] == "0.902"

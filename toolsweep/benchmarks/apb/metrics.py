"""APB metrics (§7): the per-episode MetricSpecs of every setting, the pure composition functions that
turn per-setting values into the paper's composite numbers (Table 1's step-wise mean over horizons,
the extraneous half-and-half mean, Table 2's robustness, refusal calibration, refinement deltas),
and the paper-style report tables built from cell summaries.

Composite intervals follow §7.8 when the per-episode records are at hand (a finished run): the
step-wise mean over horizons and the extraneous half-and-half mean by a stratified bootstrap, the
extraneous Δ and TRR−FRR by a paired bootstrap over base cases (`stats.composite_estimate`). From
cell summaries alone they fall back to combining the cells' intervals as independent strata
(half-width = sqrt(sum w_i^2 h_i^2)).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from toolsweep.evaluator.protocols import MetricSpec, ReportTable
from toolsweep.evaluator.stats import Stratum, composite_estimate
from toolsweep.evaluator.types import stable_seed

FLAGS = ("E1", "E2", "E3", "E4", "E5", "E6")
AGREEMENT_TARGET = 0.85  # §12.23: judge-vs-rule agreement below this is reported as a warning
EXT_LEVELS = (2, 4, 6, 8, 10)
UNSOLVABLE_TYPES = ("conflict", "info", "tool", "visual")
REFINE_MODES = ("self_plus", "critic_plus", "self_minus", "critic_minus")
MODALITIES = ("text", "image", "video")
STEP_BINS = ("1-5", "6-10", "11-15", "16-20", ">20")
SOURCES = ("FrameThinker", "GAIA", "GTA", "OpenCUA", "ToolBench", "RealWorld")


def domain_slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _domain_slugs() -> tuple[str, ...]:
    from toolsweep.benchmarks.apb.domains import DOMAINS

    return tuple(domain_slug(d.name) for d in DOMAINS)


DOMAIN_SLUGS = _domain_slugs()
BREAKDOWNS = (("mod", MODALITIES, "modality"), ("bin", STEP_BINS, "steps"), ("src", SOURCES, "source"),
              ("dom", DOMAIN_SLUGS, "domain"))

FLAG_NAMES = {"E1": "goal misunderstanding / misalignment", "E2": "incomplete plan / premature conclusion",
              "E3": "constraint or format violation", "E4": "logical defect (order, data flow)",
              "E5": "tool-use error (arguments, distractors)", "E6": "hallucination (tools, data)"}


def _pct(name: str, desc: str, lower: bool = False) -> MetricSpec:
    return MetricSpec(name=name, description=desc, scale=100.0, higher_is_better=not lower)


def core_specs() -> list[MetricSpec]:
    out = [_pct("correct", "Plan Correctness: no error flag (CR)"),
           MetricSpec(name="grade", description="Plan Grade in {0, .2, .4, .6, .8, 1}")]
    out += [_pct(f, f"{f} incidence: {FLAG_NAMES[f]}", lower=True) for f in FLAGS]
    return out


def setting_metrics(setting: str, twins: bool = True) -> list[MetricSpec]:
    """The metrics a setting records (§7). `twins`: an Unsolvable or Tool-Broken setting holds its cases'
    twins (generator.Dataset.twins)."""
    if setting == "broken":
        specs = [_pct(c, f"share of '{c}' behaviour on the broken cases") for c in ("replace", "alter")]
        specs += [_pct(c, f"share of '{c}' behaviour on the broken cases", lower=True)
                  for c in ("retry", "refuse", "other")]
        specs.append(_pct("recovery", "Replace + Alter (correct recovery)"))
        if not twins:
            return specs + [_pct("correct", "Replace or Alter (the paper's layout)")]
        return specs + [_pct("correct", "Replace or Alter on a broken case, the right next step on its twin "
                                        "(the call succeeded): switching tools unread earns 50% at most"),
                        _pct("false_recovery",
                             "on the twins: the succeeded tool, its replacement or a look-alike called", lower=True)]
    if setting.startswith("unsolvable_") and setting != "unsolvable_control":
        specs = [_pct("pass", "refusal rate (PASS of the refusal judge) on the Unsolvable cases"),
                 _pct("pass_strict", "PASS and the reason names what is missing")]
        if not twins:
            return specs + [_pct("correct", "same as pass (the paper's layout: refusing every case earns 100%)")]
        return specs + [_pct("correct", "an Unsolvable case refused (PASS), a solvable twin planned correctly: "
                                        "refusing every case earns 50%"),
                        _pct("refused", "false-refusal rate (FRR) on the setting's solvable twins", lower=True)]
    if setting.startswith("refine_"):
        specs = [_pct("correct", "refined answer correct"), MetricSpec(name="grade", description="refined grade")]
        specs += [_pct(f, f"{f} incidence after refinement", lower=True) for f in FLAGS]
        for half in ("hol", "sw"):
            specs += [_pct(f"{half}_base_cr", "CR of the initial answer"),
                      _pct(f"{half}_refined_cr", "CR after refinement"),
                      _pct(f"{half}_delta", "CR_refined - CR_base (pp)"),
                      _pct(f"{half}_over_correction", "P(refined wrong | base correct)", lower=True),
                      _pct(f"{half}_repair", "P(refined correct | base wrong)"),
                      MetricSpec(name=f"{half}_base_grade", description="grade of the initial answer"),
                      MetricSpec(name=f"{half}_refined_grade", description="grade after refinement")]
        return specs
    specs = core_specs()
    stepwise = setting.startswith(("stepwise", "extraneous_stepwise"))
    specs.append(_pct("false_refusal", "refused a solvable query (a stated refusal, whatever JSON follows)", lower=True))
    if not stepwise:
        specs.append(MetricSpec(name="coverage", description="share of required nodes satisfied"))
    if setting.startswith("extraneous_"):
        specs.append(_pct("ext_used", "episodes using >= 1 extraneous tool (ExtUse/TC per case)", lower=True))
        specs.append(MetricSpec(name="ext_calls", description="extraneous tool calls per episode", higher_is_better=False))
    if setting == "unsolvable_control":
        specs = core_specs() + [_pct("refused", "False-refusal rate (FRR) on solvable twins", lower=True)]
    if setting == "efficiency":
        specs += [MetricSpec(name="cost", description="plan cost over all cases (C_all)", higher_is_better=False),
                  MetricSpec(name="cost_pass", description="plan cost over solved cases (C_pass)", higher_is_better=False),
                  MetricSpec(name="cost_ratio", description="cost / optimal cost", higher_is_better=False),
                  _pct("optimal_rate", "correct at the optimal cost")]
    if setting == "holistic":
        for key, vals, _ in BREAKDOWNS:
            for v in vals:
                specs.append(_pct(f"correct_{key}_{v}", f"CR on {key}={v}"))
                specs.append(MetricSpec(name=f"grade_{key}_{v}", description=f"Grade on {key}={v}"))
    return specs


def judge_specs(*, judged_cr: bool = False) -> list[MetricSpec]:
    """Tab. 7's statistics of the LLM judge read against the rule grader (positive = correct; §6.5),
    plus the rule grader's own CR for comparison. Recorded in every setting when grader=llm."""
    specs = [MetricSpec(name="judge_agree", description="Agreement: judge verdict == rule verdict", scale=100.0),
             MetricSpec(name="judge_precision", kind="ratio", numerator="judge_tp", denominator="judge_pos",
                        description="Precision: rule-correct among judge-correct", scale=100.0),
             MetricSpec(name="judge_recall", kind="ratio", numerator="judge_tp", denominator="rule_pos",
                        description="Recall: judge-correct among rule-correct", scale=100.0),
             MetricSpec(name="judge_f1", kind="ratio", numerator="judge_f1_num", denominator="judge_f1_den",
                        description="F1 = 2TP / (2TP + FP + FN)"),
             MetricSpec(name="judge_grade_abs_err", description="MAE between judge and rule grades",
                        higher_is_better=False),
             MetricSpec(name="judge_flag_agree", description="Err-Type: mean per-flag agreement (E1-E6)", scale=100.0),
             _pct("judge_unreadable", "answers whose judge verdict stayed unreadable after every ask (JUDGE_ASKS): "
                  "their judged values are undefined (out of n), never the rule grade", lower=True),
             MetricSpec(name="judge_reasks", higher_is_better=False,
                        description="unreadable judge replies asked again, per episode"),
             _pct("rule_correct", "CR by the rule grader")]
    if judged_cr:  # judge_validation: the judged CR next to the rule CR
        specs.append(_pct("correct", "CR by the LLM judge"))
    return specs


# ----------------------------------------------------------------------------- pure compositions (§7.2-7.6)

def mean_rows(rows: Sequence[Mapping[str, float]], weights: Sequence[float] | None = None) -> dict[str, float]:
    """Weighted mean of each key over rows (unweighted when `weights` is None)."""
    if not rows:
        return {}
    w = list(weights) if weights is not None else [1.0] * len(rows)
    keys = set(rows[0]).intersection(*rows[1:]) if len(rows) > 1 else set(rows[0])
    return {k: sum(wi * r[k] for wi, r in zip(w, rows)) / sum(w) for k in keys}


def stepwise_composite(per_horizon: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Table 1 step-wise = the unweighted mean over k in {1,2,3} of the per-horizon values (Tab. 14)."""
    return mean_rows(per_horizon)


def extraneous_composite(holistic_levels: Sequence[Mapping[str, float]],
                         stepwise_levels: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Table 1 Tool-Extraneous: each half pooled over its 5 levels, then the 1/2-1/2 mean.

    E2-H is the step-wise half's E2 and E2-S the holistic half's E2 (§7.2, §13.2)."""
    h, s = mean_rows(holistic_levels), mean_rows(stepwise_levels)
    out = {k: (h[k] + s[k]) / 2 for k in ("CR", "Grade", "E1", "E3", "E4", "E5", "E6") if k in h and k in s}
    if "E2" in s:
        out["E2-H"] = s["E2"]
    if "E2" in h:
        out["E2-S"] = h["E2"]
    return out


def extraneous_robustness(base_cr: float, level_crs: Sequence[float], ext_use: Sequence[float],
                          levels: Sequence[int] = EXT_LEVELS) -> dict[str, float]:
    """Tab. 2: CR_B, CR_E = mean over levels, Delta = CR_E - CR_B, TC = sum of ExtUse, plus the OLS slope."""
    cr_e = sum(level_crs) / len(level_crs)
    mx = sum(levels) / len(levels)
    sxx = sum((x - mx) ** 2 for x in levels)
    slope = sum((x - mx) * (y - cr_e) for x, y in zip(levels, level_crs)) / sxx if sxx else float("nan")
    return {"CR_B": base_cr, "CR_E": cr_e, "Delta": cr_e - base_cr, "TC": float(sum(ext_use)), "slope": slope}


def holistic_from_modality(rows: Mapping[str, Mapping[str, float]],
                           weights: Mapping[str, float] | None = None) -> dict[str, float]:
    """Tab. 13 rows weighted by the modality counts (673/336/100) give Tab. 1's holistic numbers."""
    weights = weights or {"Text": 673, "Image": 336, "Video": 100}
    keys = list(weights)
    return mean_rows([rows[k] for k in keys], [weights[k] for k in keys])


def holistic_e_from_bins(count_rows: Iterable[Mapping[str, float]], total: int = 1109) -> dict[str, float]:
    """Tab. 12's per-bin E counts summed over bins, divided by the number of cases, in %."""
    sums: dict[str, float] = {}
    for r in count_rows:
        for k, v in r.items():
            sums[k] = sums.get(k, 0.0) + v
    return {k: 100.0 * v / total for k, v in sums.items()}


def calibration(trr_by_type: Mapping[str, float], frr: float) -> dict[str, float]:
    """Calibration = 1/2 (TRR_macro + (1 - FRR)), rates as fractions (§7.5)."""
    trr = sum(trr_by_type.values()) / len(trr_by_type)
    return {"TRR": trr, "FRR": frr, "Calibration": 0.5 * (trr + (1.0 - frr))}


def refinement_summary(base: Sequence[float], refined: Sequence[float]) -> dict[str, float]:
    """Delta in pp, over-correction = P(refined wrong | base right), repair = P(refined right | base wrong)."""
    n = len(base)
    right = [r for b, r in zip(base, refined) if b]
    wrong = [r for b, r in zip(base, refined) if not b]
    nan = float("nan")
    return {"base": 100 * sum(base) / n, "refined": 100 * sum(refined) / n,
            "delta": 100 * (sum(refined) - sum(base)) / n,
            "over_correction": (1 - sum(right) / len(right)) if right else nan,
            "repair": (sum(wrong) / len(wrong)) if wrong else nan}


def efficiency_costs(records: Mapping[str, Mapping[str, tuple[bool, float]]]) -> dict[str, dict[str, float]]:
    """Tab. 5 costs per model from per-episode (correct, cost) records keyed by task: C_all over all
    cases, C_pass over the model's solved cases, C_com over the cases every compared model solved."""
    common = set.intersection(*[{t for t, (ok, _) in r.items() if ok} for r in records.values()]) if records else set()
    nan = float("nan")
    out = {}
    for model, r in records.items():
        costs = [c for _, c in r.values()]
        passed = [c for ok, c in r.values() if ok]
        com = [r[t][1] for t in common]
        out[model] = {"C_all": sum(costs) / len(costs) if costs else nan,
                      "C_pass": sum(passed) / len(passed) if passed else nan,
                      "C_com": sum(com) / len(com) if com else nan}
    return out


def combine_ci(values: Sequence[float], halfwidths: Sequence[float], weights: Sequence[float]) -> tuple[float, float]:
    """Point estimate and half-width of a weighted mean of independent strata."""
    tw = sum(weights)
    w = [x / tw for x in weights]
    est = sum(wi * v for wi, v in zip(w, values))
    hw = math.sqrt(sum((wi * h) ** 2 for wi, h in zip(w, halfwidths)))
    return est, hw


# ----------------------------------------------------------------------------- report tables

class _Cells:
    """Lookup of cell metrics by (model, setting, metric)."""

    def __init__(self, cells: list[dict[str, Any]]) -> None:
        self.by: dict[tuple[str, str], dict[str, Any]] = {}
        self.models: list[str] = []
        for c in cells:
            if c.get("benchmark", "apb") != "apb":
                continue
            self.by[(c["model"], c["setting"])] = c
            if c["model"] not in self.models:
                self.models.append(c["model"])

    def get(self, model: str, setting: str, metric: str) -> tuple[float, float] | None:
        """(value, CI half-width) or None."""
        c = self.by.get((model, setting))
        if c is None or metric not in c.get("metrics", {}):
            return None
        m = c["metrics"][metric]
        v = m.get("value")
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return None
        lo, hi = m.get("ci_low", v), m.get("ci_high", v)
        hw = (hi - lo) / 2 if lo is not None and hi is not None and not math.isnan(lo) and not math.isnan(hi) else 0.0
        return float(v), float(hw)

    def n(self, model: str, setting: str) -> int:
        c = self.by.get((model, setting))
        return int(c.get("n", 0)) if c else 0

    def mean_over(self, model: str, settings: Sequence[str], metric: str) -> tuple[float, float] | None:
        got = [self.get(model, s, metric) for s in settings]
        if any(g is None for g in got):
            return None
        vals = [g[0] for g in got]  # type: ignore[index]
        hws = [g[1] for g in got]  # type: ignore[index]
        return combine_ci(vals, hws, [1.0] * len(vals))


def base_key(task_id: str) -> str:
    """The base case a task is built on (task ids end in the base index): the unit that pairs a case
    across settings (the extraneous levels and n0 share bases, as do the unsolvable types and controls)."""
    return task_id.rsplit("-", 1)[-1]


Composite = tuple[float, float] | None


def _key(model: str, name: str | None) -> str | None:
    """An MLflow-safe metric name for a composite of one model: apb/<model>/<name>."""
    return None if name is None else f"apb/{re.sub(r'[^A-Za-z0-9_.-]', '_', model)}/{name}"


class _Composites:
    """§7.8 intervals for composites across cells, from per-episode records (`ReportEpisodes`);
    without them, the normal-approximation combination of the cells' own intervals."""

    def __init__(self, cs: _Cells, episodes: Any) -> None:
        self.cs = cs
        self.episodes = episodes
        self.metrics: dict[str, float] = {}

    def take(self) -> dict[str, float]:
        """The machine-readable composites computed since the last call (for `ReportTable.metrics`)."""
        out, self.metrics = self.metrics, {}
        return out

    def _stratum(self, model: str, settings: Sequence[str], metric: str) -> Stratum | None:
        """A cell's (or pooled cells') values keyed by base case, so a case's seeds move together and
        settings built on the same bases can be paired."""
        keys: list[str] = []
        values: list[float] = []
        for setting in settings:
            eps = self.episodes.cells.get((model, setting))
            if eps is None or eps.n == 0:
                return None
            for task, m in zip(eps.task_ids, eps.metrics):
                keys.append(base_key(task))
                values.append(m.get(metric, math.nan))
        return Stratum(keys, values)

    def _estimate(self, strata: list[Stratum | None], combine: Any, paired: bool, tag: str,
                  key: str | None = None) -> Composite:
        if any(st is None for st in strata):
            return None
        ep = self.episodes
        est = composite_estimate(strata, combine, paired=paired, n_resamples=ep.n_resamples,  # type: ignore[arg-type]
                                 confidence=ep.confidence, seed=stable_seed(ep.seed, tag))
        if not math.isfinite(est.value):
            return None
        if key:
            self.metrics.update({key: est.value, f"{key}_ci_low": est.ci_low, f"{key}_ci_high": est.ci_high})
        hw = (est.ci_high - est.ci_low) / 2 if math.isfinite(est.ci_low) and math.isfinite(est.ci_high) else 0.0
        return est.value, hw

    def mean_over(self, model: str, settings: Sequence[str], metric: str, key: str | None = None) -> Composite:
        """Unweighted mean of per-setting values (the step-wise mean over horizons), stratified."""
        if self.episodes is None:
            return self.cs.mean_over(model, settings, metric)
        strata = [self._stratum(model, [s], metric) for s in settings]
        return self._estimate(strata, lambda a: a.mean(axis=0), False, f"mean|{model}|{settings}|{metric}",
                              _key(model, key))

    def pooled(self, model: str, settings: Sequence[str], metric: str) -> Composite:
        """One pooled mean over several settings that share their base cases (an extraneous half)."""
        if self.episodes is None:
            return self.cs.mean_over(model, settings, metric)
        return self._estimate([self._stratum(model, settings, metric)], lambda a: a[0], False,
                              f"pooled|{model}|{settings}|{metric}")

    def halves(self, model: str, first: Sequence[str], second: Sequence[str], metric: str,
               key: str | None = None) -> Composite:
        """½·(pooled first) + ½·(pooled second), each half resampled within itself (§7.2's extraneous mean)."""
        if self.episodes is None:
            h, s = self.cs.mean_over(model, first, metric), self.cs.mean_over(model, second, metric)
            return None if h is None or s is None else combine_ci([h[0], s[0]], [h[1], s[1]], [1, 1])
        strata = [self._stratum(model, first, metric), self._stratum(model, second, metric)]
        return self._estimate(strata, lambda a: 0.5 * a[0] + 0.5 * a[1], False, f"halves|{model}|{metric}",
                              _key(model, key))

    def paired(self, model: str, strata_spec: Sequence[tuple[str, str]], combine: Any, tag: str,
               key: str | None = None) -> Composite:
        """A statistic of several settings on the same base cases, paired over base_id (§7.8)."""
        if self.episodes is None:
            return None
        strata = [self._stratum(model, [setting], metric) for setting, metric in strata_spec]
        return self._estimate(strata, combine, True, f"{model}|{tag}", _key(model, key))

    def common_cost(self, models: Sequence[str]) -> dict[str, float]:
        """C_com (Tab. 5): mean plan cost over the (case, seed)s every compared model solved."""
        if self.episodes is None:
            return {}
        records: dict[str, dict[str, tuple[bool, float]]] = {}
        for m in models:
            eps = self.episodes.cells.get((m, "efficiency"))
            if eps is None:
                continue
            records[m] = {f"{t}|{sd}": (x.get("correct") == 1.0, x.get("cost", math.nan))
                          for t, sd, x in zip(eps.task_ids, eps.seeds, eps.metrics)}
        return {m: v["C_com"] for m, v in efficiency_costs(records).items()}


def _fmt(x: tuple[float, float] | float | None, scale: float = 100.0, digits: int = 1, ci: bool = False) -> str:
    if x is None:
        return "—"
    if isinstance(x, tuple):
        v, hw = x
    else:
        v, hw = x, 0.0
    if math.isnan(v):
        return "—"
    s = f"{v * scale:.{digits}f}"
    if ci:
        s += f" ±{hw * scale:.{digits}f}"
    return s


def report_tables(cells: list[dict[str, Any]], episodes: Any = None) -> list[ReportTable]:
    """Paper-style tables (Tab. 1a/1b, 2, 4, 5, 7, 14/15, calibration, breakdowns) from cell summaries,
    with §7.8's stratified and paired intervals when `episodes` (a `ReportEpisodes`) is given."""
    cs = _Cells(cells)
    comp = _Composites(cs, episodes)
    how = "stratified bootstrap" if episodes is not None else "independent-strata combination of the cells' CIs"
    models = cs.models
    tables: list[ReportTable] = []
    sw_settings = ["stepwise_k1", "stepwise_k2", "stepwise_k3"]
    hol_ext = [f"extraneous_holistic_n{n}" for n in EXT_LEVELS]
    sw_ext = [f"extraneous_stepwise_n{n}" for n in EXT_LEVELS]

    def ext_half(model: str, metric: str) -> Composite:
        return comp.halves(model, hol_ext, sw_ext, metric, key=f"extraneous/{metric}" if metric in ("correct", "grade")
                           else None)

    rows = []
    for m in models:
        row = [m, _fmt(cs.get(m, "holistic", "correct"), ci=True), _fmt(cs.get(m, "holistic", "grade"), 1, 2)]
        row += [_fmt(cs.get(m, "holistic", f)) for f in FLAGS]
        row += [_fmt(ext_half(m, "correct"), ci=True), _fmt(ext_half(m, "grade"), 1, 2), _fmt(ext_half(m, "E1")),
                _fmt(comp.pooled(m, sw_ext, "E2")), _fmt(comp.pooled(m, hol_ext, "E2"))]
        row += [_fmt(ext_half(m, f)) for f in ("E3", "E4", "E5", "E6")]
        rows.append(row)
    tables.append(ReportTable(metrics=comp.take(), 
        title="Table 1a — Holistic and Tool-Extraneous (CR %, Grade, E1–E6 %)",
        columns=["Model", "Hol CR", "Hol Grade", *[f"Hol {f}" for f in FLAGS], "Ext CR", "Ext Grade", "Ext E1",
                 "Ext E2-H", "Ext E2-S", "Ext E3", "Ext E4", "Ext E5", "Ext E6"],
        rows=rows,
        note="Ext = ½(holistic half pooled over n_e∈{2..10} + step-wise half); E2-H is the step-wise half's E2, "
             "E2-S the holistic half's (§7.2). ± = CI half-width (composites: " + how + ")."))

    rows = []
    for m in models:
        row = [m, _fmt(comp.mean_over(m, sw_settings, "correct", key="stepwise/correct"), ci=True),
               _fmt(comp.mean_over(m, sw_settings, "grade", key="stepwise/grade"), 1, 2)]
        row += [_fmt(comp.mean_over(m, sw_settings, f)) for f in FLAGS]
        row += [_fmt(cs.get(m, "broken", c)) for c in ("replace", "alter", "retry", "refuse", "other")]
        row += [_fmt(cs.get(m, f"unsolvable_{u}", "pass"), digits=0) for u in UNSOLVABLE_TYPES]
        rows.append(row)
    tables.append(ReportTable(metrics=comp.take(), 
        title="Table 1b — Step-wise, Tool-Broken (%), Unsolvable refusal (%)",
        columns=["Model", "SW CR", "SW Grade", *[f"SW {f}" for f in FLAGS], "Rp", "Al", "Rt", "Rf", "Ot",
                 "Conf", "Info", "Tool", "Vis"],
        rows=rows, note="Step-wise = unweighted mean over horizons k=1,2,3 (Tab. 14); ± by " + how + "."))

    rows = []
    for m in models:
        row = [m]
        for base, levels in (("extraneous_holistic_n0", hol_ext), ("extraneous_stepwise_n0", sw_ext)):
            crs = [cs.get(m, s, "correct") for s in levels]
            uses = [cs.get(m, s, "ext_used") for s in levels]
            b = cs.get(m, base, "correct")
            if b is None or any(x is None for x in crs) or any(x is None for x in uses):
                row += ["—"] * 4
                continue
            tc = [u[0] * cs.n(m, s) for u, s in zip(uses, levels)]  # type: ignore[index]
            r = extraneous_robustness(b[0], [c[0] for c in crs], tc)  # type: ignore[index]
            delta = comp.paired(m, [(base, "correct"), *[(s, "correct") for s in levels]],
                                lambda a: a[1:].mean(axis=0) - a[0], f"delta|{base}",
                                key=f"{base.rsplit('_', 1)[0]}/delta")
            shown = f"{100 * r['Delta']:+.1f}" + (f" ±{100 * delta[1]:.1f}" if delta is not None else "")
            row += [f"{r['TC']:.0f}", _fmt(r["CR_B"]), _fmt(r["CR_E"]), shown]
        rows.append(row)
    tables.append(ReportTable(metrics=comp.take(), title="Table 2 — Impact of extraneous tools",
                              columns=["Model", "Hol TC", "Hol CR_B", "Hol CR_E", "Hol Δ", "SW TC", "SW CR_B",
                                       "SW CR_E", "SW Δ"], rows=rows,
                              note="CR_B on the same 150 bases without distractors; TC counts cases with ≥1 distractor use; "
                                   "± on Δ by a paired bootstrap over base cases (§7.8)."))

    rows = []
    for m in models:
        trr = {u: cs.get(m, f"unsolvable_{u}", "pass") for u in UNSOLVABLE_TYPES}
        frr = cs.get(m, "unsolvable_control", "refused")
        if any(v is None for v in trr.values()) or frr is None:
            continue
        cal = calibration({u: v[0] for u, v in trr.items()}, frr[0])  # type: ignore[index]
        spec = [*[(f"unsolvable_{u}", "pass") for u in UNSOLVABLE_TYPES], ("unsolvable_control", "refused")]
        gap = comp.paired(m, spec, lambda a: a[:4].mean(axis=0) - a[4], "trr-frr", key="refusal/trr_minus_frr")
        cal_ci = comp.paired(m, spec, lambda a: 0.5 * (a[:4].mean(axis=0) + 1.0 - a[4]), "calibration",
                             key="refusal/calibration")
        rows.append([m, *[_fmt(trr[u]) for u in UNSOLVABLE_TYPES], _fmt(cal["TRR"]), _fmt(frr),
                     _fmt(gap if gap is not None else cal["TRR"] - cal["FRR"], ci=gap is not None),
                     _fmt(cal_ci if cal_ci is not None else cal["Calibration"], ci=cal_ci is not None),
                     _fmt(cs.get(m, "holistic", "false_refusal"))])
    tables.append(ReportTable(metrics=comp.take(), title="Refusal calibration (%)",
                              columns=["Model", "Conf", "Info", "Tool", "Vis", "TRR", "FRR", "TRR−FRR", "Calibration",
                                       "Hol false refusal"], rows=rows,
                              note="FRR on the 100 solvable twins under the same prompt; Calibration = ½(TRR + 1 − FRR); "
                                   "± by a paired bootstrap over base cases (§7.8)."))

    rows = []
    for m in models:
        twins = {u: cs.get(m, f"unsolvable_{u}", "refused") for u in UNSOLVABLE_TYPES}
        false_recovery = cs.get(m, "broken", "false_recovery")
        if false_recovery is None and all(v is None for v in twins.values()):
            continue  # the paper's layout (twins: false), or no twinned cell run
        row = [m]
        for u in UNSOLVABLE_TYPES:
            row += [_fmt(cs.get(m, f"unsolvable_{u}", "correct"), ci=True), _fmt(twins[u])]
        rows.append(row + [_fmt(cs.get(m, "broken", "correct"), ci=True), _fmt(false_recovery)])
    if rows:
        tables.append(ReportTable(
            title="Cases beside their twins (correct %)",
            columns=["Model", "Conf", "Conf FRR", "Info", "Info FRR", "Tool", "Tool FRR", "Vis", "Vis FRR",
                     "Broken", "Broken false recovery"], rows=rows,
            note="Each Unsolvable case beside its solvable twin, each Tool-Broken case beside its twin whose call "
                 "succeeds (option twins): correct is a refusal of the case or a correct plan for the twin, "
                 "Replace/Alter on the case or the right next step on the twin. Refusing everything, or switching "
                 "tools without reading the error, earns 50 at most. FRR: the twins refused; false recovery: the "
                 "twins' succeeded tool, its replacement or a look-alike called."))

    rows = []
    for m in models:
        for mode in REFINE_MODES:
            s = f"refine_{mode}"
            if (m, s) not in cs.by:
                continue
            label = {"self_plus": "Self_R+", "critic_plus": "Critic_R+", "self_minus": "Self_R-",
                     "critic_minus": "Critic_R-"}[mode]
            row = [m, label]
            for h in ("hol", "sw"):
                row += [_fmt(cs.get(m, s, f"{h}_base_cr"), digits=2), _fmt(cs.get(m, s, f"{h}_refined_cr"), digits=2),
                        _fmt(cs.get(m, s, f"{h}_delta"), digits=2, ci=True),
                        _fmt(cs.get(m, s, f"{h}_over_correction")), _fmt(cs.get(m, s, f"{h}_repair"))]
            rows.append(row)
    tables.append(ReportTable(metrics=comp.take(), title="Table 4 — Inference-time refinement (CR %)",
                              columns=["Model", "Method", "Hol Base", "Hol Refined", "Hol Δ", "Hol over-corr.",
                                       "Hol repair", "SW Base", "SW Refined", "SW Δ", "SW over-corr.", "SW repair"],
                              rows=rows, note="Δ is paired within each episode (initial vs refined answer)."))

    rows = []
    c_com = comp.common_cost(models)
    comp.metrics.update({_key(m, "efficiency/c_com"): v for m, v in c_com.items() if math.isfinite(v)})
    for m in models:
        if (m, "efficiency") not in cs.by:
            continue
        rows.append([m, _fmt(cs.get(m, "efficiency", "correct")), _fmt(cs.get(m, "efficiency", "grade"), 1, 3),
                     _fmt(cs.get(m, "efficiency", "cost"), 1, 2), _fmt(cs.get(m, "efficiency", "cost_pass"), 1, 2),
                     _fmt(c_com.get(m), 1, 2), _fmt(cs.get(m, "efficiency", "cost_ratio"), 1, 3),
                     _fmt(cs.get(m, "efficiency", "optimal_rate"))])
    tables.append(ReportTable(metrics=comp.take(), title="Table 5 — Efficiency-aware planning",
                              columns=["Model", "CR", "Grade", "C_all", "C_pass", "C_com", "cost/optimal", "optimal %"],
                              rows=rows, note="C_com: mean cost over the cases every compared model solved "
                                              "(— when there is no such case, or no per-episode records)."))

    rows = []
    for m in models:
        for label, s in (("1-step", "stepwise_k1"), ("2-step", "stepwise_k2"), ("3-step", "stepwise_k3"),
                         ("Early", "stepwise_stage_early"), ("Middle", "stepwise_k1"), ("Late", "stepwise_stage_late")):
            if (m, s) not in cs.by:
                continue
            rows.append([m, label, _fmt(cs.get(m, s, "correct"), digits=2), _fmt(cs.get(m, s, "grade"), 1, 4),
                         *[_fmt(cs.get(m, s, f), digits=2) for f in FLAGS]])
    tables.append(ReportTable(metrics=comp.take(), title="Tables 14/15 — Step-wise by horizon and stage",
                              columns=["Model", "Horizon/Stage", "CR", "Score", *[f"{f} %" for f in FLAGS]], rows=rows))

    rows = []
    for m in models:
        for s in [x for x in ("judge_validation", "holistic") if (m, x) in cs.by]:
            if cs.get(m, s, "judge_agree") is None:
                continue
            agree = cs.get(m, s, "judge_agree")
            flag = " ⚠" if agree is not None and agree[0] < AGREEMENT_TARGET else ""
            rows.append([m, s, cs.n(m, s), _fmt(agree, ci=True) + flag,
                         _fmt(cs.get(m, s, "judge_precision")), _fmt(cs.get(m, s, "judge_recall")),
                         _fmt(cs.get(m, s, "judge_f1"), 1, 3), _fmt(cs.get(m, s, "judge_grade_abs_err"), 1, 3),
                         _fmt(cs.get(m, s, "judge_flag_agree")), _fmt(cs.get(m, s, "judge_unreadable")),
                         _fmt(cs.get(m, s, "rule_correct")), _fmt(cs.get(m, s, "correct"))])
    if rows:
        tables.append(ReportTable(metrics=comp.take(), 
            title="Table 7 analogue — LLM judge against the rule grader",
            columns=["Model graded", "Cases", "n", "Agreement %", "Precision %", "Recall %", "F1", "MAE", "Err-Type %",
                     "Unreadable %", "Rule CR", "Judge CR"],
            rows=rows, note="Positive = correct; the rule grader plays the paper's human annotators. "
                            "⚠: agreement below §12.23's 85% target (the paper's judges: 78.6–92.2%); a warning, "
                            "not a failure."))

    rows = []
    for m in models:
        for key, vals, label in BREAKDOWNS:
            for v in vals:
                cr = cs.get(m, "holistic", f"correct_{key}_{v}")
                if cr is None:
                    continue
                rows.append([m, label, v, _fmt(cr),
                             _fmt(cs.get(m, "holistic", f"grade_{key}_{v}"), 1, 2)])
    tables.append(ReportTable(metrics=comp.take(), title="Holistic breakdowns (Tabs. 12–13 analogues)",
                              columns=["Model", "By", "Group", "CR", "Grade"], rows=rows))
    return tables

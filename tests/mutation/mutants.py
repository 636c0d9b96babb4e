"""The declared mutants: one realistic one-line bug each, in a function that decides a metric, a grade,
a unit id, a dedup, an interval or a blame, and the tests that must fail on it.

`original` must occur exactly once in `function` of `file` (the check fails otherwise, so this list
stays in step with the code); `tests` are pytest arguments, kept narrow so the whole check stays within
CI's time. Run with `python -m tests.mutation.run` (see there).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    function: str
    original: str
    mutated: str
    tests: tuple[str, ...]
    why: str


IDENTITY = "toolsweep/cluster/identity.py"
STATS = "toolsweep/evaluator/stats.py"
SUMMARY = "toolsweep/evaluator/summary.py"
RUNDIR = "toolsweep/evaluator/rundir.py"
FAILURES = "toolsweep/evaluator/failures.py"
CLIENT = "toolsweep/models/client.py"
POLICY = "toolsweep/models/policy.py"
EXPLOITS = "toolsweep/evaluator/exploits.py"
TOOLMAZE = "toolsweep/benchmarks/toolmaze/metrics.py"
APB_GRADER = "toolsweep/benchmarks/apb/grader.py"
APB_METRICS = "toolsweep/benchmarks/apb/metrics.py"
APB_ENV = "toolsweep/benchmarks/apb/environment.py"
DRIVER = "toolsweep/cluster/driver.py"
PLANBENCH_ENV = "toolsweep/benchmarks/planbench_xl/environment.py"
PLANBENCH = "toolsweep/benchmarks/planbench_xl/metrics.py"
TRAJECT = "toolsweep/benchmarks/traject_bench/metrics.py"
TOOLMAZE_TABLES = "toolsweep/benchmarks/toolmaze/__init__.py"
TRACES = "toolsweep/actors/traces.py"
FLOOR = "toolsweep/evaluator/floor.py"
COMPLETENESS = "toolsweep/evaluator/completeness.py"

T_IDENTITY = ("tests/cluster/test_unit_identity.py",)
T_STATS = ("tests/evaluator/test_stats.py", "tests/evaluator/test_paired_difference.py", "tests/evaluator/test_stats_edges.py")
T_COMPOSITE = ("tests/evaluator/test_composite_bootstrap.py",)
T_SUMMARY = ("tests/evaluator/test_summary.py", "tests/evaluator/test_cell_columns.py")
T_RUNDIR = ("tests/evaluator/test_rundir_dedup.py", "tests/evaluator/test_rundir.py")
T_FAILURES = ("tests/models/test_models_failure_classes.py", "tests/models/test_models_client.py")
T_BLAME = ("tests/cluster/test_failure_matrix.py::test_a_400_after_the_model_has_spoken_is_the_agents_error",)
T_EXPLOITS = ("tests/evaluator/test_exploits.py",)
T_TOOLMAZE = ("tests/benchmarks/toolmaze/test_toolmaze_metric_edges.py",)
T_TOOLMAZE_MET = (
    "tests/benchmarks/toolmaze/test_toolmaze_exploits.py::test_a_retry_counts_from_the_step_after_the_fault_not_the_same_step",
    "tests/benchmarks/toolmaze/test_toolmaze_exploits.py::test_a_switch_counts_from_the_step_after_the_fault_at_any_later_point",
)
T_APB = ("tests/benchmarks/apb/test_apb_grade_rubric.py", "tests/benchmarks/apb/test_apb_grade_boundaries.py")
T_APB_TABLES = ("tests/benchmarks/apb/test_apb_aggregation.py",)
T_APB_JUDGE = ("tests/benchmarks/apb/test_apb_judge.py",)
PB = "tests/benchmarks/planbench_xl/test_planbench_xl_episodes.py::"
T_PLANBENCH_GROUNDING = (PB + "test_a_guessed_value_is_never_used_or_credited", PB + "test_grounding_rules")
T_PLANBENCH_TARGET = (PB + "test_fig11_default_payment_method_trap_is_not_a_correct_answer",)
T_PLANBENCH_METRICS = (PB + "test_worked_example_metrics", PB + "test_oracle_solves_all_327_tasks")
T_TRAJECT = ("tests/benchmarks/traject_bench/test_traject_bench_metrics.py",)
T_FLOOR = ("tests/evaluator/test_floor.py",)

MUTANTS: list[Mutant] = [
    # ------------------------------------------------------------------ unit ids
    Mutant("identity-helpers-ignored", IDENTITY, "unit_contexts",
           '"helpers": helpers}', '"helpers": {}}', T_IDENTITY,
           "the unit id ignores helper (judge) models: a new judge would reuse episodes the old one graded"),
    Mutant("identity-operational-fields-kept", IDENTITY, "model_identity",
           "exclude=set(OPERATIONAL_FIELDS | HELPER_FIELDS)", "exclude=set(HELPER_FIELDS)", T_IDENTITY,
           "operational settings (max_in_flight, base_url) enter the id: tuning a server reruns everything"),
    Mutant("identity-engine-args-filter-flipped", IDENTITY, "model_identity",
           "if k not in OPERATIONAL_ENGINE_ARGS", "if k in OPERATIONAL_ENGINE_ARGS", T_IDENTITY,
           "the engine args kept are the operational ones: a changed max_model_len reuses episodes"),
    Mutant("identity-benchmark-fingerprint-dropped", IDENTITY, "unit_contexts",
           '"benchmark": fingerprints.get(name)', '"benchmark": None', T_IDENTITY,
           "the benchmark's content does not enter the id: new tasks data would reuse old episodes"),
    Mutant("identity-model-dropped", IDENTITY, "unit_contexts",
           '{"model": ident,', '{"model": None,', T_IDENTITY,
           "the model's own sampling-relevant config does not enter the id"),
    # ------------------------------------------------------------------ intervals and paired differences
    Mutant("paired-entered-from-a-only", STATS, "paired_difference",
           "entered = entered_a[ia] & entered_b[ib]", "entered = entered_a[ia]", T_STATS,
           "a cell enters the paired difference when A defines the metric, whatever B did"),
    Mutant("paired-entered-from-b-only", STATS, "paired_difference",
           "entered = entered_a[ia] & entered_b[ib]", "entered = entered_b[ib]", T_STATS,
           "a cell enters the paired difference when B defines the metric, whatever A did"),
    Mutant("paired-operands-swapped", STATS, "paired_difference",
           "return stat_a(t, d) - stat_b(t, d)", "return stat_b(t, d) - stat_a(t, d)", T_STATS,
           "B minus A reported as A minus B"),
    Mutant("paired-cells-union", STATS, "paired_difference",
           "sorted(index_a.keys() & index_b.keys())", "sorted(index_a.keys() | index_b.keys())", T_STATS,
           "cells only one model ran are paired"),
    Mutant("interval-alpha-not-halved", STATS, "_percentile_interval",
           "[100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)]", "[100.0 * alpha, 100.0 * (1.0 - alpha)]",
           T_STATS, "a 90% interval labelled 95%"),
    Mutant("interval-undefined-resamples-kept", STATS, "_percentile_interval",
           "finite = stats[np.isfinite(stats)]", "finite = stats", T_STATS,
           "resamples where a ratio is undefined poison the interval"),
    Mutant("confidence-bounds-inclusive", STATS, "_check_options",
           "if not 0.0 < confidence < 1.0:", "if not 0.0 <= confidence <= 1.0:", T_STATS,
           "confidence 1.0 or 0.0 accepted (an interval of everything or of nothing)"),
    Mutant("entered-any-key", STATS, "_spec_columns",
           "np.logical_and.reduce(", "np.logical_or.reduce(", T_STATS,
           "an episode enters a ratio when one of its keys is defined"),
    Mutant("mean-counts-excluded-episodes", STATS, "_metric_statistic",
           "if entered.all():", "if entered.any():", T_STATS,
           "a mean divides by every drawn episode, also those where the metric is undefined"),
    Mutant("ratio-undefined-is-zero", STATS, "_ratio",
           "num / np.where(den != 0, den, 1.0), np.nan)", "num / np.where(den != 0, den, 1.0), 0.0)",
           T_STATS, "a ratio with a zero denominator reads as 0 instead of undefined"),
    Mutant("composite-paired-draws-independent", STATS, "composite_estimate",
           "idx = shared if paired else rng.integers", "idx = rng.integers", T_COMPOSITE,
           "a paired composite resamples each stratum on its own"),
    Mutant("composite-undefined-counted", STATS, "_cluster_totals",
           "np.add.at(counts, idx[defined], 1.0)", "np.add.at(counts, idx, 1.0)", T_COMPOSITE,
           "undefined values count in a composite's denominator"),
    # ------------------------------------------------------------------ cell summaries
    Mutant("summary-unscored-enter-metrics", SUMMARY, "CellEpisodes.add",
           "return  # infrastructure failures never enter a metric", "pass", T_SUMMARY,
           "an infrastructure failure enters the metrics as an episode"),
    Mutant("summary-extend-unscored-any-to-all", SUMMARY, "CellEpisodes.extend",
           "if any(t in _UNSCORED for t in terminations):", "if all(t in _UNSCORED for t in terminations):",
           T_SUMMARY, "read from a part, infrastructure failures enter the metrics unless every row is one"),
    Mutant("summary-paired-one-empty-side", SUMMARY, "CellTable.paired",
           "if ea.n == 0 or eb.n == 0:", "if ea.n == 0 and eb.n == 0:", T_SUMMARY + T_STATS,
           "a model with no scored episode is compared with one"),
    # ------------------------------------------------------------------ the no-LLM floor and partial cells
    Mutant("floor-zero-difference-above", FLOOR, "judge",
           "if lo > 0:", "if lo >= 0:", T_FLOOR,
           "the floor's own policy under another name (model − floor = 0 on every pair) is judged above it"),
    Mutant("floor-difference-sign", FLOOR, "_difference",
           'if row.get("model_a") != model:', 'if row.get("model_a") == model:', T_FLOOR,
           "model − floor read from a paired row with the floor as model A keeps the row's sign"),
    Mutant("floor-direction-ignored", FLOOR, "judge",
           "return ABOVE if higher_is_better else BELOW", "return ABOVE", T_FLOOR,
           "a model with more errors than the floor is judged above it"),
    Mutant("partial-cell-counted-whole", COMPLETENESS, "attach_completeness",
           "complete=done >= expected", "complete=done > 0", T_FLOOR,
           "a cell with some units given up or not run yet is reported whole"),
    # ------------------------------------------------------------------ dedup in the run directory
    Mutant("rundir-dedup-across-parts-dropped", RUNDIR, "RunDirectory.iter_tables",
           "keep = first_occurrences(digests) & ~seen.contains(digests)", "keep = first_occurrences(digests)",
           T_RUNDIR, "a unit recorded in two parts is read twice"),
    Mutant("rundir-dedup-within-part-dropped", RUNDIR, "RunDirectory.iter_tables",
           "keep = first_occurrences(digests) & ~seen.contains(digests)", "keep = ~seen.contains(digests)",
           T_RUNDIR, "a unit recorded twice in one part (or log) is read twice"),
    Mutant("writer-once-only-guard-dropped", RUNDIR, "EpisodeWriter.append",
           "if recorded or result.unit_id in self._in_log:", "if recorded:", T_RUNDIR,
           "the writer records a unit twice within its write-ahead log"),
    Mutant("writer-parts-guard-dropped", RUNDIR, "EpisodeWriter.append",
           "if recorded or result.unit_id in self._in_log:", "if result.unit_id in self._in_log:", T_RUNDIR,
           "the writer records again a unit already in a part"),
    Mutant("writer-fold-dedup-dropped", RUNDIR, "EpisodeWriter._fold_logs",
           "keep = first_occurrences(digests) & ~self._in_parts.contains(digests)",
           "keep = first_occurrences(digests)", T_RUNDIR,
           "a killed writer's log is folded into a part with units already in the parts"),
    # ------------------------------------------------------------------ failure classification and blame
    Mutant("failures-400-retried", FAILURES, "classify_status",
           "if 400 <= status < 500:", "if 400 < status < 500:", T_FAILURES,
           "a 400 is classified as a server error and retried"),
    Mutant("failures-500-not-retried", FAILURES, "classify_status",
           "if 400 <= status < 500:", "if 400 <= status <= 500:", T_FAILURES,
           "a 500 is classified as the request's fault and never retried"),
    Mutant("failures-403-retried", FAILURES, "classify_status",
           "if status in (401, 403):", "if status == 401:", T_FAILURES,
           "a 403 (bad key) is not a configuration error: every unit fails one by one"),
    Mutant("failures-context-overflow-is-request", FAILURES, "classify_status",
           'return "context" if _CONTEXT.search(body) else "request"', 'return "request"', T_FAILURES,
           "a context overflow is treated as a rejected request, not the agent's scored overflow"),
    Mutant("client-404-retried", CLIENT, "OpenAIClient._post",
           "if is_config(cause):", 'if cause == "auth":', T_FAILURES,
           "an unknown model (404) is retried as infrastructure instead of stopping the run"),
    Mutant("client-request-error-retried", CLIENT, "OpenAIClient._post",
           'if cause == "request":', 'if cause == "request" and status != 400:', T_FAILURES,
           "a 400 rejected request is retried"),
    Mutant("blame-first-request-400-on-agent", POLICY, "LLMPolicy.act",
           'if any(m.role == "assistant" for m in messages):', "if messages:", T_BLAME,
           "a 400 on the first request (nothing of the model's in it) is scored as the agent's error"),
    # ------------------------------------------------------------------ exploit bounds
    Mutant("exploit-ceiling-flipped", EXPLOITS, "bound_violations",
           "if math.isfinite(v) and v > ceiling + 1e-12:", "if math.isfinite(v) and v < ceiling + 1e-12:",
           T_EXPLOITS, "an exploit under its ceiling is reported, one over it passes"),
    Mutant("exploit-floor-dropped", EXPLOITS, "bound_violations",
           "if math.isfinite(v) and v < floor - 1e-12:", "if False:", T_EXPLOITS,
           "floors are never checked"),
    Mutant("exploit-ratio-as-mean", EXPLOITS, "aggregate",
           'if spec.kind == "ratio":', 'if spec.kind == "ratio_of_means":', T_EXPLOITS,
           "a ratio metric aggregated as a mean of its own key"),
    # ------------------------------------------------------------------ ToolMaze
    Mutant("toolmaze-side-effects-ignored", TOOLMAZE, "judge",
           "success = (bool(complete) and not propagated and actions_ok) or aborted_ok",
           "success = (bool(complete) and not propagated) or aborted_ok", T_TOOLMAZE,
           "success without 'no wrong side effect': a junk Action call on top of the oracle path passes"),
    Mutant("toolmaze-propagation-ignored", TOOLMAZE, "judge",
           "success = (bool(complete) and not propagated and actions_ok) or aborted_ok",
           "success = (bool(complete) and actions_ok) or aborted_ok", T_TOOLMAZE,
           "a corrupted value passed on downstream still counts as success"),
    Mutant("toolmaze-recovery-same-step", TOOLMAZE, "met_then",
           "return call.step > fault.step", "return call.step >= fault.step", T_TOOLMAZE_MET,
           "a call made in the fault's own step (before the agent saw it) counts as handling it"),
    Mutant("toolmaze-recovery-next-step-missed", TOOLMAZE, "met_then",
           "return call.step > fault.step", "return call.step > fault.step + 1", T_TOOLMAZE_MET,
           "a retry or switch in the step right after the fault is not credited"),
    Mutant("toolmaze-cost-off-by-one", TOOLMAZE, "judge",
           "c = sum(1 for x in calls if x.idx >= first)", "c = sum(1 for x in calls if x.idx > first)",
           T_TOOLMAZE, "the recovery cost leaves out the perturbed call itself"),
    Mutant("toolmaze-prr-unexposed-as-failure", TOOLMAZE, "Verdict.metrics",
           '"prr": float(self.recovered) if self.exposed else NAN', '"prr": float(self.recovered)',
           T_TOOLMAZE, "an episode never exposed to a fault counts as a failed recovery"),
    # ------------------------------------------------------------------ APB
    Mutant("apb-holistic-0.7-exclusive", APB_GRADER, "holistic_grade",
           'if "E1" not in flags and c >= 0.7:', 'if "E1" not in flags and c > 0.7:', T_APB,
           "coverage exactly 0.7 graded 0.4 instead of 0.6"),
    Mutant("apb-holistic-0.9-exclusive", APB_GRADER, "holistic_grade",
           "u == 1 and c >= 0.9 and goal_satisfied", "u == 1 and c > 0.9 and goal_satisfied", T_APB,
           "coverage exactly 0.9 with one offending item graded 0.6 instead of 0.8"),
    Mutant("apb-holistic-0.4-exclusive", APB_GRADER, "holistic_grade",
           'if "E1" not in flags and c >= 0.4:', 'if "E1" not in flags and c > 0.4:', T_APB,
           "coverage exactly 0.4 graded 0.2 instead of 0.4"),
    Mutant("apb-holistic-zero-coverage-credit", APB_GRADER, "holistic_grade",
           "if c > 0:", "if c >= 0:", T_APB, "zero coverage earns 0.2"),
    Mutant("apb-holistic-one-item-or-fewer", APB_GRADER, "holistic_grade",
           "u == 1 and c >= 0.9", "u <= 1 and c >= 0.9", T_APB,
           "0.8 given with no offending item identified"),
    Mutant("apb-holistic-e6-ignored", APB_GRADER, "holistic_grade",
           '"E1" not in flags and "E6" not in flags and u == 1', '"E1" not in flags and u == 1', T_APB,
           "a hallucinated-argument flag (E6) still reaches 0.8"),
    Mutant("apb-stepwise-two-majors", APB_GRADER, "stepwise_grade",
           "if len(major) >= 2:", "if len(major) > 2:", T_APB, "two major errors graded 0.2 instead of 0"),
    Mutant("apb-stepwise-trivial-only-ignored", APB_GRADER, "stepwise_grade",
           'if flags == {"E5"} and trivial_only:', 'if flags == {"E5"}:', T_APB,
           "a non-trivial E5 graded 0.8"),
    Mutant("apb-calibration-frr-sign", APB_METRICS, "calibration",
           "0.5 * (trr + (1.0 - frr))", "0.5 * (trr + frr)", T_APB_TABLES,
           "false refusals raise calibration"),
    Mutant("apb-extraneous-e2-halves-swapped", APB_METRICS, "extraneous_composite",
           'out["E2-H"] = s["E2"]', 'out["E2-H"] = h["E2"]', T_APB_TABLES,
           "E2-H taken from the holistic half (the paper's labels read literally, against its data)"),
    Mutant("apb-robustness-delta-swapped", APB_METRICS, "extraneous_robustness",
           '"Delta": cr_e - base_cr', '"Delta": base_cr - cr_e', T_APB_TABLES,
           "the extraneous-tools drop reported with the wrong sign"),
    Mutant("apb-over-correction-inverted", APB_METRICS, "refinement_summary",
           "(1 - sum(right) / len(right))", "(sum(right) / len(right))", T_APB_TABLES,
           "over-correction reads as the share of right answers kept right"),
    Mutant("apb-common-cost-over-all-cases", APB_METRICS, "efficiency_costs",
           "{t for t, (ok, _) in r.items() if ok}", "{t for t, (ok, _) in r.items()}", T_APB_TABLES,
           "C_com averaged over every case instead of the cases every model solved"),
    Mutant("apb-judged-efficiency-rule-verdict", APB_ENV, "APBEnv._judged_efficiency",
           "solved = correct == 1.0", "solved = m[\"correct\"] == 1.0", T_APB_JUDGE,
           "C_pass and the optimal rate follow the rule grade while the judge grades"),
    Mutant("blame-timeout-as-infra-error", DRIVER, "failure_breakdown",
           "r.termination == TerminationReason.TIMEOUT or ", "", ("tests/cluster/test_failure_breakdown.py",),
           "units given up on the episode guard are reported as infrastructure errors"),
    # ------------------------------------------------------------------ PlanBench-XL
    Mutant("planbench-credit-without-grounding", PLANBENCH_ENV, "PlanBenchEnv._answer",
           "correct = match and reached and grounded", "correct = match and reached", T_PLANBENCH_GROUNDING,
           "a guessed gold value (never obtained from a trusted call) earns credit"),
    # (`reached` is implied by `grounded` since a value counts only under the datatype it was obtained as:
    # dropping it from `correct` is an equivalent mutant; the failure category still reads it)
    Mutant("planbench-unreached-called-wrong-answer", PLANBENCH_ENV, "PlanBenchEnv._answer",
           '"final_answer_wrong" if reached else', '"final_answer_wrong" if not reached else', T_PLANBENCH_TARGET,
           "an answer given without reaching the target datatype is filed as a wrong answer (and the reverse)"),
    Mutant("planbench-egt-precision-denominator", PLANBENCH, "episode_metrics",
           "len(ex & task.d_gt) / len(ex)", "len(ex & task.d_gt) / len(task.d_gt)", T_PLANBENCH_METRICS,
           "EGT precision divided by the ground truth's size (a recall)"),
    # ------------------------------------------------------------------ TRAJECT-Bench
    Mutant("traject-order-ignored", TRAJECT, "score_episode",
           "em = float(pred_names == gold_names)", "em = float(p_mult == g_mult)", T_TRAJECT,
           "a sequential task's exact match ignores the order of the calls"),
    Mutant("traject-inclusion-union", TRAJECT, "score_episode",
           "inclusion = sum((p_mult & g_mult).values()) / max(1, n_gold)",
           "inclusion = sum((p_mult | g_mult).values()) / max(1, n_gold)", T_TRAJECT,
           "extra calls raise inclusion"),
    Mutant("traject-precision-over-gold", TRAJECT, "score_episode",
           "sum(1 for n in pred_names if n in gold_set) / len(pred_names)",
           "sum(1 for n in pred_names if n in gold_set) / max(1, n_gold)", T_TRAJECT,
           "tool precision divided by the gold count: extra calls cost nothing"),
    Mutant("traject-dependency-order-ignored", TRAJECT, "_dep_sat",
           "if pi is None or pj is None or not pi < pj:", "if pi is None or pj is None:", T_TRAJECT,
           "a dependency satisfied by a call made before its source counts"),
    # ------------------------------------------------------------------ tables and the MLflow record
    Mutant("toolmaze-average-partial-only-if-all", TOOLMAZE_TABLES, "_partial",
           "return any(is_partial(cells.get((model, s)) or {}) for s in settings)",
           "return all(is_partial(cells.get((model, s)) or {}) for s in settings)",
           ("tests/benchmarks/toolmaze/test_toolmaze_partial_tables.py",),
           "an average over C1-C4 is printed plain while one of its cells is partial"),
    Mutant("trace-id-random", TRACES, "trace_ids",
           'seed = hashlib.sha256(f"{run_id}|{unit_id}".encode()).hexdigest()',
           'seed = hashlib.sha256(f"{run_id}|{unit_id}|{time.time_ns()}".encode()).hexdigest()',
           ("tests/cluster/test_mlflow_repair.py::test_a_trace_written_twice_is_one_trace_with_its_spans",),
           "a trace written again after an interrupt gets a new id: a half-written export is never completed"),
]

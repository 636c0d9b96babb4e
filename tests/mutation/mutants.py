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
TOOLMAZE_FAULTS = "toolsweep/benchmarks/toolmaze/perturbation.py"
ADVERSARY = "toolsweep/evaluator/adversary.py"
APB_GRADER = "toolsweep/benchmarks/apb/grader.py"
T_APB_FIELD_REFUSAL = ("tests/benchmarks/apb/test_apb_judged_rules.py::test_a_refusal_inside_a_field_of_the_plan_is_a_refusal",)
APB_METRICS = "toolsweep/benchmarks/apb/metrics.py"
APB_ENV = "toolsweep/benchmarks/apb/environment.py"
APB_GEN = "toolsweep/benchmarks/apb/generator.py"
RECORD = "toolsweep/cluster/record.py"
PLANBENCH_ENV = "toolsweep/benchmarks/planbench_xl/environment.py"
PLANBENCH = "toolsweep/benchmarks/planbench_xl/metrics.py"
TRAJECT = "toolsweep/benchmarks/traject_bench/metrics.py"
TOOLMAZE_TABLES = "toolsweep/benchmarks/toolmaze/__init__.py"
TRACES = "toolsweep/actors/traces.py"
FLOOR = "toolsweep/evaluator/floor.py"
DESIGN = "toolsweep/evaluator/design.py"
HEALTH = "toolsweep/cluster/endpoint_health.py"
PLACEMENT = "toolsweep/cluster/placement.py"
TYPES = "toolsweep/evaluator/types.py"
COMPLETENESS = "toolsweep/evaluator/completeness.py"
ADAPTIVE = "toolsweep/evaluator/adaptive.py"
RATE_LIMIT = "toolsweep/models/rate_limit.py"
VERDICTS = "toolsweep/evaluator/verdicts.py"
JUDGING = "toolsweep/evaluator/judging.py"
VERDICT_MODEL = "toolsweep/evaluator/verdict_model.py"
TRAJECT_ENV = "toolsweep/benchmarks/traject_bench/environment.py"
TOOLMAZE_ENV = "toolsweep/benchmarks/toolmaze/environment.py"
TOOLMAZE_SEARCH = "toolsweep/benchmarks/toolmaze/search.py"
TOOLMAZE_TASKS = "toolsweep/benchmarks/toolmaze/tasks.py"
TIE_BREAKS = "toolsweep/evaluator/tie_breaks.py"
T_TOOLMAZE_MEMORY = (
    "tests/benchmarks/toolmaze/test_toolmaze_search.py::test_memory_passes_over_a_tool_that_only_failed_and_tries_one_that_answered_first",
    "tests/benchmarks/toolmaze/test_toolmaze_search.py::test_memory_is_learned_on_the_tuning_half_and_each_held_out_episode_starts_from_it",
)
SIZING = "toolsweep/models/sizing.py"
TRAJECT_JUDGE_PARSE = "toolsweep/benchmarks/traject_bench/judge.py"

T_IDENTITY = ("tests/cluster/test_unit_identity.py",)
T_TEXT_VERDICTS = ("tests/verdicts/test_verdict_corpora.py",)
T_TRAJECT_JUDGE = ("tests/benchmarks/traject_bench/test_traject_bench_judge.py",)
T_TOOLMAZE_JUDGE = ("tests/verdicts/test_toolmaze_abort_judge.py",)
T_TOOLMAZE_CLAIMS = ("tests/verdicts/test_toolmaze_abort_judge.py::test_a_stop_that_claims_success_earns_no_wise_abort",)
T_STATS = ("tests/evaluator/test_stats.py", "tests/evaluator/test_paired_difference.py", "tests/evaluator/test_stats_edges.py")
# the test that decides each of these: the whole T_STATS ran it last, after two minutes of property tests
T_CONFIDENCE = ("tests/evaluator/test_stats_edges.py",)
T_PAIRED_EMPTY = ("tests/evaluator/test_paired_difference.py::test_a_model_with_no_scored_episode_in_a_cell_is_not_compared",)
T_COMPOSITE = ("tests/evaluator/test_composite_bootstrap.py",)
T_SUMMARY = ("tests/evaluator/test_summary.py", "tests/evaluator/test_cell_columns.py")
T_RUNDIR = ("tests/evaluator/test_rundir_dedup.py", "tests/evaluator/test_rundir.py")
T_FAILURES = ("tests/models/test_models_failure_classes.py", "tests/models/test_models_client.py")
T_BLAME = ("tests/cluster/test_failure_matrix.py::test_a_400_after_the_model_has_spoken_is_the_agents_error",)
T_EXPLOITS = ("tests/evaluator/test_exploits.py",)
T_TOOLMAZE = ("tests/benchmarks/toolmaze/test_toolmaze_metric_edges.py",)
T_TOOLMAZE_BLIND = ("tests/benchmarks/toolmaze/test_toolmaze_blind_recovery.py",
                    "-k", "credited_and_the_same_retry or same_action_twice")
T_TOOLMAZE_ABORT = ("tests/benchmarks/toolmaze/test_toolmaze_exploits.py", "-k", "side_effect_earns_no_wise_abort")
T_TOOLMAZE_BINDING = ("tests/benchmarks/toolmaze/test_toolmaze_fault_binding.py", "-k", "call_order_cannot_move")
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
T_PLANBENCH_METRICS = (PB + "test_worked_example_metrics",)  # the worked example kills it; the 327-task oracle run took minutes
T_TRAJECT = ("tests/benchmarks/traject_bench/test_traject_bench_metrics.py",)
T_FLOOR = ("tests/evaluator/test_floor.py",)
T_MULTIPLICITY = ("tests/evaluator/test_multiplicity_properties.py",)
IM = "tests/evaluator/test_interval_methods.py::"
T_SKEW = (IM + "test_on_a_skewed_metric_the_default_misses_less_on_the_long_side_than_the_percentile_interval",)
T_AGREE = (IM + "test_a_paired_interval_excludes_0_exactly_when_its_p_value_is_below_alpha",)
T_TINY = (IM + "test_a_paired_comparison_on_too_few_tasks_has_no_interval_no_p_value_and_no_floor_mark",)
T_BCA = ("tests/evaluator/test_stats.py::test_a_ratio_metrics_bca_interval_agrees_with_scipy_on_resampled_sums",
         "tests/evaluator/test_stats.py::test_plain_mean_interval_agrees_with_scipy_bootstrap")
T_PLANBENCH_MATCH = ("tests/benchmarks/planbench_xl/test_planbench_xl_answer_matching.py",)
T_APB_STATUS = ("tests/benchmarks/apb/test_apb_status_case.py",)
T_ENDPOINT_VERDICTS = ("tests/cluster/test_endpoint_verdicts.py::test_the_worst_verdict_of_a_model_and_its_helpers_decides",)
T_APB_ROLES = ("tests/benchmarks/apb/test_apb_roles.py",)
T_APB_TWINS = "tests/benchmarks/apb/test_apb_twins.py"
T_APB_LOOKALIKES = "tests/benchmarks/apb/test_apb_lookalikes.py"
T_PROBE_CHAT = ("tests/cluster/test_endpoint_verdicts.py::test_models_answering_while_every_chat_request_gets_a_5xx_is_down",)
T_PROBE = ("tests/cluster/test_endpoint_verdicts.py::test_a_5xx_answer_is_not_up_and_names_the_status",
           "tests/cluster/test_endpoint_verdicts.py::test_an_answer_below_500_is_up")
T_TOKENS = ("tests/evaluator/test_token_sums.py",)
T_WAVES = ("tests/cluster/test_wave_membership.py",)

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
    Mutant("paired-interval-studentized-alone", STATS, "_estimates",
           'if interval == "hull":', "if False:",
           ("tests/evaluator/test_coverage.py", *T_STATS),
           "the paired difference's interval is the studentized one alone: with shared seeds it covers 86.6%"),
    Mutant("paired-hull-upper-end-narrowed", STATS, "_hull",
           "max(first[1], second[1])", "min(first[1], second[1])",
           ("tests/evaluator/test_coverage.py", *T_STATS),
           "the hull's upper end is the lower of the two: the truth above the interval again"),
    Mutant("interval-alpha-not-halved", STATS, "_percentile_interval",
           "[100.0 * alpha / 2.0, 100.0 * (1.0 - alpha / 2.0)]", "[100.0 * alpha, 100.0 * (1.0 - alpha)]",
           T_STATS, "a 90% interval labelled 95%"),
    Mutant("interval-undefined-resamples-kept", STATS, "_percentile_interval",
           "finite = stats[np.isfinite(stats)]", "finite = stats", T_STATS,
           "resamples where a ratio is undefined poison the interval"),
    Mutant("confidence-bounds-inclusive", STATS, "_check_options",
           "if not 0.0 < confidence < 1.0:", "if not 0.0 <= confidence <= 1.0:", T_CONFIDENCE,
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
    Mutant("studentized-t-quantiles-reflected", STATS, "_studentized",
           "lo, hi = max(point - t_hi * se, lowest), min(point - t_lo * se, highest)",
           "lo, hi = max(point + t_lo * se, lowest), min(point + t_hi * se, highest)", T_SKEW,
           "the bootstrap-t quantiles added instead of subtracted: the interval leans away from a skew"),
    Mutant("studentized-p-not-doubled", STATS, "_studentized",
           "p = min(1.0, max(2.0 * min(above, 1.0 - above),", "p = min(1.0, max(min(above, 1.0 - above),",
           T_AGREE, "a one-sided p-value beside a two-sided interval: 'significant' rows whose interval holds 0"),
    Mutant("tiny-cells-note-rule-fixed", "toolsweep/evaluator/report.py", "tiny_cells_note",
           "k = min_tasks_for_interval(confidence)", "k = 4",
           ("tests/evaluator/test_tiny_cells_note.py::test_the_rule_follows_the_confidence",),
           "the report's note says 4 tasks at any confidence: at 99% it names the wrong rule for a withheld cell"),
    Mutant("tiny-cells-never-withheld", STATS, "min_tasks_for_interval",
           "while k ** (1 - k) >= tail:", "while k ** (1 - k) > 1.0:", T_TINY,
           "a paired interval on two or three tasks is printed and decides a floor mark"),
    Mutant("bca-acceleration-sign", STATS, "_BCa.fit",
           "a = float((dev ** 3).sum())", "a = -float((dev ** 3).sum())", T_BCA,
           "BCa's acceleration with the wrong sign: the correction pushes the interval into the short tail"),
    Mutant("composite-paired-draws-independent", STATS, "composite_estimate",
           "idx = shared if paired else rng.integers", "idx = rng.integers", T_COMPOSITE,
           "a paired composite resamples each stratum on its own"),
    Mutant("composite-undefined-counted", STATS, "_cluster_totals",
           "np.add.at(counts, idx[defined], 1.0)", "np.add.at(counts, idx, 1.0)", T_COMPOSITE,
           "undefined values count in a composite's denominator"),
    # ------------------------------------------------------------------ multiplicity
    Mutant("holm-continues-past-first-acceptance", DESIGN, "holm",
           "break", "continue", T_MULTIPLICITY,
           "Holm goes on after its first non-rejection: holm([0.03, 0.04]) rejects 0.04"),
    Mutant("bh-step-down", DESIGN, "benjamini_hochberg",
           "cutoff = rank", "cutoff = rank if cutoff == rank - 1 else cutoff", T_MULTIPLICITY,
           "BH stops at its first non-rejection (step-down): [0.01, 0.04, 0.045] rejects only 0.01"),
    Mutant("variance-one-task-zero", DESIGN, "variance_components",
           "return VarianceComponents(n, k, n / max(k, 1), math.nan, within)",
           "return VarianceComponents(n, k, n / max(k, 1), 0.0, within)",
           ("tests/evaluator/test_design.py::test_one_tasks_spread_between_tasks_is_undefined_never_zero",),
           "a one-task cell's spread between tasks reads 0.0 (the tasks agree) where it is undefined"),
    Mutant("variance-one-task-icc-zero", DESIGN, "VarianceComponents.icc",
           "return self.var_task / total if total > 0 else None", "return self.var_task / total if total != 0 else None",
           ("tests/evaluator/test_design.py::test_one_tasks_spread_between_tasks_is_undefined_never_zero",),
           "a one-task cell gets an intra-class correlation (NaN, from a NaN total) it does not have"),
    Mutant("variance-constant-metric-icc-zero", DESIGN, "VarianceComponents.icc",
           "return self.var_task / total if total > 0 else None", "return self.var_task / total if total > 0 else 0.0",
           ("tests/evaluator/test_design.py::test_a_metric_every_episode_scores_alike_has_no_intra_class_correlation",),
           "a metric every episode scores alike gets ICC 0, design effect 1 and every episode as its effective n"),
    # ------------------------------------------------------------------ cell summaries
    Mutant("summary-unscored-enter-metrics", SUMMARY, "CellEpisodes.add",
           "return  # infrastructure failures never enter a metric", "pass", T_SUMMARY,
           "an infrastructure failure enters the metrics as an episode"),
    Mutant("summary-extend-unscored-any-to-all", SUMMARY, "CellEpisodes.extend",
           "if any(t in _UNSCORED for t in terminations):", "if all(t in _UNSCORED for t in terminations):",
           T_SUMMARY, "read from a part, infrastructure failures enter the metrics unless every row is one"),
    Mutant("summary-paired-one-empty-side", SUMMARY, "CellTable.paired",
           "if ea.n == 0 or eb.n == 0:", "if ea.n == 0 and eb.n == 0:", T_PAIRED_EMPTY,
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
    Mutant("blame-any-400-after-first-message", POLICY, "LLMPolicy.act",
           'if any(m.role == "assistant" for m in messages):', "if len(messages) > 1:", T_BLAME,
           "a 400 on a benchmark's first request (system + user, nothing of the model's) is the agent's error"),
    # ------------------------------------------------------------------ endpoint health
    Mutant("verdict-best-of-model-and-helpers", HEALTH, "wait_for_endpoints",
           "return min(verdicts, key=lambda v: order[v.state])", "return max(verdicts, key=lambda v: order[v.state])",
           T_ENDPOINT_VERDICTS, "a judge down for the whole budget beside a healthy model reads up: units spend attempts"),
    Mutant("probe-chat-5xx-up", HEALTH, "probe_http",
           "if isinstance(chat, int) and (chat >= 500 or chat == 429):",
           "if isinstance(chat, int) and (chat >= 600 or chat == 429):", T_PROBE_CHAT,
           "a server listing its models while every chat request gets a 503 reads up: units spend their attempts"),
    Mutant("probe-any-answer-up", HEALTH, "probe_http",
           "if isinstance(status, str) or status >= 500:", "if isinstance(status, str) or status >= 600:", T_PROBE,
           "an endpoint answering 503 to the probe counts as healthy"),
    Mutant("probe-4xx-down", HEALTH, "probe_http",
           "if isinstance(status, str) or status >= 500:", "if isinstance(status, str) or status >= 400:", T_PROBE,
           "a 401 or 404 (the configuration's problem) reads as an outage: units wait out the budget"),
    # ------------------------------------------------------------------ token counts
    Mutant("tokens-row-last-step-only", RUNDIR, "outcome_columns",
           "completion += step.usage.completion_tokens", "completion = step.usage.completion_tokens", T_TOKENS,
           "the row's completion tokens are the last step's, not the episode's"),
    Mutant("tokens-trajectory-last-step-only", TYPES, "Trajectory.completion_tokens",
           "return sum(s.usage.completion_tokens for s in self.steps)",
           "return self.steps[-1].usage.completion_tokens if self.steps else 0", T_TOKENS,
           "the trajectory's completion tokens are the last step's"),
    # ------------------------------------------------------------------ waves
    Mutant("waves-model-in-no-group-dropped", PLACEMENT, "plan_waves",
           "together.get(m.name, [m])", "together.get(m.name, [])", T_WAVES,
           "a model in no server group (an hf model on CUDA) is in no wave and never runs"),
    # ------------------------------------------------------------------ power planning
    Mutant("pilot-sample-is-the-first-tasks", "toolsweep/cluster/config.py", "sample_tasks",
           "return [t for i, t in enumerate(task_ids) if i in keep]", "return list(task_ids[:n])",
           ("tests/cluster/test_pilot_sample.py::test_a_sample_is_seeded_random_and_the_same_on_every_run",),
           "tasks.sample runs a setting's first tasks: the pilot plans from tasks that need not be typical"),
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
    Mutant("toolmaze-blind-repeat-credited", TOOLMAZE, "retried",
           "if repeats_a_success(calls):", "if False:", T_TOOLMAZE_BLIND,
           "a retry among repeats of calls that had succeeded (blind repetition) is credited"),
    Mutant("toolmaze-retry-after-error-as-repeat", TOOLMAZE, "repeats_a_success",
           "if c.clean:", "if c.args is not None:", T_TOOLMAZE_BLIND,
           "a retry after an error counts as repeating a success: the real retry loses its credit"),
    Mutant("toolmaze-double-action-allowed", TOOLMAZE, "judge",
           "and not repeats_a_success(executed_actions))", "and True)", T_TOOLMAZE_BLIND,
           "the same Action run twice (a second booking) still counts as success"),
    Mutant("toolmaze-abort-after-side-effect", TOOLMAZE, "judge",
           "and not any(c.tool in downstream for c in after_k) and actions_ok", "and not any(c.tool in downstream for c in after_k)",
           T_TOOLMAZE_ABORT, "a stop after the task's Action (or a stray one) already ran is credited as a wise abort"),
    Mutant("toolmaze-fault-follows-first-call", TOOLMAZE_FAULTS, "Rule.fault_tools",
           "return (self.victim,) if self.victim is not None else self.members", "return self.members",
           T_TOOLMAZE_BINDING, "the fault goes to whichever group member is called first, not the bound tool"),
    Mutant("adversary-best-inverted", ADVERSARY, "SearchResult.record",
           "if old is None or (v > old[1] if up else v < old[1]):",
           "if old is None or (v < old[1] if up else v > old[1]):",
           ("tests/evaluator/test_adversary_search.py",),
           "the search keeps the weakest policy as a cell's floor"),
    Mutant("adversary-greedy-steps-dropped", ADVERSARY, "search",
           "for spec in space.neighbours(result.best[metric][0]):", "for spec in []:",
           ("tests/evaluator/test_adversary_search.py",),
           "no greedy step from the best policy: the search stops at the random draws"),
    Mutant("traject-floor-plays-the-inclusion-best", "toolsweep/benchmarks/traject_bench/search.py",
           "floor_policy_of", "best = row.get(LEADING)", 'best = row.get("inclusion")',
           ("tests/benchmarks/traject_bench/test_traject_bench_search.py::"
            "test_the_floor_plays_the_searched_policy_where_it_beats_call_everything",),
           "TRAJECT's floor plays the Inclusion best (call everything) where a searched policy is stronger on Usage"),
    Mutant("apb-search-step-ignores-observed-values", "toolsweep/benchmarks/apb/search.py", "_stepwise",
           "bound = {p: observed.get(v, v) if isinstance(v, str) else v for p, v in a.items()}", "bound = dict(a)",
           ("tests/benchmarks/apb/test_apb_search.py::test_the_baseline_option_of_every_primitive_is_the_heuristic",),
           "APB's searched step-wise policies bind a reference where the trajectory shows the value: the "
           "search starts below the heuristic and its floor is too low"),
    Mutant("apb-calibration-frr-reads-correct", "toolsweep/benchmarks/apb/search.py", "refusal_calibration",
           '["refused"]', '["correct"]',
           ("tests/benchmarks/apb/test_apb_search.py::test_no_refusal_option_is_better_calibrated_than_the_floors",),
           "APB's cross-setting calibration takes the controls' plan correctness for their false-refusal rate: "
           "the heuristic's refusals of solvable twins go unseen"),
    Mutant("planbench-search-trust-ignored", "toolsweep/benchmarks/planbench_xl/search.py",
           "ComposedPlanner._plan_step", "step = self._plan_avoiding(self.bad | (self.suspect - self.preferred))",
           "step = self._plan_avoiding(self.bad)",
           ("tests/benchmarks/planbench_xl/test_planbench_xl_search.py::"
            "test_the_floor_is_the_searched_policy_and_plays_the_tables_choice",),
           "PlanBench-XL's searched policies trust every listed tool whatever `trust` says: the floor "
           "falls back to the planner where the search found a stronger policy"),
    # ------------------------------------------------------------------ role-leak probe
    Mutant("role-probe-tests-on-training-half", "toolsweep/evaluator/role_probe.py", "probe",
           "test = [(f, y) for f, y, half in rows if not half]", "test = [(f, y) for f, y, half in rows if half]",
           ("tests/evaluator/test_role_probe.py",),
           "the probe scores the families it was trained on, so a clean world reads as leaking"),
    Mutant("role-probe-chance-one-sided", "toolsweep/evaluator/role_probe.py", "ProbeResult.at_chance",
           "return abs(self.balanced_accuracy - self.shuffled_balanced_accuracy) <= CHANCE_MARGIN",
           "return self.shuffled_balanced_accuracy - self.balanced_accuracy <= CHANCE_MARGIN",
           ("tests/evaluator/test_role_probe.py",),
           "a probe far above its shuffled-label figure is called at chance"),
    Mutant("role-probe-readable-two-sided", "toolsweep/evaluator/role_probe.py", "ProbeResult.readable",
           "return self.balanced_accuracy - self.shuffled_balanced_accuracy > CHANCE_MARGIN",
           "return abs(self.balanced_accuracy - self.shuffled_balanced_accuracy) > CHANCE_MARGIN",
           ("tests/evaluator/test_role_probe.py",),
           "a role learnt the wrong way round (below chance) is called read"),
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
    Mutant("apb-holistic-unmatched-call-free", APB_GRADER, "PlanGrader._unmatched_calls",
           "matched = {slots[si][0] for si in slot_of.values()}", "matched = {s[0] for s in slots}",
           ("tests/benchmarks/apb/test_apb_grader.py::test_extra_call_that_matches_no_node_is_not_correct",),
           "a call that performs no step of the query costs nothing (the reference plus any padding is correct)"),
    Mutant("apb-holistic-unmatched-args-unchecked", APB_GRADER, "PlanGrader._unmatched_calls",
           'if p.casefold() not in given]', 'if p.casefold() in given]',
           ("tests/benchmarks/apb/test_apb_grader.py::test_argument_less_extra_call_is_e4_and_e5",),
           "an extra call missing its tool's required argument is not a tool-use error"),
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
    Mutant("apb-refusal-status-case-sensitive", APB_GRADER, "PlanGrader.refusal",
           'str(x.get("status", "")).upper() in _STATUS_REFUSALS', 'str(x.get("status", "")) in _STATUS_REFUSALS',
           T_APB_STATUS, 'a lowercase "reject" status stops counting as a refusal'),
    Mutant("apb-refusal-in-a-field-ignored", APB_GRADER, "PlanGrader.refusal",
           "if states_refusal(prose) or any(states_refusal(words) for words in said_in_fields(obj)):",
           "if states_refusal(prose):", T_APB_FIELD_REFUSAL,
           '"I cannot complete this task" in a plan\'s `plan` or `reason` field beside a full chain is a correct plan'),
    Mutant("apb-arguments-read-as-words", APB_GRADER, "said_in_fields",
           "if str(key).lower() not in _NOT_WORDS:",
           'if str(key).lower() not in _NOT_WORDS - {"arguments", "parameter_description"}:',
           T_APB_FIELD_REFUSAL, "a tool argument whose value says \"I cannot\" is read as the agent refusing"),
    Mutant("apb-judged-efficiency-rule-verdict", APB_ENV, "APBEnv._judged_efficiency",
           "solved = correct == 1.0", "solved = m[\"correct\"] == 1.0", T_APB_JUDGE,
           "C_pass and the optimal rate follow the rule grade while the judge grades"),
    Mutant("blame-timeout-as-infra-error", RECORD, "failure_breakdown",
           "r.termination == TerminationReason.TIMEOUT or ", "", ("tests/cluster/test_failure_breakdown.py",),
           "units given up on the episode guard are reported as infrastructure errors"),
    # ------------------------------------------------------------------ PlanBench-XL
    Mutant("planbench-credit-without-grounding", PLANBENCH_ENV, "PlanBenchEnv._answer",
           "correct = match and reached and grounded", "correct = match and reached", T_PLANBENCH_GROUNDING,
           "a guessed gold value (never obtained from a trusted call) earns credit"),
    # (`reached` is implied by `grounded` since a value counts only under the datatype it was obtained as:
    # dropping it from `correct` is an equivalent mutant; the failure category still reads it)
    Mutant("planbench-grounded-as-any-datatype", PLANBENCH_ENV, "PlanBenchEnv._answer",
           "grounded = self.task.target in st.grounded_as.get(norm_value(self.task.gold), ())",
           "grounded = bool(st.grounded_as.get(norm_value(self.task.gold)))",
           ("tests/benchmarks/planbench_xl/test_planbench_xl_adversaries.py::"
            "test_fig11_trap_of_the_issue_is_graded_incorrect",),
           "the gold string obtained for real as another datatype (Fig. 11's default payment method) is credited"),
    Mutant("planbench-unreached-called-wrong-answer", PLANBENCH_ENV, "PlanBenchEnv._answer",
           '"final_answer_wrong" if reached else', '"final_answer_wrong" if not reached else', T_PLANBENCH_TARGET,
           "an answer given without reaching the target datatype is filed as a wrong answer (and the reverse)"),
    Mutant("planbench-egt-precision-denominator", PLANBENCH, "episode_metrics",
           "len(ex & task.d_gt) / len(ex)", "len(ex & task.d_gt) / len(task.d_gt)", T_PLANBENCH_METRICS,
           "EGT precision divided by the ground truth's size (a recall)"),
    Mutant("planbench-answer-match-reversed", PLANBENCH_ENV, "PlanBenchEnv._answer",
           "match = norm_value(self.task.gold) in norm_value(answer)",
           "match = norm_value(answer) in norm_value(self.task.gold)", T_PLANBENCH_MATCH,
           "the answer is looked up in the gold value: an empty answer is credited once the target is reached"),
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
    # ------------------------------------------------------------------ adaptive stopping
    Mutant("adaptive-one-futile-pair-stops-the-cell", ADAPTIVE, "PairedRule.futile",
           "set(undecided) <= set(self.futile_pairs(estimates, seeds))",
           "bool(set(undecided) & set(self.futile_pairs(estimates, seeds)))",
           ("tests/evaluator/test_adaptive_pairs.py",),
           "one futile pair stops a 3-model cell whose other pairs could still be decided"),
    # ------------------------------------------------------------------ rate limits (AIMD)
    Mutant("rate-limit-every-429-cuts", RATE_LIMIT, "AdaptiveLimit._answered",
           "if started < self._window_start:", "if False:",
           ("tests/models/test_models_rate_limit.py::test_the_limit_halves_once_per_window_of_most_429s_holds_on_a_few_and_grows_one_per_clean_window",),
           "the answers to requests sent under the old limit count again: one burst halves the limit twice"),
    Mutant("rate-limit-any-429-cuts", RATE_LIMIT, "AdaptiveLimit._answered",
           "if self._limited > self._succeeded:", "if self._limited:",
           ("tests/models/test_models_rate_limit.py",),
           "a window with one 429 halves the limit: an API that turns away 30% of requests whatever the load "
           "starves the sweep to 1-4 requests in flight"),
    Mutant("rate-limit-no-increase", RATE_LIMIT, "AdaptiveLimit._answered",
           "elif self._limited == 0 and self.slots < self.ceiling:", "elif False:",
           ("tests/models/test_models_rate_limit.py",),
           "clean windows never raise the limit again: a lifted quota is never used"),
    # ------------------------------------------------------------------ verdicts read from text
    Mutant("verdict-negation-ignored", VERDICTS, "_inability",
           "if _NEGATION.search(before) or _OTHER_SUBJECT.search(before)", "if _OTHER_SUBJECT.search(before)",
           T_TEXT_VERDICTS, '"it is not impossible" and "nothing makes this impossible" read as refusals'),
    Mutant("verdict-any-subject", VERDICTS, "_inability",
           "or _OTHER_SUBJECT.search(before) or", "or", T_TEXT_VERDICTS,
           '"you cannot go wrong" and "the user cannot log in" read as the agent refusing'),
    Mutant("verdict-workaround-ignored", VERDICTS, "_inability",
           "if _CONDITION.search(clause) or _WORKAROUND.search(sentence):", "if _CONDITION.search(clause):",
           T_TEXT_VERDICTS, '"I cannot read the image myself, so I use OCR" reads as a refusal'),
    Mutant("verdict-any-failure-acknowledges", VERDICTS, "rule_acknowledges_failure",
           'return bool(outcomes) and outcomes[-1] == "fail"', 'return "fail" in outcomes', T_TEXT_VERDICTS,
           'a recovered failure ("failed, but the retry worked") earns a wise abort\'s acknowledgement'),
    Mutant("verdict-success-despite-inability", VERDICTS, "rule_claims_success",
           "if not text or states_inability(text):", "if not text:", T_TEXT_VERDICTS,
           '"the lookup worked, but I could not complete the order" counts as a success claim'),
    Mutant("verdict-claim-read-as-admission", VERDICTS, "acknowledges_failure",
           "if not text or rule_claims_success(text):", "if not text:", T_TOOLMAZE_CLAIMS,
           '"I did not fail: every step completed." after a fault earns a wise abort (TSR 1.0 on C1-P2)'),
    Mutant("verdict-answered-question-asks", VERDICTS, "asks_for_input",
           "and named and not answered and", "and named and", T_TEXT_VERDICTS,
           "a rhetorical question the plan answers at once reads as a clarification request"),
    Mutant("verdict-classifier-ignored", VERDICT_MODEL, "blend",
           "return W * probability(name, text) + (1.0 - W) * float(rule) > 0.5", "return rule", T_TEXT_VERDICTS,
           "the judge-free reading falls back to the rules alone: unforeseen phrasings misread again"),
    Mutant("verdict-classifier-alone", VERDICT_MODEL, "blend",
           "return W * probability(name, text) + (1.0 - W) * float(rule) > 0.5", "return probability(name, text) > 0.5",
           T_TEXT_VERDICTS, "the rules' exact readings are dropped for the classifier's guesses by overlap"),
    # ------------------------------------------------------------------ the judge protocol
    Mutant("judge-unreadable-scored-zero", TRAJECT_ENV, "TrajectEnv._on_acc",
           'float("nan") if verdict is None else float(verdict)', "float(bool(verdict))", T_TRAJECT_JUDGE,
           "an unreadable Acc verdict counts as no match (0) in the model's mean"),
    Mutant("judge-never-reasks", JUDGING, "Reasking.__call__",
           "self.asked >= self.asks", "self.asked >= 1", T_TRAJECT_JUDGE,
           "an unreadable verdict is never asked again"),
    Mutant("toolmaze-judge-reading-ignored", TOOLMAZE_ENV, "ToolMazeEnv.result",
           "out.update(self.verdict(self.judge_ack).metrics(*counts))", "out.update(self.verdict().metrics(*counts))",
           T_TOOLMAZE_JUDGE, "a configured judge's reading of the wise abort is dropped for the rule's"),
    # ------------------------------------------------------------------ APB roles read without a model
    Mutant("apb-broken-wording-never-swapped", APB_GEN, "broken_variant",
           'swapped = case_rng(gen_seed, "broken_wording", base["index"]).random() < 0.5',
           'swapped = case_rng(gen_seed, "broken_wording", base["index"]).random() < 0.0', T_APB_ROLES,
           "the synonym wording is always the replacement: the longer name of the pair is the replacement"),
    Mutant("apb-broken-listed-tool-dropped", APB_GEN, "broken_listing",
           'if case.get("listed_broken_tool"):', 'if case.get("listed_broken_tool") and False:', T_APB_ROLES,
           "the wording that breaks is not listed: the base tool appears twice and the failed call names no tool"),
    Mutant("apb-control-reads-the-base-query", APB_ENV, "APBEnv._build",
           'query = t.get("query", query)', "query = query", T_APB_ROLES,
           "the solvable twin is shown without its requirement: a phrase tells the Unsolvable case again"),
    Mutant("apb-twin-loses-its-gate", APB_GEN, "twin_variant",
           'return {"gate": kind, "query": case["query"],', 'return {"gate": kind, "query": base["query"],',
           T_APB_ROLES, "the solvable twin reads no requirement while its Unsolvable case does"),
    Mutant("apb-conflict-lists-one-name", APB_GEN, "unsolvable_gate",
           "renamed = rng.random() < 0.5", "renamed = rng.random() < 0.0", T_APB_ROLES,
           "the step's tool is always listed under the base's name: the Unsolvable case always names the "
           "other name, whose words tell it"),
    Mutant("apb-info-twin-reads-the-other-note", APB_GEN, "gated_case",
           "gate['note'] if solvable else gate['decoy_note']", "gate['decoy_note']", T_APB_ROLES,
           "the solvable twin is closed by a note the query does not refer to: it lacks the value it needs"),
    Mutant("apb-tool-twin-lists-no-lookalike", APB_GEN, "gated_case",
           "listed += [retired_lookalike(t), t] if solvable", "listed += [t] if solvable", T_APB_ROLES,
           "only the Unsolvable tool case lists the retired look-alike: its words tell the case"),
    Mutant("apb-probe-reads-the-base-list", "toolsweep/benchmarks/apb/probe.py", "unsolvable_lists",
           't.get("tools", b["tools"])', 'b["tools"]', T_APB_ROLES,
           "the probe reads a control with its base's tools, not the look-alike or the other name it lists"),
    Mutant("apb-vocabulary-fixed-per-domain", APB_GEN, "_Builder.__init__",
           "self.metric = vocab.choice(self.domain.metrics)", "self.metric = self.domain.metric",
           (f"{T_APB_ROLES[0]}::test_no_tool_is_needed_by_every_case_of_its_domain",),
           "every base of a domain computes its one metric: the metric tool is needed in every case and "
           "never drawn as a distractor, so a reader learns it is never extraneous"),
    Mutant("apb-distractor-fit-skipped", APB_GEN, "balanced_pool",
           "for _ in range(DISTRACTOR_FIT_ROUNDS if rounds is None else rounds):", "for _ in range(0):",
           (f"{T_APB_ROLES[0]}::test_distractors_are_drawn_as_often_as_their_tools_are_listed",),
           "distractors are drawn by the listed counts alone: capability exclusions tilt which "
           "tools become distractors"),
    Mutant("apb-distractors-share-openings", APB_GEN, "_draw_distractors",
           'or t["description"] in descriptions or t["description"][:30] in openings:',
           'or t["description"] in descriptions:',
           (f"{T_APB_ROLES[0]}::test_distractors_are_worded_as_listed_tools",),
           "three tools may share a description's opening: two of them are distractors, which tells them"),
    Mutant("apb-visual-attaches-nothing", APB_GEN, "other_files",
           "return [dict(f) for f in rng.choice(donors)", "return [] and [dict(f) for f in rng.choice(donors)",
           T_APB_ROLES, "an Unsolvable visual case attaches no file: the file count tells it (the probe read 1.000)"),
    # ------------------------------------------------------------------ twins: credit only for a response
    Mutant("apb-twins-never-served", "toolsweep/benchmarks/apb/__init__.py", "APB.tasks",
           "self.data.cell(setting, self.options.twins, self.options.lookalikes)",
           "self.data.cell(setting, False, self.options.lookalikes)",
           (f"{T_APB_TWINS}::test_refusing_everything_earns_half_of_every_unsolvable_setting",
            f"{T_APB_TWINS}::test_switching_tools_unread_earns_half_of_tool_broken"),
           "the settings hold the paper's cases alone: refusing everything, or switching tools unread, earns all"),
    Mutant("apb-broken-twin-shows-the-error", APB_GEN, "broken_twin",
           'trajectory = variant["prefix"][:-1] + [', 'trajectory = variant["prefix"] + [',
           (f"{T_APB_TWINS}::test_each_tool_broken_twin_shows_its_cases_call_succeeding",),
           "the twin shows the error before the step's output: it is no longer the call succeeding"),
    Mutant("apb-false-recovery-misses-the-replacement", APB_ENV, "APBEnv._recovers",
           'switched = {self.task["broken_tool"], self.task["replacement_tool"]["name"],',
           'switched = {self.task["broken_tool"],',
           (f"{T_APB_TWINS}::test_switching_tools_unread_earns_half_of_tool_broken",),
           "a switch to the replacement after a call that succeeded is not counted as a recovery from no fault"),
    Mutant("apb-false-recovery-misses-the-lookalikes", APB_ENV, "APBEnv._recovers",
           '*(x["tool"]["name"] for x in self.task.get("lookalikes", ()))}',
           '}',
           (f"{T_APB_LOOKALIKES}::"
            "test_a_lookalike_is_no_recovery_and_switching_to_one_after_a_success_is_a_false_recovery",),
           "a switch to a look-alike after a call that succeeded is not counted as a recovery from no fault"),
    Mutant("apb-lookalikes-not-listed", APB_GEN, "broken_listing",
           'tools.insert(x["at"], x["tool"])',
           'pass',
           (f"{T_APB_LOOKALIKES}::test_every_case_lists_its_replacement_among_lookalikes_reworded_alike",),
           "the model is shown the replacement alone again, the nearest description"),
    Mutant("apb-lookalike-keeps-the-operation", APB_GEN, "_reworded",
           'desc = _OPERATION.sub(f"Does {gerund} of ", tool["description"], count=1)',
           'desc = tool["description"]',
           (f"{T_APB_LOOKALIKES}::test_a_reader_of_the_words_finds_the_replacement_in_every_case",),
           "every look-alike says the broken tool's own operation: none can be told from the replacement"),
    Mutant("apb-lookalike-near-the-broken-operation", APB_GEN, "lookalike_variant",
           'others = [c for c in sorted(LOOKALIKE_OPERATIONS) if c not in near]',
           'others = [c for c in sorted(LOOKALIKE_OPERATIONS) if c != cls]',
           (f"{T_APB_LOOKALIKES}::test_every_case_lists_its_replacement_among_lookalikes_reworded_alike",),
           "a look-alike may say an operation near the broken one's (pulling for retrieval): a second replacement"),
    Mutant("apb-lookalikes-option-ignored", APB_GEN, "Dataset.cell",
           'paper = not lookalikes and setting in self.paper',
           'paper = False',
           (f"{T_APB_TWINS}::test_switching_tools_unread_earns_half_of_tool_broken",),
           "`lookalikes: false` serves the look-alikes: the paper's layout is gone"),
    Mutant("apb-unsolvable-twin-credited-for-not-refusing", APB_ENV, "APBEnv._grade_final",
           'm = {"correct": m["correct"], "refused": m["refused"],',
           'm = {"correct": 1.0 - m["refused"], "refused": m["refused"],',
           ("tests/benchmarks/test_exploit_suite.py::test_exploit_policy_stays_within_its_bounds[apb-string_chain]",),
           "a solvable twin is correct whenever it is not refused: an answer with no plan earns half a setting"),
    Mutant("toolmaze-s-star-first-of-ties", TOOLMAZE_TASKS, "_build_task",
           'default = random.Random(seeded_int(dataset_seed, "preferred-path", task_id)).choice(tied)',
           "default = tied[0]",
           ("tests/benchmarks/toolmaze/test_toolmaze_tie_breaks.py",),
           "s* is the first of the shortest paths in the generator's order: the faulted member is guessable by name"),
    Mutant("apb-replacement-listed-first", APB_GEN, "lookalike_variant",
           "insert_at = rng.randint(0, n_listed - 1)  # before Finish, as the paper layout's replacement",
           "insert_at = 0", ("tests/benchmarks/apb/test_apb_tie_breaks.py",),
           "the replacement is listed before its look-alikes: a policy takes the first one"),
    Mutant("tie-break-role-never-read", TIE_BREAKS, "rank_z",
           "s[0] += u[case.holder]", "s[0] += mean", ("tests/evaluator/test_tie_breaks.py",),
           "the check compares the null with itself: a role on the first tool by name passes"),
    Mutant("toolmaze-memory-shared-across-held-out", TOOLMAZE_SEARCH, "play_cell",
           "episode_memory = copy.deepcopy(memory) if frozen else memory", "episode_memory = memory",
           T_TOOLMAZE_MEMORY,
           "a held-out episode learns from the held-out episodes played before it: the floor moves with the order"),
    Mutant("toolmaze-memory-keeps-failed-tools", TOOLMAZE_SEARCH, "ComposedAgent._ordered",
           "only_failed = self.memory.failed - self.memory.worked", "only_failed = set()",
           T_TOOLMAZE_MEMORY,
           "memory across a cell's episodes never passes over a tool that only ever failed"),
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
    Mutant("apb-lookalike-stands-in-for-the-broken-tool", APB_GRADER, "PlanGrader._sound_call",
           'stands_in = name == replacement or name in self.names_for[broken_node] or bool(',
           'stands_in = self.kind(name) in ("replacement", "lookalike") or name in self.names_for[broken_node] or bool(',
           (f"{T_APB_LOOKALIKES}::test_a_lookalike_called_with_the_failed_calls_own_argument_names_is_no_recovery",),
           "a look-alike is taken for the replacement (both reword the broken tool): Alter, recovery credited"),
    Mutant("traject-judge-score-clamped", TRAJECT_JUDGE_PARSE, "parse_traj_score",
           "if not math.isfinite(value) or not 0.0 <= value <= 10.0:", "if not math.isfinite(value):",
           T_TRAJECT_JUDGE, "a score off the judge's 0-10 scale (42) is taken as a grade instead of asked again"),
    Mutant("traject-judge-string-match-read", TRAJECT_JUDGE_PARSE, "parse_acc_verdict",
           "return match if isinstance(match, bool) else None",
           'return match if isinstance(match, bool) else (str(match).lower() == "true" if match else None)',
           T_TRAJECT_JUDGE, 'a string where the protocol wants a boolean ("true") is read as a verdict'),
    Mutant("in-flight-cap-of-another-server", SIZING, "in_flight_record",
           'server = next((s for s in sizing.values() if m.name in s.get("serves", ())), None)',
           'server = next((s for s in sizing.values()), None)',
           ("tests/models/test_in_flight_record.py",),
           "every model records the first server's cap: the manifest says 48 in flight for a model capped at 6"),
]

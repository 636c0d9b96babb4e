"""ToolMaze episodes end to end through run_episode: the protocol (spec §5, check 19), malformed
calls, the scripted agents' expected metrics (spec §11 table, checks 15-16), the metric arithmetic
(checks 17-18) and the paper-style report tables."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from toolsweep.benchmarks.toolmaze import ToolMaze, parse_setting, report_tables, setting_names
from toolsweep.benchmarks.toolmaze.metrics import Verdict, composite_avg, scaling_slopes, trust_gap
from toolsweep.benchmarks.toolmaze.prompts import FAILURE_AWARE_SUFFIX, STANDARD
from toolsweep.evaluator.episode import run_episode
from toolsweep.evaluator.types import AgentReply, FunctionCall, Message, TerminationReason, ToolCall, WorkUnit


@pytest.fixture(scope="module")
def bench():
    return ToolMaze()


def _unit(setting: str, task_id: str, model: str = "scripted") -> WorkUnit:
    return WorkUnit(sweep="t", model=model, benchmark="toolmaze", setting=setting, task_id=task_id, seed=0)


def run_cell(bench, policy, setting, task_ids):
    """Run episodes sequentially inside one event loop (asyncio.run once per cell)."""

    async def go():
        out = []
        for tid in task_ids:
            env = bench.make_env(tid, setting, 0)
            pol = bench.make_scripted_policy(policy, env, 0) if isinstance(policy, str) else policy(env)
            res = await run_episode(env, pol, _unit(setting, tid), max_turns=bench.max_turns(setting))
            out.append((env, res))
        return out

    return asyncio.run(go())


def _cell_metrics(results):
    def mean(key):
        xs = [r.metrics[key] for _, r in results if not math.isnan(r.metrics[key])]
        return sum(xs) / len(xs) if xs else math.nan
    return {k: mean(k) for k in ("tsr", "prr", "rc", "exposed", "c_rec")}


class _Script:
    """A fake agent that replays given assistant messages, then answers."""

    def __init__(self, messages):
        self.messages = list(messages)

    async def act(self, messages, tools):
        if self.messages:
            return AgentReply(message=self.messages.pop(0))
        return AgentReply(message=Message(role="assistant", content="done"))


def _call(i, name, args):
    return Message(role="assistant", content=None, tool_calls=[_tc(i, name, args)])


def _tc(i, name, args):
    raw = args if isinstance(args, str) else json.dumps(args)
    return ToolCall(id=f"call_{i}", function=FunctionCall(name=name, arguments=raw))


# ------------------------------------------------------------------------------------------------
# settings and protocol


def test_thirty_six_settings_and_prompts(bench):
    names = setting_names()
    assert len(names) == 36 and set(bench.settings()) == set(names)
    assert "C2-P3-hint" in names and not any(n.endswith("P0-hint") for n in names)
    with pytest.raises(ValueError, match="hint prompt is not used with P0"):
        parse_setting("C1-P0-hint")
    obs = bench.make_env("C1_task_001", "C1-P0-std", 0).reset()
    assert obs.messages[0].content == STANDARD
    hint = bench.make_env("C1_task_001", "C1-P1-hint", 0).reset()
    assert FAILURE_AWARE_SUFFIX in hint.messages[0].content
    assert obs.messages[1].role == "user" and obs.messages[1].content == bench.data.task("C1_task_001").query
    assert all(t["type"] == "function" and "parameters" in t["function"] for t in obs.tools)
    task = bench.data.task("C1_task_001")
    shown = {t["function"]["name"] for t in obs.tools}
    # the default view: the task's tools among every other tool of its primary domain
    domain = {t.name for t in bench.data.corpus.tools.values() if t.domain == task.primary_domain}
    assert shown == set(task.tools_visible) | domain and len(shown) > len(task.tools_visible)
    narrow = ToolMaze(tool_view="task").make_env("C1_task_001", "C1-P0-std", 0).reset()
    assert {t["function"]["name"] for t in narrow.tools} == set(task.tools_visible)
    assert bench.max_turns("C3-P2-std") == 25
    assert [m.name for m in bench.metrics("C1-P0-std")] == ["tsr"]
    assert {m.name for m in bench.metrics("C1-P2-hint")} >= {"tsr", "prr", "rc"}


def test_parallel_calls_each_get_one_tool_message(bench):
    task = bench.data.task("C2_task_005")
    path = task.default_path
    exp = task.expected[task.default_index]
    msg = Message(role="assistant", tool_calls=[_tc(1, path[0], exp[path[0]]["args"]),
                                               _tc(2, path[0], exp[path[0]]["args"]),
                                               _tc(3, "no_such_tool", {})])
    env = bench.make_env(task.task_id, "C2-P0-std", 0)
    res = asyncio.run(run_episode(env, _Script([msg]), _unit("C2-P0-std", task.task_id), max_turns=25))
    tool_msgs = res.trajectory.steps[0].observation
    assert [m.role for m in tool_msgs] == ["tool"] * 3
    assert [m.tool_call_id for m in tool_msgs] == ["call_1", "call_2", "call_3"]
    assert len(env.calls) == 3 and env.calls[0].clean and env.calls[1].clean
    assert res.termination == TerminationReason.ANSWERED and len(res.trajectory.steps) == 2


def test_episode_stops_at_25_steps(bench):
    class Loop:
        async def act(self, messages, tools):
            return AgentReply(message=Message(role="assistant", tool_calls=[_tc(1, "get_weather", {"city": "Paris"})]))

    env = bench.make_env("C1_task_002", "C1-P0-std", 0)
    res = asyncio.run(run_episode(env, Loop(), _unit("C1-P0-std", "C1_task_002"), max_turns=200))
    assert res.termination == TerminationReason.MAX_TURNS
    assert len(res.trajectory.steps) == 25 and env.n_steps == 25
    assert res.metrics["tsr"] == 0.0


def test_malformed_calls_are_observations_never_exceptions(bench):
    task = bench.data.task("C3_task_040")
    tool = task.default_path[0]
    bad = [
        Message(role="assistant", tool_calls=[_tc(1, tool, "{not json")]),
        Message(role="assistant", tool_calls=[_tc(2, "rm_rf", {"path": "/"})]),
        Message(role="assistant", tool_calls=[_tc(3, tool, {k: 12345 for k in task.expected[0][tool]["args"]})]),
        Message(role="assistant", tool_calls=[_tc(4, tool, "[1, 2, 3]")]),
        Message(role="assistant", tool_calls=[_tc(5, tool, "")]),
        Message(role="assistant", tool_calls=[_tc(6, tool, {"unexpected": True})]),
        Message(role="assistant", tool_calls=[_tc(7, tool, "null")]),
    ]
    for setting in ("C3-P0-std", "C3-P2-hint"):
        env = bench.make_env(task.task_id, setting, 0)
        res = asyncio.run(run_episode(env, _Script(list(bad)), _unit(setting, task.task_id), max_turns=25))
        assert res.error is None and res.termination == TerminationReason.ANSWERED
        contents = [json.loads(s.observation[0].content) for s in res.trajectory.steps[:-1]]
        assert all("error" in c for c in contents[:2])
        assert contents[0]["error"]["code"] == "INVALID_ARGUMENTS"
        assert contents[1]["error"]["code"] == "UNKNOWN_TOOL"
        assert res.metrics["malformed_calls"] >= 4 and res.metrics["n_tool_calls"] == 7
        assert res.metrics["tsr"] == 0.0
    env = bench.make_env(task.task_id, "C3-P0-std", 0)
    rec = env.execute("x", tool, json.dumps({k: 12345 for k in task.expected[0][tool]["args"]}))
    assert rec.forwarded and rec.response["error"]["status"] in (400, 404)  # wrong types: natural error


def test_answering_without_tools_is_unexposed_failure(bench):
    for setting, tid in (("C1-P2-std", "C1_task_010"), ("C3-P1-std", "C3_task_010"), ("C2-P0-std", "C2_task_010")):
        res = run_cell(bench, lambda env: _Script([]), setting, [tid])[0][1]
        assert res.metrics["exposed"] == 0.0 and res.metrics["tsr"] == 0.0
        assert res.metrics["rc"] == 0.0 and math.isnan(res.metrics["prr"])


# ------------------------------------------------------------------------------------------------
# scripted agents (spec §11 expected-metric table)


def test_oracle_reaches_full_tsr_and_prr_in_every_cell(bench):
    for setting in setting_names():
        level, p, prompt = parse_setting(setting)
        ids = bench.tasks(setting)
        if prompt == "hint":
            ids = ids[::10]  # the hint prompt changes nothing for a scripted agent: a sample suffices
        elif p == "P0":
            ids = ids[::4]
        results = run_cell(bench, "oracle", setting, ids)
        m = _cell_metrics(results)
        assert m["tsr"] == 1.0, setting
        if p != "P0":
            assert m["exposed"] == 1.0 and m["prr"] == 1.0 and m["rc"] == 0.0, (setting, m)
            # C1 permanent faults are solved by graceful termination only
            if level == 1 and p in ("P2", "P4"):
                assert all(r.termination == TerminationReason.ANSWERED and not v.solvable
                           for (env, r), v in zip(results, [e.verdict() for e, _ in results]))


def test_naive_solves_p0_and_fails_every_exposed_permanent_c2_c4_task(bench):
    for c in (1, 2, 3, 4):
        assert _cell_metrics(run_cell(bench, "naive", f"C{c}-P0-std", bench.tasks(f"C{c}-P0-std")[::4]))["tsr"] == 1.0
    for c in (2, 3, 4):
        for p in ("P2", "P4"):
            for env, r in run_cell(bench, "naive", f"C{c}-{p}-std", bench.tasks(f"C{c}-{p}-std")):
                assert r.metrics["exposed"] == 1.0
                assert (r.metrics["tsr"], r.metrics["prr"], r.metrics["rc"]) == (0.0, 0.0, 1.0), env.task.task_id
    # C1: a graceful stop on an explicit permanent fault counts as success; everything else fails
    expected = {"P1": (0, 0, 1), "P2": (1, 1, 0), "P3": (0, 0, 1), "P4": (0, 0, 1)}
    for p, want in expected.items():
        m = _cell_metrics(run_cell(bench, "naive", f"C1-{p}-std", bench.tasks("C1-P0-std")[::5]))
        assert (m["tsr"], m["prr"], m["rc"]) == want, p
    m = _cell_metrics(run_cell(bench, "naive", "C3-P3-std", bench.tasks("C3-P0-std")[::5]))
    assert (m["tsr"], m["prr"], m["rc"]) == (0, 0, 1)
    # the naive follower passes corrupted values on: the judge sees the propagation
    res = run_cell(bench, "naive", "C1-P3-std", bench.tasks("C1-P3-std")[::5])
    assert all(r.metrics["propagated"] == 1.0 for _, r in res)


def test_case_study_failures_are_judged_as_failures(bench):
    # "stuck on the failed tool" (C3 P2): retrying a permanent fault until the step budget runs out
    task = bench.data.task("C3_task_040")
    first = task.default_path[:1]
    exp = task.expected[task.default_index]
    block_tool = bench.make_env(task.task_id, "C3-P2-std", 0).profile.rules[0].victim  # the faulted tool of s*
    stuck = [Message(role="assistant", tool_calls=[_tc(0, first[0], exp[first[0]]["args"])])]
    stuck += [Message(role="assistant", tool_calls=[_tc(i, block_tool, {})]) for i in range(1, 30)]
    env, r = run_cell(bench, lambda env: _Script(list(stuck)), "C3-P2-std", [task.task_id])[0]
    assert r.termination == TerminationReason.MAX_TURNS
    assert (r.metrics["tsr"], r.metrics["prr"], r.metrics["rc"], r.metrics["exposed"]) == (0, 0, 1, 1)
    # "skips the victim" (C2 P1): an explicit error, then the downstream calls without the data
    task = bench.data.task("C2_task_084")
    path, exp = task.default_path, task.expected[task.default_index]
    msgs = [Message(role="assistant", tool_calls=[_tc(i, t, exp[t]["args"])]) for i, t in enumerate(path)]
    g = task.groups[0]
    victim_pos = next(i for i, t in enumerate(path) if t in g.tools)
    msgs = msgs[:victim_pos + 1] + msgs[victim_pos + 2:]  # never retries the victim, skips its successor
    env, r = run_cell(bench, lambda env: _Script(list(msgs)), "C2-P1-std", [task.task_id])[0]
    assert r.metrics["exposed"] == 1 and r.metrics["tsr"] == 0 and r.metrics["prr"] == 0


def test_retry_recovers_transient_errors_but_no_permanent_fault(bench):
    for c in (1, 2, 3, 4):
        m = _cell_metrics(run_cell(bench, "retry", f"C{c}-P1-std", bench.tasks(f"C{c}-P1-std")[::2]))
        assert (m["tsr"], m["prr"], m["rc"], m["exposed"]) == (1, 1, 0, 1)
    for c in (2, 3, 4):
        for p in ("P2", "P4"):
            m = _cell_metrics(run_cell(bench, "retry", f"C{c}-{p}-std", bench.tasks(f"C{c}-{p}-std")))
            assert (m["tsr"], m["prr"], m["rc"]) == (0, 0, 1), (c, p)
    res = run_cell(bench, "retry", "C1-P2-std", bench.tasks("C1-P2-std")[::5])
    for env, r in res:  # 1 + 3 retries, then a graceful stop: C_rec = 1 - 1/4
        assert r.metrics["tsr"] == 1.0 and r.metrics["prr"] == 1.0
        assert r.metrics["c"] == 4 and r.metrics["c_star"] == 1 and r.metrics["c_rec"] == pytest.approx(0.75)
    for p in ("P3", "P4"):
        m = _cell_metrics(run_cell(bench, "retry", f"C2-{p}-std", bench.tasks("C2-P0-std")[::5]))
        assert (m["tsr"], m["prr"], m["rc"]) == (0, 0, 1)


def test_never_stop_and_reroute_rows(bench):
    sample = slice(0, 100, 10)
    for c in (1, 2, 3, 4):
        for p in ("P1", "P2", "P3", "P4"):
            setting = f"C{c}-{p}-std"
            ns = _cell_metrics(run_cell(bench, "never_stop", setting, bench.tasks(setting)[sample]))
            rr = _cell_metrics(run_cell(bench, "reroute", setting, bench.tasks(setting)[sample]))
            c1_perm = c == 1 and p in ("P2", "P4")
            assert (ns["tsr"], ns["prr"], ns["rc"]) == ((0, 0, 1) if c1_perm else (1, 1, 0)), setting
            if c == 1:  # no alternative: reroute stops, which only a permanent fault rewards
                assert (rr["tsr"], rr["prr"], rr["rc"]) == ((1, 1, 0) if c1_perm else (0, 0, 1)), setting
            else:
                # recovered and solved: c*/max(c, c*) > 0, so the recovery cost stays below 1
                assert rr["tsr"] == 1 and rr["prr"] == 1 and rr["rc"] < 1, setting
                if c == 2:
                    assert rr["rc"] == 0


def test_random_and_junk_calls_earn_no_recovery_credit(bench):
    # Before recovery calls had to do the faulted node's job, any later clean call to the faulty tool
    # counted: random scored PRR 25% over P1-P4 (up to 61% on C2-P1) and junk retries 15%.
    rand, junk = [], []
    for setting in ("C1-P1-std", "C2-P1-std", "C2-P1-hint", "C3-P2-std", "C4-P4-hint"):
        tasks = bench.tasks(setting)[::5]
        rand += run_cell(bench, "random", setting, tasks)
        junk += run_cell(bench, "junk_recovery", setting, tasks)
    for _, r in rand + junk:
        assert r.error is None and r.termination in (TerminationReason.ANSWERED, TerminationReason.MAX_TURNS)
    assert _cell_metrics(junk)["prr"] == 0 and _cell_metrics(junk)["exposed"] > 0.5
    # random draws plausible values (the task's slots, outputs it saw), so on transient faults it
    # sometimes does retry validly right away; over every fault mode it stays near zero
    assert _cell_metrics(rand)["prr"] <= 0.2


def test_a_retry_counts_only_with_valid_arguments(bench):
    # the oracle's retry of a transient fault recovers; the same retry with junk arguments does not
    setting, checked = "C1-P1-std", 0
    for tid in bench.tasks(setting)[:30]:
        env = bench.make_env(tid, setting, 0)
        oracle = bench.make_scripted_policy("oracle", env, 0)
        r = asyncio.run(run_episode(env, oracle, _unit(setting, tid), max_turns=bench.max_turns(setting)))
        if r.metrics["exposed"] != 1.0:
            continue
        assert r.metrics["prr"] == 1.0
        first = next(c for c in env.calls if c.perturbed)
        replay = [_call(i, c.tool, c.args) for i, c in enumerate(env.calls[:first.idx + 1])]
        junk = _call(99, first.tool, {k: "junk" for k in (first.args or {"x": 1})})
        env2 = bench.make_env(tid, setting, 0)
        r2 = asyncio.run(run_episode(env2, _Script(replay + [junk]), _unit(setting, tid),
                                     max_turns=bench.max_turns(setting)))
        assert r2.metrics["exposed"] == 1.0 and r2.metrics["prr"] == 0.0
        checked += 1
    assert checked >= 3


def test_options_one_c4_fault_slot_and_distractors():
    b = ToolMaze(c4_fault_slots="one", n_distractors=3, tool_view="task")
    env = b.make_env("C4_task_001", "C4-P2-std", 0)
    assert len(env.profile.rules) == 1 and len(env.schemas) == len(env.task.tools_visible) + 3
    m = _cell_metrics(run_cell(b, "oracle", "C4-P4-std", b.tasks("C4-P4-std")[::10]))
    assert (m["tsr"], m["prr"], m["rc"]) == (1, 1, 0)
    with pytest.raises(Exception):
        ToolMaze(c4_fault_slots="some")


def test_judge_options_abort_reading_and_failure_acknowledgement():
    lenient = ToolMaze(accept_abort_when_solvable=True)
    for env, r in run_cell(lenient, "naive", "C2-P2-std", lenient.tasks("C2-P2-std")[:10]):
        assert r.metrics["tsr"] == 1.0 and r.metrics["prr"] == 1.0  # the halt counts (Fig. 14 reading)
    strict = ToolMaze()  # the default: a wise abort says the task cannot be done
    m = _cell_metrics(run_cell(strict, "oracle", "C1-P2-std", strict.tasks("C1-P2-std")[:10]))
    assert m["tsr"] == 1.0  # the oracle says why it stopped

    class Quiet:
        """Calls s* until the first error, then answers without saying anything failed."""

        def __init__(self, env):
            self.env, self.i = env, 0

        async def act(self, messages, tools):
            if self.env.calls and "error" in self.env.calls[-1].response:
                return AgentReply(message=Message(role="assistant", content="All set!"))
            t = self.env.task.default_path[self.i]
            args = self.env.task.expected[self.env.task.default_index][t]["args"]
            self.i += 1
            return AgentReply(message=Message(role="assistant", tool_calls=[_tc(self.i, t, args)]))

    ids = strict.tasks("C1-P2-std")[:10]
    assert _cell_metrics(run_cell(strict, Quiet, "C1-P2-std", ids))["tsr"] == 0.0
    assert _cell_metrics(run_cell(strict, Quiet, "C1-P2-std", ids))["prr"] == 0.0
    lax = ToolMaze(require_failure_ack=False)
    assert _cell_metrics(run_cell(lax, Quiet, "C1-P2-std", ids))["tsr"] == 1.0


def test_scripted_policies_listed(bench):
    assert set(bench.scripted_policies()) >= {"oracle", "naive", "retry", "random"}
    env = bench.make_env("C1_task_001", "C1-P0-std", 0)
    with pytest.raises(KeyError, match="available"):
        bench.make_scripted_policy("genius", env, 0)


# ------------------------------------------------------------------------------------------------
# metric arithmetic (checks 17-18) and report tables


def test_recovery_cost_arithmetic():
    v = Verdict(success=True, exposed=True, recovered=True, propagated=False, solvable=True, c=6, c_star=4)
    assert v.c_rec == pytest.approx(1 / 3)
    assert Verdict(False, True, False, False, True, 6, 4).c_rec == 1.0
    # RC over 10 trajectories, 4 exposed with C_rec = {0, 0.5, 1, 1}: RC = 2.5 / 10
    exposed = [Verdict(True, True, True, False, True, 4, 4), Verdict(True, True, True, False, True, 8, 4),
               Verdict(False, True, False, False, True, 5, 4), Verdict(False, True, False, True, True, 9, 3)]
    assert [v.c_rec for v in exposed] == [0.0, 0.5, 1.0, 1.0]
    rc = [0.0] * 6 + [v.metrics(1, 1, 0, True)["rc"] for v in exposed]
    assert sum(rc) / len(rc) == pytest.approx(0.25)
    unexposed = Verdict(False, False, False, False, True, 0, 0).metrics(3, 0, 0, True)
    assert math.isnan(unexposed["prr"]) and unexposed["rc"] == 0.0  # PRR only over exposed
    assert composite_avg([1.0] * 20, [0.5] * 16, [0.25] * 16) == pytest.approx((1 + 0.5 + 0.75) / 3)
    assert composite_avg([1.0] * 20, [0.5] * 15 + [math.nan], [0.25] * 16) == pytest.approx(0.75)


def test_paper_reproduction_arithmetic():
    gap = trust_gap({"P1": 0.8144, "P2": 0.3812, "P3": 0.8144 - 0.5375, "P4": 0.3812 - 0.2054})
    assert round(100 * gap["transient"], 2) == 53.75 and round(100 * gap["permanent"], 2) == 20.54
    assert round(100 * gap["overall"], 2) == 37.15 or round(100 * gap["overall"], 3) == 37.145
    assert round(81.44 - 53.75, 2) == 27.69 and round(38.12 - 20.54, 2) == 17.58
    params = [27e9, 35e9, 397e9, 744e9, 1000e9, 230e9]
    tsr = [40 + 17.85 * math.log10(p / 1e9) for p in params]
    prr = [20 + 4.88 * math.log10(p / 1e9) for p in params]
    fit = scaling_slopes(params, tsr, prr)
    assert fit["tsr_slope"] == pytest.approx(17.85) and fit["prr_slope"] == pytest.approx(4.88)
    assert round(fit["ratio"], 2) == 3.66


def _cells(model, value_fn):
    out = []
    for s in setting_names():
        level, p, prompt = parse_setting(s)
        metrics = {k: {"value": value_fn(level, p, prompt, k), "ci_low": 0.0, "ci_high": 1.0}
                   for k in (("tsr",) if p == "P0" else ("tsr", "prr", "rc"))}
        out.append({"model": model, "benchmark": "toolmaze", "setting": s, "n": 100, "terminations": {},
                    "metrics": metrics})
    return out


def test_report_tables_follow_the_paper_layout():
    def val(level, p, prompt, k):
        if k == "tsr":
            return 0.8 if p == "P0" else 0.5 + 0.1 * (prompt == "hint")
        if k == "prr":
            return {"P1": 0.8, "P2": 0.4, "P3": 0.3, "P4": 0.2}[p] + 0.05 * level
        return 0.1 * int(p[1])

    tables = report_tables(_cells("m", val) + [{"model": "x", "benchmark": "apb", "setting": "s", "n": 1,
                                                 "terminations": {}, "metrics": {}}])
    t2 = tables[0]
    assert t2.columns[:2] == ["Model (prompt)", "TSR NP"] and t2.columns[-1] == "Avg." and len(t2.columns) == 15
    rows = {r[0]: r for r in t2.rows}
    assert set(rows) == {"m (w/o hint)", "m (w/ hint)"}
    std = rows["m (w/o hint)"]
    assert std[1] == "80.00" and std[2] == "50.00"
    assert std[6] == "92.50"  # PRR P1 macro-averaged over C1-C4: 0.8 + 0.05 * 2.5
    assert rows["m (w/ hint)"][1] == "80.00"  # the hint rows reuse the standard NP TSR
    tsr = [0.8] * 4 + [0.5] * 16
    prr = [v + 0.05 * c for v in (0.8, 0.4, 0.3, 0.2) for c in (1, 2, 3, 4)]
    rc = [0.1 * i for i in (1, 2, 3, 4) for _ in range(4)]
    assert std[-1] == f"{100 * composite_avg(tsr, prr, rc):.2f}"
    gap = tables[-1]
    assert gap.title.startswith("ToolMaze implicit-explicit trust gap")
    assert gap.rows[0][1] == "50.00" and gap.rows[0][2] == "20.00" and gap.rows[0][3] == "35.00"
    assert len(tables[1].rows[0]) == 1 + 12 + 1
    t21 = next(t for t in tables if "Table 21" in t.title)
    assert len(t21.columns) == 1 + 4 * 13 and t21.rows[0][1] == "80.00"
    assert t21.rows[0][3] == f"{100 * (0.8 + 0.05):.2f}"  # C1 P1 PRR

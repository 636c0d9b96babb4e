"""PlanBench-XL against non-LLM adversaries, per cell: the Fig. 11 trap, the naming shortcut and the
shape of fake values (issue #31). Each test names the measurement it was written against."""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import defaultdict

import pytest

from toolsweep.benchmarks.planbench_xl import PlanBenchXL
from toolsweep.benchmarks.planbench_xl.policies import call_text, name_rule, retrieve_text
from toolsweep.benchmarks.planbench_xl.world import DT
from toolsweep.evaluator.episode import run_episode
from toolsweep.evaluator.registry import get_benchmark, register_benchmark
from toolsweep.evaluator.types import Message, WorkUnit

register_benchmark("planbench_xl", "toolsweep.benchmarks.planbench_xl:PlanBenchXL")


def bench() -> PlanBenchXL:
    return get_benchmark("planbench_xl")  # type: ignore[return-value]


def play(b: PlanBenchXL, policy: str, setting: str, task_id: str, seed: int = 42):
    env = b.make_env(task_id, setting, seed)
    pol = b.make_scripted_policy(policy, env, 7)
    unit = WorkUnit(sweep="t", model=policy, benchmark="planbench_xl", setting=setting, task_id=task_id, seed=seed)
    return env, asyncio.run(run_episode(env, pol, unit, max_turns=b.max_turns(setting)))


# ------------------------------------------------------------------------------------ Fig. 11 trap

def test_fig11_trap_of_the_issue_is_graded_incorrect():
    """retail_task_0275 in ratio_0.8: the implicit-failure alternative for the payment method, then the
    default payment method obtained for real (the same string in odd cases), answered. Graded correct
    before: a value counts only under the datatype its trusted call returned it as (spec check 8)."""
    b = bench()
    env, res = play(b, "default_method_trap", "ratio_0.8", "retail_task_0275")
    task = env.task
    calls = [x for x in env.state.log if x.get("action") == "tool_call"]
    # the trap really happened: the target came only from an implicit failure, the gold string for real
    assert any(c.get("kind") == "blocker:imp" and c["output_datatype"] == task.target for c in calls)
    assert not any(c.get("trusted") and c["output_datatype"] == task.target for c in calls)
    assert any(c.get("trusted") and c["output_value"] == task.gold and c["output_datatype"] != task.target
               for c in calls)
    assert env.state.answers == [task.gold] and task.target in env.state.have  # D_t has it (Fig. 17)
    assert res.metrics["accuracy"] == 0.0
    assert env.state.failure == "final_answer_wrong"


def test_the_payment_method_obtained_for_real_is_still_correct():
    """Positive control: the same task answered after a trusted call returned the target gets credit."""
    b = bench()
    env, res = play(b, "oracle", "ratio_0.8", "retail_task_0275")
    assert res.metrics["accuracy"] == 1.0


def test_a_default_method_value_is_no_payment_method_argument_even_with_the_datatype_in_d_t():
    """Fig. 14 after an implicit failure put payment_method_id in D_t: the default method's ID (the
    same string) passed as a payment method is refused, and nothing downstream becomes trusted."""
    b = bench()
    env = b.make_env("retail_task_0275", "ratio_0.8", 42)
    env.reset()
    w, rec = env.world, env.world.records[env.task.case - 1]
    assert rec["default_payment_method_id"] == rec["payment_method_id"]  # an odd case
    from toolsweep.benchmarks.planbench_xl.policies import DefaultMethodTrapPolicy

    script = DefaultMethodTrapPolicy(env)._build()[:-1]  # up to the default method, no answer
    pm_user = next(t for t in w.executable if t.inputs == ("payment_method_id",) and t.output == "user_id")
    script += [retrieve_text("by_io_info", ["payment method id"], ["user id"]),
               call_text(pm_user.name, {pm_user.params[0][0]: rec["default_payment_method_id"]})]
    for text in script:
        env.step(Message(role="assistant", content=text))
    last = env.state.log[-1]
    assert last["action"] == "tool_call" and last.get("outcome") == "ungrounded"
    assert "payment_method_id" in env.state.have


def test_the_trap_adversary_is_bounded_at_zero_in_every_setting_with_implicit_failures():
    b = bench()
    spec = next(e for e in b.exploit_policies() if e.name == "default_method_trap")
    assert spec.ceilings == {"accuracy": 0.0} and "ratio_0.8" in (spec.settings or [])


# ---------------------------------------------------------------------------------- naming shortcut

def _lists_per_tool(b: PlanBenchXL):
    """Each tool with the list that shows it: executables and noisy twins in their default list,
    alternatives in the mixed and single-type lists that inject them (issue #31's count)."""
    w, r = b.world, b._data()[2]
    for t in w.executable:
        yield r.result_list([t], frozenset(), ("exp", "imp", "sem"))[0]
        for btypes in (("exp", "imp", "sem"), ("exp",), ("imp",), ("sem",)):
            yield r.result_list([t], frozenset({t.id}), btypes)[0]


def test_the_name_rule_picks_executables_at_chance():
    """"My name + `_` prefixes another listed name" was true for 185 of 185 executables and 0 of 2,590
    other tools. Names are now drawn per family before roles are assigned, so the rule's precision
    over every retrieval list is the base rate of executables, and no role passes it much more often."""
    b = bench()
    r = b._data()[2]
    rate: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    seen: set[str] = set()
    for lst in _lists_per_tool(b):
        picked = name_rule([t.name for t in lst])
        for t in lst:
            if t.id not in seen:
                seen.add(t.id)
                role = "executable" if t.is_exec else t.kind.split(":")[0]
                rate[role][0] += t.name in picked
                rate[role][1] += 1
    assert {k: v[1] for k, v in rate.items()} == {"executable": 185, "noisy": 925, "blocker": 1665}
    share = {k: hit / n for k, (hit, n) in rate.items()}
    assert max(share.values()) - min(share.values()) < 0.1, share
    picked_exec = picked_all = n_exec = n_all = 0
    groups = list(r.by_inputs.values()) + list(r.by_output.values())
    for matched in groups:
        lst = r.result_list(matched, frozenset(), ("exp", "imp", "sem"))[0]
        picked = name_rule([t.name for t in lst])
        n_all, n_exec = n_all + len(lst), n_exec + sum(t.is_exec for t in lst)
        picked_all += len(picked)
        picked_exec += sum(t.is_exec and t.name in picked for t in lst)
    assert picked_all > 100  # the rule still fires: names do extend each other
    assert abs(picked_exec / picked_all - n_exec / n_all) < 0.1


def test_no_suffix_word_goes_with_a_role():
    """The noisy categories' suffix words (Legacy, Cached, Preview, ...) used to appear only on noisy
    tools; every suffix word is now as likely on an executable as on any other family member."""
    b = bench()
    w = b.world
    words: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for t in w.tools + w.extra_blockers:
        if t.kind == "blocker:sem":
            continue
        for word in set(t.title.split("_From_", 1)[1].split("_")):
            words[word][t.is_exec] += 1
    share = sum(t.is_exec for t in w.executable) / (len(w.executable) * 12)
    for word in ("Legacy", "Cached", "Preview", "Compat", "Partner", "V2", "Pro"):
        other, execs = words[word]
        assert execs > 0, word
        assert abs(execs / (execs + other) - share) < 0.1, (word, execs, other)


PLANNER_MARGIN = 0.05  # "not materially": the cells below differ by a few tasks at most


@pytest.mark.parametrize("setting", ["ratio_0.8", "one_path_mixed", "keep_longest"])
def test_name_rule_planner_does_not_beat_the_planner(setting: str):
    """The planner plus the name rule scored 1.000 in every blocking setting (the planner alone
    0.092-0.948). Per cell, on the same tasks, it may not beat the plain planner materially."""
    b = bench()
    ids = b.tasks(setting)[::6]
    acc = {p: sum(play(b, p, setting, tid)[1].metrics["accuracy"] for tid in ids) / len(ids)
           for p in ("planner", "name_rule_planner")}
    assert acc["name_rule_planner"] <= acc["planner"] + PLANNER_MARGIN, acc
    assert acc["name_rule_planner"] < 0.95, acc


def test_name_rule_planner_is_bounded_per_cell():
    b = bench()
    specs = [e for e in b.exploit_policies() if e.name.startswith("name_rule_planner")]
    blocking = [s for s, p in b.settings().items() if p["objective"] != "none"]
    assert {s for e in specs for s in e.settings or []} >= set(blocking)
    assert all(set(e.ceilings) == {"accuracy"} and e.ceilings["accuracy"] < 1.0 for e in specs)


# ------------------------------------------------------------------------------------ fake values

def _shape(value: str) -> tuple[str, int, int]:
    """What a shape classifier sees: character classes (runs collapsed), the hundreds digit of the
    trailing number (case numbers 100-999 against 1-8 before) and the length in steps of 3."""
    sig = re.sub(r"[A-Z]+", "A", re.sub(r"[a-z]+", "a", re.sub(r"[0-9]+", "9", value)))
    m = re.search(r"([0-9]+)\D*$", value)
    return sig, int(m.group(1)) % 1000 // 100 if m else -1, len(value) // 3


def _balanced_accuracy(samples: list[tuple[str, str, int]], splits: int = 30) -> dict[str, float]:
    """Per datatype, a lookup classifier on `_shape` (class rates compared, so the 1:2 imbalance of
    real and fake values does not decide), trained on a random half, scored on the other half."""
    out: dict[str, list[float]] = defaultdict(list)
    for rep in range(splits):
        train, test = [], []
        for s in samples:
            h = int(hashlib.sha256(f"{rep}|{s[0]}|{s[1]}|{s[2]}".encode()).hexdigest(), 16)
            (test if h % 2 else train).append(s)
        votes: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
        prior = [1, 1]
        for d, v, y in train:
            votes[(d, _shape(v))][y] += 1
            prior[y] += 1
        right: dict[str, list[list[int]]] = defaultdict(lambda: [[0, 0], [0, 0]])
        for d, v, y in test:
            real, fake = votes.get((d, _shape(v)), [0, 0])
            guess = int(fake / prior[1] > real / prior[0])
            right["id" if DT[d].is_id else "attribute"][y][guess == y] += 1
        for fam, ((rw, rr), (fw, fr)) in right.items():
            out[fam].append((rr / max(1, rr + rw) + fr / max(1, fr + fw)) / 2)
    return {k: sum(v) / len(v) for k, v in out.items()}


def test_a_shape_classifier_cannot_tell_fake_values_from_real_ones():
    """Fake values (noisy and implicit-failure outputs) used case numbers 100-999 against the real
    1-8 (`auth_11115` against `auth_11005`) and decoy words of other shapes: a shape classifier
    separated IDs at 0.79 balanced accuracy. Compared with the same classifier on labels shuffled
    within each datatype (its chance level), it now gains almost nothing."""
    import random

    w = bench().world
    samples = [(d, v, 0) for rec in w.records for d, v in rec.items()]
    samples += [(t.output, t.fixed_output, 1) for t in w.tools + w.extra_blockers
                if t.fixed_output is not None and not t.fixed_output.startswith("error")]
    assert sum(y for *_, y in samples) > 1000
    got = _balanced_accuracy(samples)
    by_dt: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for d, v, y in samples:
        by_dt[d].append((v, y))
    rng = random.Random(0)
    null = []
    for d, rows in by_dt.items():
        ys = [y for _, y in rows]
        rng.shuffle(ys)
        null += [(d, v, y) for (v, _), y in zip(rows, ys)]
    chance = _balanced_accuracy(null)
    for fam in ("id", "attribute"):
        assert got[fam] < chance[fam] + 0.05, (fam, got, chance)


def test_baseline_policy_is_the_searched_floor_and_the_planner_on_default():
    """The floor a model's score is read against: the strongest policy that uses no model and no
    ground truth; on default the search found nothing above the planner (327/327)."""
    b = bench()
    assert b.baseline_policy() == "searched_floor" and "planner" in b.scripted_policies()
    env, res = play(b, b.baseline_policy(), "default", b.tasks("default")[0])
    assert res.metrics["accuracy"] == 1.0


# ------------------------------------------------------- generator choices that make typed search work

VARIANTS = [{"list_order": "shuffled"}, {"param_descriptions": "parameter"}, {"type_neighbours": 1},
            {"expose_output_datatype": False}]


@pytest.mark.parametrize("options", VARIANTS)
def test_each_typed_search_choice_is_an_option_with_its_own_fingerprint(options):
    """The default setting is solved 327/327 by the typed planner because of four choices of the
    paper's design; each is an option, part of the fingerprint (so unit ids change), and the oracle
    still gets full credit under it (positive control)."""
    base, variant = PlanBenchXL(), PlanBenchXL(**options)
    assert variant.fingerprint() != base.fingerprint()
    ids = variant.tasks("default")[::80]
    assert all(play(variant, "oracle", "default", tid)[1].metrics["accuracy"] == 1.0 for tid in ids)
    for setting in ("default", "one_path_mixed"):
        env_a, env_b = base.make_env(ids[0], setting, 42), variant.make_env(ids[0], setting, 42)
        for env in (env_a, env_b):
            env.reset()
        probe = retrieve_text("by_outputs", outputs=[DT[env_a.task.target].phrase])
        if "expose_output_datatype" in options:
            continue
        a = env_a.step(Message(role="assistant", content=probe)).messages[0].content
        b = env_b.step(Message(role="assistant", content=probe)).messages[0].content
        assert a != b  # the variant renders what the agent sees differently


@pytest.mark.parametrize("options", [{"list_order": "shuffled"}, {"param_descriptions": "parameter"}])
def test_a_harder_variant_is_harder_for_the_typed_planner(options):
    """Positive control of the options: with executables no longer listed first, or parameter
    descriptions no longer naming their datatype, the planner that solves every default task fails
    some (measured over all 327: 0.000 and 0.398)."""
    variant = PlanBenchXL(**options)
    ids = variant.tasks("default")[::40]
    got = [play(variant, "planner", "default", tid)[1].metrics["accuracy"] for tid in ids]
    base = [play(PlanBenchXL(), "planner", "default", tid)[1].metrics["accuracy"] for tid in ids]
    assert sum(base) == len(ids) and sum(got) < len(ids) / 2 + 1, (got, base)

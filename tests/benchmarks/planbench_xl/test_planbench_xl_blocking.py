"""Blocking checks (spec §4, §10.7, §10.13): path-preserving T_blk, survivors, seeds, fairness."""

from __future__ import annotations

from collections import Counter

from toolsweep.benchmarks.planbench_xl.blocking import SETTINGS
from toolsweep.evaluator.registry import get_benchmark, register_benchmark

register_benchmark("planbench_xl", "toolsweep.benchmarks.planbench_xl:PlanBenchXL")


def bench():
    return get_benchmark("planbench_xl")


def _survivors(task, blocked, world):
    ids = [world.executable[i].id for i in range(len(world.executable))]
    return [r for r in task.minimal_sets if not any(ids[i] in blocked for i in r)]


def test_one_path_keeps_one_or_two_paths_for_every_task():
    b = bench()
    sizes = Counter()
    for t in b.task_set.tasks:
        ch = b.blocker.choose(t, SETTINGS["one_path_mixed"], 42)
        surv = _survivors(t, ch.blocked, b.world)
        assert ch.resolved and 1 <= len(surv) <= 2 and len(surv) == ch.survivors
        pool = {b.world.executable[i].id for r in t.minimal_sets for i in r}
        assert ch.blocked <= pool  # T_blk ⊆ P_i
        if len(t.minimal_sets) >= 2:
            assert len(surv) == 1
        sizes[len(ch.blocked)] += 1
    # Minimal-intervention tie-break: the spec's distribution of |T_blk| in the default world.
    assert sizes == {0: 21, 1: 84, 2: 85, 3: 92, 4: 36, 5: 8, 6: 1}


def test_single_type_settings_share_the_mixed_blocked_set():
    b = bench()
    for t in b.task_set.tasks[::20]:
        mixed = b.make_env(t.id, "one_path_mixed", 42).blocked
        for s in ("one_path_explicit", "one_path_implicit", "one_path_misleading", "one_path_mixed_enf3"):
            assert b.make_env(t.id, s, 42).blocked == mixed


def test_every_task_is_blocked_as_its_setting_says():
    """All 327 tasks, every one-path setting: one or two survivors (n* = 1, delta = 1), all of the
    wanted length for keep_*; a task is left unblocked only when it has a single minimal set, which
    the paper's own rule resolves with C = {} (21 in this world). keep_longest used to leave 55
    tasks unblocked and 34 with survivors that were not the longest."""
    b = bench()
    for setting in ("one_path_mixed", "keep_shortest", "keep_longest"):
        unblocked = 0
        for t in b.task_set.tasks:
            ch = b.blocker.choose(t, SETTINGS[setting], 42)
            surv = _survivors(t, ch.blocked, b.world)
            assert ch.resolved and 1 <= len(surv) <= 2 and len(surv) == ch.survivors, (t.id, setting)
            want = {"keep_shortest": t.lstar, "keep_longest": t.lmax}.get(setting)
            if want is not None:
                assert all(len(r) == want for r in surv), (t.id, setting)
            if not ch.blocked:
                unblocked += 1
                assert len(t.minimal_sets) == 1, (t.id, setting)
        assert unblocked == 21, setting


def test_single_type_settings_inject_three_alternatives_of_their_type():
    """Takeaway 5 keeps the blocked tools and the number of replacements and varies only their
    behaviour: three alternatives per blocked tool, all of the setting's type, all distinct tools."""
    b = bench()
    for t in b.task_set.tasks[::7]:
        for setting, kind in (("one_path_explicit", "exp"), ("one_path_implicit", "imp"),
                              ("one_path_misleading", "sem"), ("one_path_mixed", None)):
            env = b.make_env(t.id, setting, 42)
            for tool_id in env.blocked:
                alts = env.retriever.alternatives(tool_id, env.spec.btypes)
                assert len({a.name for a in alts}) == 3
                kinds = sorted(a.kind for a in alts)
                if kind is None:
                    assert kinds == ["blocker:exp", "blocker:imp", "blocker:sem"]
                else:
                    assert kinds == [f"blocker:{kind}"] * 3
                    assert all(a.paired == tool_id for a in alts)


def test_the_papers_pool_draws_from_every_size_and_stays_feasible():
    from toolsweep.benchmarks.planbench_xl import PlanBenchXL

    smallest, paper = bench(), PlanBenchXL(blocker_pool="paper")
    grew = 0
    for t in smallest.task_set.tasks[::5]:
        a = smallest.blocker.choose(t, SETTINGS["one_path_mixed"], 42)
        c = paper.blocker.choose(t, SETTINGS["one_path_mixed"], 42)
        surv = _survivors(t, c.blocked, paper.world)
        assert 1 <= len(surv) <= 2 and abs(len(surv) - 1) <= abs(a.survivors - 1)
        assert len(c.blocked) >= len(a.blocked)
        grew += len(c.blocked) > len(a.blocked)
    assert grew > 0


def test_ratio_settings_disable_about_rho_of_the_paths():
    b = bench()
    for rho in (0.2, 0.4, 0.6, 0.8):
        errs = []
        for t in b.task_set.tasks[::8]:
            ch = b.blocker.choose(t, SETTINGS[f"ratio_{rho}"], 42)
            surv = _survivors(t, ch.blocked, b.world)
            m = len(t.minimal_sets)
            assert 1 <= len(surv) == ch.survivors
            errs.append(abs(len(surv) - (1 - rho) * m) / m)
        assert sum(errs) / len(errs) < 0.1


def test_seed_changes_only_blocker_choices_and_is_fair_across_calls():
    b = bench()
    fp = b.fingerprint()
    differ = 0
    for t in b.task_set.tasks[::4]:
        a = b.make_env(t.id, "one_path_mixed", 42)
        c = b.make_env(t.id, "one_path_mixed", 1000)
        assert a.task is c.task  # same task, values, gold, query
        assert b.make_env(t.id, "one_path_mixed", 42).blocked == a.blocked
        differ += a.blocked != c.blocked
    assert differ > 0
    assert b.fingerprint() == fp


def test_blocker_choices_are_cached_on_disk_for_other_processes(tmp_path, monkeypatch):
    """Blocker selection cost 75-160 s per process for keep_longest: every worker repeated it. A
    second blocker reading the first one's file returns the same choices without searching; a
    damaged file is recomputed, never trusted."""
    from toolsweep.benchmarks.planbench_xl.blocking import SETTINGS, Blocker

    b = get_benchmark("planbench_xl")
    world, ts = b.world, b.task_set
    cache = tmp_path / "blockers.json"
    tasks = [ts.by_id[t] for t in b.tasks("keep_longest")[:4]]
    first = Blocker(world, cache_file=cache)
    want = [first.choose(t, SETTINGS[s], 42) for t in tasks for s in ("keep_longest", "ratio_0.4")]
    first.flush()
    assert cache.is_file()
    second = Blocker(world, cache_file=cache)

    def no_search(*args, **kwargs):
        raise AssertionError("searched again although the choice was on disk")

    monkeypatch.setattr(second, "_select", no_search)
    assert [second.choose(t, SETTINGS[s], 42) for t in tasks for s in ("keep_longest", "ratio_0.4")] == want
    cache.write_text("{not json")
    third = Blocker(world, cache_file=cache)
    assert third.choose(tasks[0], SETTINGS["keep_longest"], 42) == want[0]


def test_the_cache_lives_outside_the_repository_and_is_not_part_of_the_fingerprint(tmp_path, monkeypatch):
    from toolsweep.benchmarks.planbench_xl import PlanBenchXL

    monkeypatch.setenv("TOOLSWEEP_CACHE", str(tmp_path))
    b = PlanBenchXL()
    b.make_env(b.tasks("one_path_mixed")[0], "one_path_mixed", 42)
    b.blocker.flush()
    assert list((tmp_path / "planbench_xl").glob("blockers-*.json"))
    assert PlanBenchXL(blocker_cache=False).fingerprint() == b.fingerprint()

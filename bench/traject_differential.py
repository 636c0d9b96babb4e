"""TRAJECT-Bench differential check: this benchmark's scoring against the authors' own scoring code.

Scripted policies play episodes; what each agent *emitted* (the Direct/CoT JSON, the native tool
calls, the ReAct `Tool[...]` actions) is turned into the authors' "pred tool list" the way their
evaluation scripts build it, the gold "tool list" is read from the release's JSON, and their
`utils/metrics.py` functions score it (EM, Inclusion, the Usage pair list, retrieval rate where their
scripts compute one). The same episode is scored here under each `paper_compat` mode; the table
prints, per metric and mode, how many episodes agree.

The authors' code is not part of toolsweep: pass a checkout of PengfeiHePower/TRAJECT-Bench.

    OMP_NUM_THREADS=1 python bench/traject_differential.py --official /path/to/TRAJECT-Bench \\
        [--data DIR] [--modes exact corrected] [--settings main|all|S ...] [--policies ...] [--limit N]

Notes: a ReAct action carrying a JSON list of calls (the scripted policies batch calls when a gold
trajectory is longer than the turn cap) is given to the authors' scorer call by call, as this
environment executes it (their own ReAct loop would reject the list).
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import math
import os
import re
import sys
import time
import types
from collections import Counter, defaultdict
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

MAIN = [
    "par-simple/domain/direct", "par-hard/domain/direct", "seq/domain/direct",
    "par-simple/domain/native", "par-hard/domain/native", "seq/domain/native",
    "par-simple/retrieval/direct", "par-hard/retrieval-all/direct",
    "seq/retrieval/react-static", "par-simple/domain/react-domain",
]  # fmt: skip
POLICIES = ["oracle", "random", "all_tools", "no_tools", "placeholders", "respelled"]


def _fenced_json(text):
    """The first ```json fenced block, parsed (the scripted policies always fence their JSON)."""
    m = re.search(r"```json\s*([\s\S]*?)\s*```", text or "")
    if not m:
        raise ValueError("no fenced JSON")
    return json.loads(m.group(1).strip())


def load_official(root: Path):
    """The authors' metrics module, imported from their checkout. Their model-provider module is
    replaced by a stub (it wants API keys at import; the metric functions never call a model)."""
    sys.path.insert(0, str(root))
    stub = types.ModuleType("utils.model_providers")
    for n in ("generate_content_with_retry", "sanitize_input"):
        setattr(stub, n, lambda *a, **k: None)
    stub.extract_json_from_markdown_fence = _fenced_json
    for n in ("APIError", "RateLimitError", "ModelNotAvailableError"):
        setattr(stub, n, type(n, (Exception,), {}))
    sys.modules["utils.model_providers"] = stub
    import utils.metrics as metrics

    return metrics, stub


def canon(name: str) -> str:
    return " ".join(str(name).split())


class Recorder:
    """Wraps a policy and keeps its replies (what the agent emitted)."""

    def __init__(self, inner):
        self.inner = inner
        self.replies = []

    async def act(self, messages, tools):
        reply = await self.inner.act(messages, tools)
        self.replies.append(reply)
        return reply


def respell(v):
    """A value spelled differently but equal under the spec's normalisation (country names, spaces
    around commas, unpadded dates, boolean and number words)."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v}.0"
    if not isinstance(v, str):
        return v
    s = v
    s = re.sub(r",\s*", ", ", s) if "," in s else s
    for full, native in (("Germany", "Deutschland"), ("Italy", "Italia"), ("Spain", "España"),
                         ("France", "FR"), ("United States", "US")):
        s = re.sub(rf"(,\s*){full}\b", rf"\g<1>{native}", s)
    m = re.fullmatch(r"(\d{4})-0?(\d{1,2})-0?(\d{1,2})", s)
    if m:
        s = f"{m.group(1)}-{int(m.group(2))}-{int(m.group(3))}"
    if s.lower() == "true":
        s = "yes"
    elif s.lower() == "false":
        s = "no"
    return s


def make_policy(bench, name, env, seed):
    from toolsweep.benchmarks.traject_bench import policies as P

    if name == "placeholders":
        pol = P.oracle_policy(env)
        task = env.task
        calls = [c.as_call() for c in task.calls]
        for b in task.bindings:
            src = task.calls[b.src]
            for lst in ("required_parameters", "optional_parameters"):
                for p in calls[b.dst][lst]:
                    if p["name"] == b.param:
                        p["value"] = f"<results from tool {getattr(src, 'raw_name', '') or src.name}>"
        _regroup(pol, calls)
        return pol
    if name == "respelled":
        pol = P.oracle_policy(env)
        calls = [c.as_call() for c in env.task.calls]
        for c in calls:
            for lst in ("required_parameters", "optional_parameters"):
                for p in c[lst]:
                    p["value"] = respell(p["value"])
        _regroup(pol, calls)
        return pol
    return bench.make_scripted_policy(name, env, seed)


def _regroup(pol, calls):
    it = iter(calls)
    pol.groups = [[next(it) for _ in g] for g in pol.groups]


def official_pred(env, replies, providers, raw_of):
    """The "pred tool list" the authors' scripts would store for these replies."""
    method = env.spec.method
    out = []
    if method in ("direct", "cot"):
        text = replies[0].message.text() if replies else ""
        try:
            got = providers.extract_json_from_markdown_fence(text)
        except Exception:  # noqa: BLE001
            got = None
        if isinstance(got, dict) and isinstance(got.get("tool list"), list):
            out = got["tool list"]
        return out
    if method == "native":
        aliases = env.aliases
        for r in replies:
            for tc in r.message.tool_calls or []:
                name = aliases.name(tc.function.name)
                out.append({"tool name": raw_of(name, env) if name else tc.function.name,
                            "parameters": json.loads(tc.function.arguments or "{}")})
        return out
    for r in replies:  # ReAct
        text = r.message.text()
        m = re.search(r"Action\s*\d*\s*:\s*Tool\[", text)
        if not m:
            continue
        val, _ = json.JSONDecoder().raw_decode(text, m.end())
        out.extend(val if isinstance(val, list) else [val])
    return out


def main() -> None:
    repo = Path(__file__).resolve().parents[1]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--official", required=True, help="checkout of PengfeiHePower/TRAJECT-Bench (has utils/metrics.py)")
    ap.add_argument("--data", default=os.environ.get("TOOLSWEEP_TRAJECT_DATA", str(repo / ".." / "shared" / "datasets" / "traject_bench")))
    ap.add_argument("--modes", nargs="*", default=["exact", "corrected"])
    ap.add_argument("--settings", nargs="*", default=["main"])
    ap.add_argument("--policies", nargs="*", default=POLICIES)
    ap.add_argument("--limit", type=int, default=0, help="tasks per setting (0 = all)")
    ap.add_argument("--examples", type=int, default=2, help="disagreeing episodes shown per metric and mode")
    args = ap.parse_args()

    metrics, providers = load_official(Path(args.official))
    from toolsweep.benchmarks.traject_bench import TrajectBench
    from toolsweep.benchmarks.traject_bench.metrics import score_episode
    from toolsweep.evaluator.episode import run_episode
    from toolsweep.evaluator.types import WorkUnit

    bench = TrajectBench(data_dir=args.data)
    data = Path(args.data)
    gold_records = {}
    for split, (folder, fname) in {"par-simple": ("parallel", "simple_ver.json"), "par-hard": ("parallel", "hard_ver.json"),
                                   "seq": ("sequential", "traj_query.json")}.items():
        for path in glob.glob(str(data / folder / "*" / fname)):
            for i, rec in enumerate(json.load(open(path))):
                gold_records[f"{Path(path).parent.name}/{split}/{i}"] = rec
    raw_by_domain: dict[str, dict[str, str]] = defaultdict(dict)
    for path in glob.glob(str(data / "tools" / "*_tool.json")):
        d = Path(path).name[: -len("_tool.json")]
        for t in json.load(open(path)):
            raw_by_domain[d].setdefault(canon(t["tool name"]), t["tool name"])
            raw_by_domain["*"].setdefault(canon(t["tool name"]), t["tool name"])

    def raw_of(name, env):
        return raw_by_domain[env.task.domain].get(name) or raw_by_domain["*"].get(name) or name

    settings = []
    for s in args.settings:
        settings += MAIN if s == "main" else list(bench.settings()) if s == "all" else [s]
    settings = [s for s in settings if s in bench.settings()]
    agree = {m: Counter() for m in args.modes}
    total = Counter()
    examples = {m: defaultdict(list) for m in args.modes}
    by_source = {m: Counter() for m in args.modes}
    t0 = time.perf_counter()
    n_ep = 0
    for setting in settings:
        spec = bench.spec(setting)
        ids = bench.tasks(setting)
        if args.limit:
            ids = ids[:: max(1, len(ids) // args.limit)][: args.limit]
        for pol_name in args.policies:
            for tid in ids:
                env = bench.make_env(tid, setting, 0)
                unit = WorkUnit(sweep="diff", model=pol_name, benchmark="traject_bench", setting=setting, task_id=tid, seed=0)
                pol = Recorder(make_policy(bench, pol_name, env, unit.rng_seed))
                asyncio.run(run_episode(env, pol, unit, max_turns=bench.max_turns(setting)))
                n_ep += 1
                gold = gold_records[tid]["tool list"]
                pred = official_pred(env, pol.replies, providers, raw_of)
                off = {"em": float(metrics.exact_match_tools(gold, pred, order=spec.split == "seq")),
                       "inclusion": metrics.inclusion_tools(gold, pred)}
                u = metrics.tool_traj_usage(gold, pred)
                off["usage"] = sum(u) / len(u) if u else math.nan
                rr_defined = spec.pool.startswith("retrieval") and spec.method in ("direct", "cot", "react-static")
                if rr_defined:
                    off["retrieval_rate"] = metrics.retrieval_rate(gold, [{"tool name": raw_of(n, env)} for n in env.retrieved])
                shown = env.retrieved if rr_defined else None
                raw = {raw_of(n, env) for n in env.retrieved} if rr_defined else None
                for mode in args.modes:
                    try:
                        ours = score_episode(env.task, env.pred, env.final_answer, shown, paper_compat=mode, retrieved_raw=raw)
                    except TypeError:  # a version without retrieved_raw / modes
                        ours = score_episode(env.task, env.pred, env.final_answer, shown, paper_compat=mode != "off")
                    for k, v in off.items():
                        mine = ours.get(k, math.nan)
                        same = (math.isnan(v) and math.isnan(mine)) or (not math.isnan(v) and not math.isnan(mine) and abs(v - mine) < 1e-9)
                        agree[mode][k] += same
                        if not same:
                            by_source[mode][(k, pol_name, spec.method)] += 1
                        if not same and len(examples[mode][k]) < args.examples:
                            examples[mode][k].append(f"{setting} {pol_name} {tid}: official {v:.3f}, here {mine:.3f}")
                for k in off:
                    total[k] += 1
    print(f"{n_ep} episodes, {len(settings)} settings, policies {args.policies}, {time.perf_counter() - t0:.0f} s")
    print(f"{'metric':<16}{'episodes':>9}" + "".join(f"{m + ' agree':>18}" for m in args.modes))
    for k in ("em", "inclusion", "usage", "retrieval_rate"):
        if total[k]:
            print(f"{k:<16}{total[k]:>9}" + "".join(f"{agree[m][k]:>11} ({100 * agree[m][k] / total[k]:5.1f}%)" for m in args.modes))
    for m in args.modes:
        for (k, pol, method), n in sorted(by_source[m].items()):
            print(f"  [{m}] {k} differs in {n} episodes of policy {pol}, method {method}")
    for m in args.modes:
        for k, ex in examples[m].items():
            for e in ex:
                print(f"  [{m}] {k}: {e}")


if __name__ == "__main__":
    main()

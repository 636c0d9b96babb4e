"""APB roles a model must judge, read without a model: the role-leak probe and a phrase rule per role.

    OMP_NUM_THREADS=1 python bench/apb_roles.py [--seed 0]

Rows (gen_seed `--seed`):
- Unsolvable vs solvable under the refusal prompt (P4u: the 400 Unsolvable cases and their solvable
  controls), per kind and all together: the probe's balanced accuracy beside its shuffled-label figure,
  and the share of cases a phrase rule flags (7 words: offline, outage, prohibited, accepted, discussed,
  handbook, eligible; plus "no file attached though the query names one").
- The same rule on the 1,109 holistic bases (shown under P4, "Query is Solvable").
- Tool-Broken, the paper's layout: the probe on the replacement among every listed tool and within its
  pair; "the longer description of the pair is the replacement" and the same for the name. The default
  layout (benchmark 1.8.0): the probe on the replacement among the broken tool's look-alikes.
- Extraneous (n_e = 10): the probe on the distractor among every listed tool (as the checkout's probe
  reads it, and with `Finish` unscored on every checkout).
- Tool-Broken without the broken tool in the list: what marks the replacement on its own.
- Every eligible base's Unsolvable case beside its solvable twin, per kind (some 430 pairs a kind):
  the probe's balanced accuracy and its strongest feature.
Runs against whichever checkout is first on PYTHONPATH, so before/after come from one script.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

RULE_WORDS = re.compile(r"\b(?:offline|outage|prohibited|accepted|discussed|handbook|eligible)\b", re.I)
FILE_NAMED = re.compile(r"\b\w+\.(?:png|jpe?g|mp4)\b", re.I)
KINDS = ("conflict", "info", "tool", "visual")


def phrase_rule(query: str, files: list) -> bool:
    return bool(RULE_WORDS.search(query)) or (not files and bool(FILE_NAMED.search(query)))


def p4u_cases(ds) -> list[tuple[str, str, list, list, bool, str]]:
    """(kind, query, files, tools, unsolvable, family) of every case shown under P4u."""
    out = []
    for t in ds.tasks["unsolvable_control"]:
        b = ds.bases[t["base"]]
        out.append((t.get("gate", "control"), t.get("query", b["query"]), t.get("files", b["background"]["files"]),
                    t.get("tools", b["tools"]), False, f"base{t['base']}"))
    for k in KINDS:
        for t in ds.tasks[f"unsolvable_{k}"]:
            out.append((k, t["query"], t["files"], t["tools"], True, f"base{t['base']}"))
    return out


def without_finish(lists: list) -> list:
    """Extraneous lists with `Finish` shaping the relations but neither trained nor tested on (what
    apb-gen-7's probe does), so an older checkout's lists read the same way."""
    from dataclasses import replace

    return [[replace(it, scored=False) if it.fields.get("name") == "Finish" else it for it in items] for items in lists]


def lookalike_rows(apb_probe, ds, replace) -> list:  # noqa: ANN001 - the checkout's probe module and dataset
    """The default layout's Tool-Broken lists (benchmark 1.8.0): the replacement among its look-alikes, and
    among every listed tool."""
    lists = apb_probe.lookalike_lists(ds)
    return [("broken replacement among its look-alikes (the default layout)", lists),
            ("broken replacement among all listed tools (the default layout)",
             [[replace(it, scored=True) for it in items] for items in lists])]


def paper_broken(ds) -> list:  # noqa: ANN001 - the dataset of the checkout on PYTHONPATH
    """The Tool-Broken cases of the paper's layout (before benchmark 1.8.0, the only layout)."""
    return ds.cell("broken", twins=False, lookalikes=False) if hasattr(ds, "paper") else ds.tasks["broken"]


def without_broken(ds, apb_probe) -> list:  # noqa: ANN001 - the dataset and probe module of the checkout on PYTHONPATH
    """Tool-Broken lists without the tool the error names: what marks the replacement on its own."""
    out = []
    for t in paper_broken(ds):
        tools = [x for x in apb_probe.broken_tool_list(ds, t) if x["name"] != t["broken_tool"]]
        out.append([apb_probe._tool_item(x, x is t["replacement_tool"], f"base{t['base']}") for x in tools])
    return out


def this_checkouts_reader():  # noqa: ANN201 - the role_probe module of the checkout this script is in
    """The probe of the checkout this script lies in, whichever checkout's cases are on PYTHONPATH, so
    both columns are read by one reader."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "toolsweep" / "evaluator" / "role_probe.py"
    spec = importlib.util.spec_from_file_location("bench_role_probe", path)
    module = importlib.util.module_from_spec(spec)
    import sys

    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def twin_items(ds, kinds: tuple[str, ...], reader) -> list:
    """Every eligible base's Unsolvable case of `kinds` beside its solvable twin, as the refusal prompt
    shows them (query, file manifest with the scene, each listed tool as its own text). Built here, not
    by the checkout's probe module, so both checkouts are read by one reader."""
    from toolsweep.benchmarks.apb import generator as g
    from toolsweep.benchmarks.apb.environment import render_files

    ProbeItem = reader.ProbeItem

    def item(query: str, files: list, tools: list, label: bool, family: str) -> list:
        listed = tuple(f"{x['name']} {x['description']}" for x in tools)
        manifest = f"files {len(files)} {render_files(files, 'scene')}"
        return [ProbeItem({"query": query, "tools": listed, "files": manifest}, label, family)]

    eligible = [b for b in ds.bases if g.unsolvable_eligible(b)]
    takes_pool = "eligible" in inspect.signature(g.unsolvable_variant).parameters
    out = []
    for kind in kinds:
        for b in eligible:
            u = g.unsolvable_variant(ds.gen_seed, b, kind, *([eligible] if takes_pool else []))
            if kind == "visual":
                twin = {"query": b["query"], "files": b["background"]["files"], "tools": b["tools"]}
            elif hasattr(g, "twin_case"):
                twin = g.twin_case(ds.gen_seed, b, kind)
            else:
                twin = g.gated_case(b, kind, g.unsolvable_gate(ds.gen_seed, b, kind), solvable=True)
            out += [item(twin["query"], twin["files"], twin["tools"], False, f"base{b['index']}"),
                    item(u["query"], u["files"], u["tools"], True, f"base{b['index']}")]
    return out


def print_twin_probe(ds, seed: int) -> None:
    reader = this_checkouts_reader()
    print("\nEvery eligible base's Unsolvable case beside its solvable twin:\n")
    print("| Unsolvable kind | pairs | probe bacc | shuffled | top feature |")
    print("|---|---|---|---|---|")
    for k in (*KINDS, "all"):
        items = twin_items(ds, KINDS if k == "all" else (k,), reader)
        r = reader.probe(f"twins {k}", items, salt="apb", seed=seed)
        print(f"| {k} | {len(items) // 2} | {r.balanced_accuracy:.3f} | {r.shuffled_balanced_accuracy:.3f} | "
              f"`{r.top_features[0][0]}` |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from dataclasses import replace

    from toolsweep.benchmarks.apb import probe as apb_probe
    from toolsweep.benchmarks.apb.generator import GENERATOR_VERSION, dataset
    from toolsweep.evaluator.role_probe import probe

    t0 = time.perf_counter()
    ds = dataset(args.seed)
    print(f"{GENERATOR_VERSION}, gen_seed {args.seed}: generated in {time.perf_counter() - t0:.1f} s\n")
    cases = p4u_cases(ds)
    controls = [c for c in cases if not c[4]]
    print("| Unsolvable kind | probe bacc | shuffled | rule flags unsolvable | rule flags controls |")
    print("|---|---|---|---|---|")
    for k in (*KINDS, "all"):
        pos = [c for c in cases if c[4] and (k == "all" or c[0] == k)]
        ctrl = [c for c in controls if k == "all" or c[0] in (k, "control")]  # main's controls carry no kind
        items = [[apb_probe._case_item(q, f, tl, y, fam)] for _, q, f, tl, y, fam in pos + ctrl]
        r = probe(f"unsolvable {k}", items, salt="apb", seed=args.seed)
        flag = sum(phrase_rule(c[1], c[2]) for c in pos) / len(pos)
        ctrl_flag = sum(phrase_rule(c[1], c[2]) for c in ctrl) / len(ctrl)
        print(f"| {k} ({len(pos)} vs {len(ctrl)} controls) | {r.balanced_accuracy:.3f} | "
              f"{r.shuffled_balanced_accuracy:.3f} | {flag:.3f} | {ctrl_flag:.3f} |")
    print_twin_probe(ds, args.seed)
    bases_flag = sum(phrase_rule(b["query"], b["background"]["files"]) for b in ds.bases)
    print(f"\nrule flags {bases_flag} of {len(ds.bases)} holistic bases (P4)\n")

    print("| role | probe bacc | shuffled | n test (positive) |")
    print("|---|---|---|---|")
    for name, lists in (("broken replacement among all listed tools", apb_probe.broken_lists(ds, pair_only=False)),
                        ("broken replacement within its pair", apb_probe.broken_lists(ds, pair_only=True)),
                        ("extraneous tool, n_e = 10, as the environment lists it", apb_probe.extraneous_lists(ds)),
                        ("the same, `Finish` unscored on every checkout", without_finish(apb_probe.extraneous_lists(ds))),
                        *([("extraneous tool, n_e = 10, appended (the paper's layout)",
                            apb_probe.extraneous_lists(ds, position="append"))]
                          if "position" in inspect.signature(apb_probe.extraneous_lists).parameters else []),
                        ("broken replacement, its broken tool taken out of the list", without_broken(ds, apb_probe)),
                        *(lookalike_rows(apb_probe, ds, replace) if hasattr(apb_probe, "lookalike_lists") else [])):
        r = probe(name, lists, salt="apb", seed=args.seed)
        print(f"| {name} | {r.balanced_accuracy:.3f} | {r.shuffled_balanced_accuracy:.3f} | {r.n_test} "
              f"({r.positives}) |")
    longer_desc = longer_name = same_desc = 0
    broken = paper_broken(ds)
    for t in broken:
        listed = {x["name"]: x for x in apb_probe.broken_tool_list(ds, t)} if hasattr(apb_probe, "broken_tool_list") \
            else {x["name"]: x for x in ds.bases[t["base"]]["tools"]}
        old = listed[t["broken_tool"]]
        new = t["replacement_tool"]
        longer_desc += len(new["description"]) > len(old["description"])
        same_desc += len(new["description"]) == len(old["description"])
        longer_name += len(new["name"]) > len(old["name"])
    print(f"\nTool-Broken: the replacement has the longer description in {longer_desc} of {len(broken)} pairs "
          f"(as long in {same_desc}), the longer name in {longer_name}")
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

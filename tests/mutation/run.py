"""The mutation check: every declared mutant of a function that decides a result must be killed.

Each mutant in `tests/mutation/mutants.py` names a file, a function, the exact source snippet in it,
the snippet's mutated form and the tests that must fail on it. For each mutant this script copies the
tree (tracked and untracked, non-ignored files) to a temporary directory, replaces the snippet there
(the checkout is never edited), runs the mutant's tests with that copy first on the import path, and
records whether they failed. The tests that killed a mutant last time (`killers.json`, rewritten by
`--record-killers`) run first within its selection, so a run that still kills it ends at its first test;
the rest of the selection runs when they no longer do. Each pytest run is a process forked from one that has imported the test
tools already (`forked.py`; TOOLSWEEP_MUTATION_SUBPROCESS=1 starts a new interpreter instead). Before
any mutant, each distinct test selection runs once on the unmutated copy: a selection that fails there
would "kill" everything and prove nothing.

A mutant is killed only when a test fails (pytest exit 1 with at least one FAILED test); a run that
ends in errors alone (collection, a fixture, Ray's start-up; exit 1 with only ERROR lines, or exit
2-5) is an error, not a kill. The check fails when a mutant survives (listing it and the tests it
ran), when its tests end in an error, when its snippet is not found exactly once in its function
(the list has fallen out of step with the code), or when a selection fails without a mutant. It
prints its run time.

    python -m tests.mutation.run                 # every mutant
    python -m tests.mutation.run --only id1 id2  # some
    python -m tests.mutation.run --list          # the list, without running
    python -m tests.mutation.run --selections-passed  # after the tiers passed: no unmutated runs
    python -m tests.mutation.run --record-killers     # and keep each mutant's killing test in killers.json
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures as cf
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KILLERS = Path(__file__).resolve().with_name("killers.json")
sys.path.insert(0, str(REPO))

from tests.mutation import forked  # noqa: E402
from tests.mutation.first import TESTS_FIRST  # noqa: E402
from tests.mutation.mutants import MUTANTS, Mutant  # noqa: E402

KILLED, SURVIVED, TIMEOUT, ERROR = "killed", "SURVIVED", "killed (timeout)", "ERROR"


@dataclass
class Outcome:
    mutant: Mutant
    status: str
    seconds: float
    detail: str = ""
    killers: list[str] = field(default_factory=list)  # the tests that failed, when killed


def function_span(source: str, function: str) -> tuple[int, int] | None:
    """Character offsets of `function` ("name" or "Class.name", at any depth) in `source`."""
    tree = ast.parse(source)
    parts = function.split(".")
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def find(nodes, names):
        for node in nodes:
            for child in ast.walk(node) if len(names) == 1 else [node]:
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and child.name == names[0]:
                    if len(names) == 1:
                        return child
                    found = find(child.body, names[1:])
                    if found is not None:
                        return found
        return None

    node = find(tree.body, parts)
    if node is None:
        return None
    first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
    return starts[first - 1], starts[node.end_lineno]


def apply(mutant: Mutant, root: Path) -> str | None:
    """Write the mutant into the copy at `root`; return why it cannot be applied, or None."""
    path = root / mutant.file
    if not path.is_file():
        return f"{mutant.file} does not exist"
    source = path.read_text()
    span = function_span(source, mutant.function)
    if span is None:
        return f"function {mutant.function} not found in {mutant.file}"
    body = source[span[0]:span[1]]
    count = body.count(mutant.original)
    if count != 1:
        return (f"the original snippet {mutant.original!r} occurs {count} times in {mutant.function} "
                f"({mutant.file}); update the mutant list to the code")
    if mutant.original == mutant.mutated:
        return "the mutated form equals the original"
    mutated = source[:span[0]] + body.replace(mutant.original, mutant.mutated) + source[span[1]:]
    try:
        ast.parse(mutated)
    except SyntaxError as exc:
        return f"the mutated {mutant.file} does not parse: {exc}"
    path.write_text(mutated)
    return None


def tree_files(repo: Path) -> list[str]:
    """The files a copy needs: git's tracked and untracked, non-ignored files (or everything but caches)."""
    try:
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=repo,
                             capture_output=True, check=True).stdout
        return [f for f in out.decode().split("\0") if f and (repo / f).is_file()]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", "__pycache__", ".pytest_cache", ".venv", "ci-artifacts"}
        return [str(p.relative_to(repo)) for p in repo.rglob("*")
                if p.is_file() and not skip & set(p.relative_to(repo).parts)]


def make_copy(files: list[str], base: Path) -> Path:
    """A copy of the tree at base/repo, with base/shared pointing at the reference material beside the
    checkout, so tests that read `<repo>/../shared` find it."""
    root = base / "repo"
    for f in files:
        dst = root / f
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / f, dst)
    shared = Path(os.environ.get("TOOLSWEEP_SHARED", REPO.parent / "shared"))
    if shared.exists():
        (base / "shared").symlink_to(shared.resolve())
    return root


def run_tests(root: Path, selection: list[str], timeout: float, first: list[str] = ()) -> tuple[int | None, str]:
    """pytest on `selection` in the copy at `root`, the node ids in `first` ahead of the rest; stops at
    the first failure."""
    env = dict(os.environ)
    env[TESTS_FIRST] = "\n".join(first)
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.setdefault("TOOLSWEEP_SHARED", str(Path(os.environ.get("TOOLSWEEP_SHARED", REPO.parent / "shared")).resolve()))
    plugin = ["-p", "tests.mutation.first"] if first else []
    args = ["-q", "-x", "-p", "no:cacheprovider", *plugin, "--no-header", "-rfE", *selection]
    if forked.available() and not os.environ.get("TOOLSWEEP_MUTATION_SUBPROCESS"):
        return forked.run_pytest(root, args, env, timeout)
    cmd = [sys.executable, "-m", "pytest", *args]
    try:
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, ""
    return proc.returncode, proc.stdout + proc.stderr


# A node id runs to its first space, or to its parameters' closing bracket (an id there may hold spaces);
# pytest's short summary puts " - <message>" after it.
_NODE = r"(\S+?(?:\[[^\]\n]*\])?)(?= - |$)"


def failed_tests(output: str, kinds: str = "FAILED|ERROR") -> list[str]:
    return re.findall(rf"^(?:{kinds}) {_NODE}", output, flags=re.M)


def load_killers(path: Path = KILLERS) -> dict[str, list[str]]:
    """Mutant id -> the tests that failed on it when the killers were last recorded."""
    return json.loads(path.read_text()) if path.exists() else {}


def record_killers(outcomes: list[Outcome], path: Path = KILLERS) -> None:
    """Keep the killing tests of the mutants just run (the others' entries stay as they were)."""
    killers = load_killers(path)
    for o in outcomes:
        if o.status == KILLED and o.killers:
            killers[o.mutant.id] = o.killers
        elif o.status in (SURVIVED, ERROR):
            killers.pop(o.mutant.id, None)
    path.write_text(json.dumps(dict(sorted(killers.items())), indent=1) + "\n")


def verdict(rc: int | None, output: str) -> str:
    """A kill is a test that failed: pytest exit 1 with at least one FAILED test. A pytest exit 1 with
    only errors (a fixture or Ray failing to start, an import error in a test module) and exits 2-5
    (interrupted, internal error, usage error, nothing collected) are errors: they prove nothing about
    the mutant, and on a loaded machine a Ray start-up error looked like a kill."""
    if rc is None:
        return TIMEOUT
    if rc == 0:
        return SURVIVED
    if rc == 1 and re.search(r"^FAILED \S+", output, flags=re.M):
        return KILLED
    return ERROR


def summary_line(output: str) -> str:
    lines = [ln for ln in output.strip().splitlines() if re.search(r"\d+ (passed|failed|error)", ln)]
    return lines[-1].strip("= ") if lines else (output.strip().splitlines() or [""])[-1]


def check_import_path(root: Path) -> str | None:
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1")
    out = subprocess.run([sys.executable, "-c", "import toolsweep; print(toolsweep.__file__)"], cwd=root,
                         env=env, capture_output=True, text=True)
    where = out.stdout.strip()
    if not where.startswith(str(root)):
        return f"`import toolsweep` in the copy resolves to {where or out.stderr.strip()}, not to the copy"
    return None


def baseline(selection: tuple[str, ...], files: list[str], timeout: float) -> tuple[tuple[str, ...], str | None]:
    with tempfile.TemporaryDirectory(prefix="toolsweep-mutation-") as tmp:
        root = make_copy(files, Path(tmp))
        rc, out = run_tests(root, list(selection), timeout)
    if rc == 0:
        return selection, None
    return selection, f"rc={rc}: {summary_line(out)}; failing: {failed_tests(out)[:5]}"


def run_mutant(mutant: Mutant, files: list[str], timeout: float, first: list[str] = ()) -> Outcome:
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="toolsweep-mutation-") as tmp:
        root = make_copy(files, Path(tmp))
        problem = apply(mutant, root)
        if problem:
            return Outcome(mutant, ERROR, time.monotonic() - t0, problem)
        rc, out = run_tests(root, list(mutant.tests), timeout, first)
    took = time.monotonic() - t0
    status = verdict(rc, out)
    if status == TIMEOUT:
        return Outcome(mutant, TIMEOUT, took, f"the tests ran past {timeout:.0f} s")
    if status == KILLED:
        killers = failed_tests(out, "FAILED")
        return Outcome(mutant, KILLED, took, ", ".join(killers[:3]), killers)
    if status == SURVIVED:
        return Outcome(mutant, SURVIVED, took, summary_line(out))
    return Outcome(mutant, ERROR, took, f"pytest exited {rc} with no test failed (an error, not a kill): "
                                        f"{summary_line(out)}; {failed_tests(out)[:3]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", help="mutant ids to run (default: all)")
    ap.add_argument("--list", action="store_true", help="print the mutant list and exit")
    ap.add_argument("--jobs", type=int, default=int(os.environ.get("TOOLSWEEP_MUTATION_JOBS", "1")))
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per pytest run")
    ap.add_argument("--record-killers", action="store_true",
                    help=f"write each killed mutant's failing tests to {KILLERS.name} (they run first next time)")
    ap.add_argument("--selections-passed", action="store_true",
                    help="skip the unmutated run of each selection: only where the same checkout's test tiers "
                         "have just passed (CI runs them first and stops on a failure)")
    args = ap.parse_args(argv)

    ids = [m.id for m in MUTANTS]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        print(f"mutant ids must be unique: {dup}")
        return 1
    chosen = [m for m in MUTANTS if not args.only or m.id in args.only]
    unknown = sorted(set(args.only or []) - set(ids))
    if unknown:
        print(f"unknown mutant ids: {unknown}")
        return 1
    if args.list:
        for m in chosen:
            print(f"{m.id:40s} {m.file}::{m.function}\n    {m.original!r} -> {m.mutated!r}\n    tests: {' '.join(m.tests)}")
        return 0

    t0 = time.monotonic()
    files = tree_files(REPO)
    with tempfile.TemporaryDirectory(prefix="toolsweep-mutation-") as tmp:
        problem = check_import_path(make_copy(files, Path(tmp)))
    if problem:
        print(problem)
        return 1

    selections = sorted({tuple(m.tests) for m in chosen})
    print(f"mutation check: {len(chosen)} mutants, {len(selections)} test selections, {args.jobs} job(s)")
    with cf.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        unchecked = [] if args.selections_passed else selections
        broken = [(s, why) for s, why in pool.map(lambda s: baseline(s, files, args.timeout), unchecked) if why]
        for s, why in broken:
            print(f"selection fails without a mutant: {' '.join(s)}\n    {why}")
        outcomes = []
        killers = load_killers()
        for o in pool.map(lambda m: run_mutant(m, files, args.timeout, killers.get(m.id, [])), chosen):
            outcomes.append(o)
            print(f"  {o.status:16s} {o.mutant.id:40s} {o.seconds:6.1f} s  {o.detail[:150]}", flush=True)

    if args.record_killers:
        record_killers(outcomes)
    bad = [o for o in outcomes if o.status in (SURVIVED, ERROR)]
    took = time.monotonic() - t0
    for o in bad:
        m = o.mutant
        print(f"\n{o.status}: {m.id} in {m.file}::{m.function}\n    {m.original!r} -> {m.mutated!r}\n"
              f"    {m.why}\n    tests run: {' '.join(m.tests)}\n    {o.detail}")
    killed = sum(o.status in (KILLED, TIMEOUT) for o in outcomes)
    print(f"\nmutation check: {killed}/{len(outcomes)} mutants killed, {len(bad)} not, "
          + (f"{len(broken)} selection(s) failing unmutated" if unchecked else "selections not rerun unmutated")
          + f"; {took:.0f} s")
    return 1 if bad or broken else 0


if __name__ == "__main__":
    sys.exit(main())

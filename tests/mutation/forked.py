"""pytest on a mutated copy, in a process forked from one that has already imported the test tools.

Each mutant's pytest run used to start a new interpreter and import pytest, Hypothesis, Ray, SciPy and
friends again: about four of a mutant's seven seconds on two cores. Here `multiprocessing`'s fork
server imports them once (`PRELOAD`) and forks a child per run. The child imports nothing of the
project before it has put the copy first on its path: `toolsweep`, `tests` and `bench` come from the
copy, which the child checks before running (else it exits with `WRONG_IMPORT`, an error and never a
kill). Only modules that start no thread are preloaded (a fork copies one thread: Arrow's and MLflow's
import-time threads stay out), so a child cannot inherit a lock held by a thread it does not have.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from pathlib import Path

PRELOAD = ["pytest", "_pytest.python", "hypothesis", "_hypothesis_pytestplugin", "xdist.plugin",
           "anyio.pytest_plugin", "pydantic", "yaml", "aiohttp", "ray", "numpy", "scipy.stats"]
PROJECT = ("toolsweep", "tests", "bench")
WRONG_IMPORT = 3  # pytest's "internal error": the verdict reads it as an error, never as a kill

_CONTEXT: multiprocessing.context.BaseContext | None = None


def available() -> bool:
    return "forkserver" in multiprocessing.get_all_start_methods()


def _context() -> multiprocessing.context.BaseContext:
    global _CONTEXT
    if _CONTEXT is None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)  # a module that fails to import is skipped by the server
        _CONTEXT = ctx
    return _CONTEXT


def _pytest_in_copy(root: str, args: list[str], log: str, env: dict[str, str]) -> None:
    """The child: output to `log`, the copy first on the path, then `pytest.main`; exits with its code."""
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(root)
    sys.dont_write_bytecode = True
    for name in [n for n in sys.modules if n.split(".", 1)[0] in PROJECT]:
        del sys.modules[name]  # this module's own package came from the checkout; the copy's is wanted
    sys.path[:] = [root] + [p for p in sys.path if p and Path(p).resolve() != Path(root).resolve()]
    if (Path(root) / "toolsweep").is_dir():
        import toolsweep

        if not str(Path(toolsweep.__file__).resolve()).startswith(str(Path(root).resolve())):
            print(f"`import toolsweep` in the copy resolves to {toolsweep.__file__}, not to the copy", flush=True)
            os._exit(WRONG_IMPORT)
    import pytest

    code = pytest.main(args)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))


def run_pytest(root: Path, args: list[str], env: dict[str, str], timeout: float) -> tuple[int | None, str]:
    """pytest `args` in the copy at `root`: (exit code, or None past `timeout`; its output)."""
    log = root.parent / "pytest.log"  # each copy has a directory of its own
    proc = _context().Process(target=_pytest_in_copy, args=(str(root), args, str(log), env))
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.kill()
        proc.join()
        return None, log.read_text(errors="replace") if log.exists() else ""
    return proc.exitcode, log.read_text(errors="replace") if log.exists() else ""

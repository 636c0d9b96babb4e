"""Benchmarks registered by name and imported lazily.

Built-in benchmarks and outside packages register the same way: an entry point in the group
`toolsweep.benchmarks` whose value is `"package.module:Class"`. `register_benchmark` adds one at
run time (tests, notebooks). Instances are cached per process and per options, so heavy data is
built once.
"""

from __future__ import annotations

import importlib
import os
import threading
from importlib.metadata import entry_points
from typing import Any

from toolsweep.evaluator.protocols import Benchmark
from toolsweep.evaluator.types import canonical_json

ENTRY_POINT_GROUP = "toolsweep.benchmarks"
EXTRA_ENV = "TOOLSWEEP_EXTRA_BENCHMARKS"

_extra: dict[str, str] = {}
_instances: dict[tuple[str, str], Benchmark] = {}
_lock = threading.Lock()


class UnknownBenchmark(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


def register_benchmark(name: str, target: str) -> None:
    """Register `"module:Class"` under `name` for this process (overrides an entry point)."""
    _extra[name] = target


def extra_benchmarks() -> dict[str, str]:
    """Benchmarks registered at run time: `register_benchmark` calls plus the environment variable
    TOOLSWEEP_EXTRA_BENCHMARKS="name=module:Class,..." (a plugin without packaging). The driver
    hands these to every worker, so they work on remote nodes too."""
    found = {}
    for item in filter(None, os.environ.get(EXTRA_ENV, "").split(",")):
        name, sep, target = item.partition("=")
        if not sep or ":" not in target:
            raise ValueError(f"{EXTRA_ENV} entries look like name=module:Class, got {item!r}")
        found[name.strip()] = target.strip()
    found.update(_extra)
    return found


def available_benchmarks() -> dict[str, str]:
    """name -> "module:Class" for every registered benchmark."""
    found = {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}
    found.update(extra_benchmarks())
    return dict(sorted(found.items()))


def benchmark_class(name: str) -> type[Benchmark]:
    targets = available_benchmarks()
    if name not in targets:
        raise UnknownBenchmark(
            f"unknown benchmark {name!r}; registered: {', '.join(targets) or '(none)'} "
            f"(`toolsweep benchmarks` lists them with their settings)"
        )
    module_name, _, attr = targets[name].partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    if not (isinstance(cls, type) and issubclass(cls, Benchmark)):
        raise TypeError(f"{targets[name]} (benchmark {name!r}) is not a toolsweep Benchmark subclass")
    return cls


def get_benchmark(name: str, options: dict[str, Any] | None = None) -> Benchmark:
    """The process-wide instance of a benchmark with these options (built on first use)."""
    key = (name, canonical_json(options or {}))
    with _lock:
        if key not in _instances:
            _instances[key] = benchmark_class(name)(**(options or {}))
        return _instances[key]

"""API keys handed from the driver to the rollout workers by a path no log records.

Ray writes a runtime environment's `env_vars` into `runtime_env_agent.log` of every session ("Creating
runtime env: {...}"), so a key must never travel there. It travels instead as an argument of the
worker's constructor, inside `Secrets`, whose repr shows only the variable names (Ray prints an
actor's arguments when its creation fails), and the worker puts it into its own process environment,
where the model client reads it as it would on the driver."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any


class Secrets:
    """Environment variables holding keys, by name; never shown by repr or str."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._values = dict(values)

    @classmethod
    def from_environment(cls, names: Iterable[str | None]) -> Secrets:
        """The named variables that are set in this process (validated as set before Ray started)."""
        return cls({n: os.environ[n] for n in names if n and os.environ.get(n)})

    def names(self) -> list[str]:
        return sorted(self._values)

    def values(self) -> list[str]:
        """The keys themselves, for redacting them from error texts."""
        return list(self._values.values())

    def export(self) -> None:
        """Put the keys into this process's environment (a rollout worker's, once, at start)."""
        os.environ.update(self._values)

    def __bool__(self) -> bool:
        return bool(self._values)

    def __repr__(self) -> str:
        return f"Secrets({', '.join(self.names()) or 'none'}: values hidden)"

    __str__ = __repr__

    def __reduce__(self) -> tuple[Any, ...]:
        return (Secrets, (self._values,))

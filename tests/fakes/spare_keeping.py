"""What a stand-in rollout worker needs to take units and keep spares as the real one does
(`RolloutWorker.submit`, `promote`, `take_back`); a subclass says how a unit starts (`_start`)."""

from __future__ import annotations

import threading


class KeepsSpares:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spares: list[tuple[str, list]] = []  # (lease token, packed unit), oldest first

    def submit(self, batch: list, spares: list | None = None) -> None:
        with self.lock:
            for raw in batch:
                self._start(raw)
            self.spares += [(token, raw) for token, *raw in spares or []]

    def promote(self, tokens: list[str]) -> None:
        with self.lock:
            for token, raw in [s for s in self.spares if s[0] in tokens]:
                self.spares.remove((token, raw))
                self._start(raw)

    def take_back(self, tokens: list[str]) -> list[str]:
        with self.lock:
            back = [s for s in self.spares if s[0] in tokens]
            self.spares = [s for s in self.spares if s not in back]
            return [token for token, _ in back]

    def _start(self, raw: list) -> None:
        raise NotImplementedError

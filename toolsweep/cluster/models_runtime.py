"""Driver-side lifecycle of the models under test: start servers before the sweep, hand workers
picklable endpoint specs, restart a dead replica, stop everything at the end."""

from __future__ import annotations

from typing import Any

from toolsweep.models.config import ScriptedModelConfig


class ModelRuntime:
    """Owns every model server of one sweep. Scripted models need none."""

    def __init__(self, models: list[Any]) -> None:
        self.models = models

    def start(self) -> dict[str, Any]:
        """Start what the models need; returns name -> endpoint spec (picklable) for the workers."""
        for model in self.models:
            if not isinstance(model, ScriptedModelConfig):
                raise NotImplementedError(f"model kind {model.kind!r} is not supported yet")
        return {}

    def ensure_healthy(self, model_name: str) -> dict[str, Any]:
        """Called after an infra_error of `model_name`: restart dead replicas; returns fresh endpoints."""
        return {}

    def manifest(self) -> dict[str, Any]:
        """Reproducibility record of every model (kind, path, weight hashes, engine args, versions)."""
        return {m.name: m.model_dump(mode="json") for m in self.models}

    def stop(self) -> None:
        """Stop every server this runtime started (no leftover processes or /dev/shm segments)."""

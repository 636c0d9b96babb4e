"""Model waves at run time (DESIGN §3): one wave's servers up at a time, its units run, its servers
stopped, the next wave's started as soon as the GPUs are free.

The waves come from `placement.plan_waves` (checked before anything starts). A wave whose units are
all recorded is passed over without starting a server, so a resumed sweep starts in the wave it was
interrupted in, and a model added to the config runs in the wave that `plan_waves` gives it. Helper
models stay up across waves (every wave that needs them has them).

`WaveTimeline` is what the run directory, the end table and MLflow say about the waves: when each
wave's servers came up and went down, how long the switch between waves took, and the share of the
run with no model serving.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

Log = Callable[[str], None]


@dataclass
class WaveRecord:
    wave: int
    models: list[str]
    units: int = 0
    done: int = 0
    started_at: float = 0.0  # servers asked to start (time.time())
    up_at: float = 0.0  # every server of the wave healthy
    serving_at: float = 0.0  # the wave's models passed their preflight: units lease from here
    ended_at: float = 0.0  # last unit recorded
    stopped_at: float = 0.0  # servers down

    @property
    def start_s(self) -> float:
        return max(0.0, self.serving_at - self.started_at)

    @property
    def preflight_s(self) -> float:
        return max(0.0, self.serving_at - self.up_at) if self.up_at else 0.0

    @property
    def stop_s(self) -> float:
        return max(0.0, self.stopped_at - self.ended_at)


@dataclass
class WaveTimeline:
    records: list[WaveRecord] = field(default_factory=list)
    began_at: float = 0.0
    finished_at: float = 0.0

    def idle_s(self) -> float:
        """Seconds of the run (first wave's start to the last wave's end) with no wave serving."""
        if not self.records:
            return 0.0
        serving = sum(max(0.0, r.ended_at - r.serving_at) for r in self.records)
        span = self.records[-1].ended_at - self.records[0].started_at
        return max(0.0, span - serving)

    def idle_share(self) -> float:
        span = self.records[-1].ended_at - self.records[0].started_at if self.records else 0.0
        return self.idle_s() / span if span > 0 else 0.0

    def switches_s(self) -> list[float]:
        """Each switch: the last unit of one wave recorded to every server of the next one serving."""
        return [max(0.0, b.serving_at - a.ended_at) for a, b in zip(self.records, self.records[1:])]

    def as_json(self) -> dict[str, Any]:
        return {
            "waves": [{"wave": r.wave, "models": r.models, "units": r.units, "done": r.done,
                       "started_at": r.started_at, "serving_at": r.serving_at, "ended_at": r.ended_at,
                       "stopped_at": r.stopped_at, "start_s": round(r.start_s, 3),
                       "preflight_s": round(r.preflight_s, 3), "stop_s": round(r.stop_s, 3)}
                      for r in self.records],
            "switch_s": [round(s, 3) for s in self.switches_s()],
            "idle_s": round(self.idle_s(), 3),
            "idle_share": round(self.idle_share(), 4),
        }

    def text(self) -> str:
        if len(self.records) < 2:
            return ""
        lines = ["waves:"]
        for r in self.records:
            lines.append(f"  wave {r.wave} ({', '.join(r.models)}): {r.done}/{r.units} units, servers up in "
                         f"{r.start_s:.1f} s, served {max(0.0, r.ended_at - r.serving_at):.1f} s, down in {r.stop_s:.1f} s")
        lines.append(f"  switches {', '.join(f'{s:.1f} s' for s in self.switches_s())}; no model serving "
                     f"{100 * self.idle_share():.1f}% of the run")
        return "\n".join(lines)

    def metrics(self) -> dict[str, float]:
        """For the sweep's MLflow run: each model's wave, each switch, the idle share."""
        out = {f"wave/{m}": float(r.wave) for r in self.records for m in r.models}
        out.update({f"waves/switch_s/{i + 1}": s for i, s in enumerate(self.switches_s())})
        if len(self.records) > 1:
            out["waves/idle_share"] = self.idle_share()
        return out


def merge_stats(total: Any, part: Any) -> Any:
    """One wave's scheduler stats added to the run's."""
    if total is None:
        return part
    total.done += part.done
    total.requeued += part.requeued
    total.worker_restarts += part.worker_restarts
    total.gave_up.extend(part.gave_up)
    total.interrupted = total.interrupted or part.interrupted
    total.terminated = total.terminated or part.terminated
    total.config_error = total.config_error or part.config_error
    total.timeouts_by_cell.update(part.timeouts_by_cell)
    total.terminations.update(part.terminations)
    total.tokens += part.tokens
    total.wall_s += part.wall_s
    return total


def enter_wave(runtime: Any, wave: Any, scheduler: Any, log: Log, n_waves: int) -> dict[str, Any]:
    """Stop the servers no longer needed, start this wave's (its helpers stay up), and hand every worker
    the endpoints before any unit of the wave is leased; returns the endpoints."""
    import ray

    keep = set(wave.models) | set(wave.helpers)
    runtime.stop_models([name for name in runtime.running() if name not in keep], park=True)
    runtime.wave_label = wave.label
    log(f"{wave.label} of {n_waves}: starting {', '.join(wave.models)}")
    endpoints = runtime.start_models([*wave.models, *wave.helpers])
    for name in wave.models:  # in-flight caps as the runtime sized the servers just started
        if name in endpoints and hasattr(scheduler, "per_model"):
            scheduler.per_model[name] = endpoints[name]["max_in_flight"]
    # waited for: a unit leased after this must find its model's endpoint at the worker
    ray.get([w.update_endpoints.remote(endpoints) for w in scheduler.workers])
    return endpoints


def run_waves(
    waves: Any, runtime: Any, scheduler: Any, todo: Any, *, bar: Any, desc: str, log: Log,
    check: Callable[[Any, dict[str, Any]], None] = lambda wave, endpoints: None,
    on_change: Callable[[WaveTimeline], None] = lambda timeline: None,
) -> tuple[Any, WaveTimeline]:
    """Run `todo` wave by wave; returns the merged scheduler stats and the timeline. `check(wave,
    endpoints)` runs after a wave's servers are up and before its first unit (the preflight of its
    models). `on_change(timeline)` when a wave starts, starts serving and ends (the run directory's
    wave history, kept through a kill). Stops at an interrupt or a configuration error; the servers are
    stopped by their owner."""
    timeline = WaveTimeline(began_at=time.time())
    stats = None
    n = len(waves.waves)
    helpers_run: set[str] = set()
    for wave in waves.waves:
        # a model under test that is also a helper (a judge of the others) is up in every wave: its own
        # units run in the first wave that has units
        own = [*wave.models, *(h for h in wave.helpers if h not in helpers_run)]
        units = todo.for_models(own)
        if not units:
            continue
        helpers_run.update(wave.helpers)
        record = WaveRecord(wave.index, [m for m in own if m in todo.models()], units=len(units), started_at=time.time())
        timeline.records.append(record)
        on_change(timeline)
        endpoints = enter_wave(runtime, wave, scheduler, log, n)
        record.up_at = time.time()
        check(wave, endpoints)
        record.serving_at = time.time()
        on_change(timeline)
        if hasattr(bar, "set_description"):
            bar.set_description(f"{desc} [{wave.label}/{n}: {', '.join(wave.models)}]")
        part = scheduler.run(units)
        record.done = part.done
        record.ended_at = time.time()
        stats = merge_stats(stats, part)
        if part.interrupted or part.config_error is not None:
            on_change(timeline)
            break
        # the GPUs are free for the next wave at once; the actors wait for it (same shape: reused)
        runtime.stop_models([m for m in wave.models if m in runtime.running()], park=True)
        record.stopped_at = time.time()
        on_change(timeline)
    timeline.finished_at = time.time()
    return stats, timeline


WAVE_HISTORY = "waves.json"
"""In the run directory: the waves of every invocation that ran some, rewritten as each wave starts
and ends, so a resumed sweep's summary lists the waves of the invocation a kill cut short too."""


def save_invocation(run_dir: Path, invocation: str, timeline: WaveTimeline) -> None:
    """This invocation's waves into the run directory's wave history (earlier invocations kept)."""
    from toolsweep.evaluator.rundir import atomic_write_text

    history = [h for h in load_history(run_dir) if h.get("invocation") != invocation]
    history.append({"invocation": invocation, "began_at": timeline.began_at,
                    "records": [asdict(r) for r in timeline.records]})
    atomic_write_text(run_dir / WAVE_HISTORY, json.dumps(history, indent=1))


def load_history(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / WAVE_HISTORY
    if not path.exists():
        return []
    try:
        history = json.loads(path.read_text())
    except ValueError:
        return []  # cut mid-write by an older version: the summary then lists this run's waves only
    return history if isinstance(history, list) else []


def accumulated_waves(run_dir: Path) -> dict[str, Any] | None:
    """summary.json's `waves`: every invocation's waves in order (`invocation` numbers them from 1; a wave
    a kill cut short has no `ended_at`), their switches, and the time with no model serving summed over
    the invocations (the gaps between invocations are not the sweep's)."""
    timelines = [WaveTimeline(records=[WaveRecord(**r) for r in h.get("records", [])], began_at=h.get("began_at", 0.0))
                 for h in sorted(load_history(run_dir), key=lambda h: h.get("began_at", 0.0))]
    timelines = [t for t in timelines if t.records]
    if not timelines:
        return None
    waves: list[dict[str, Any]] = []
    invocations = []
    for i, t in enumerate(timelines, 1):
        own = t.as_json()
        for w, r in zip(own["waves"], t.records):
            waves.append({**w, "invocation": i, "ended": bool(r.ended_at)})
        invocations.append({"invocation": i, "began_at": t.began_at, "waves": [r.wave for r in t.records],
                            "switch_s": own["switch_s"], "idle_s": own["idle_s"], "idle_share": own["idle_share"]})
    spans = sum(max(0.0, t.records[-1].ended_at - t.records[0].started_at) for t in timelines if t.records[-1].ended_at)
    idle = sum(t.idle_s() for t in timelines if t.records[-1].ended_at)
    return {"waves": waves, "invocations": invocations,
            "switch_s": [s for inv in invocations for s in inv["switch_s"]],
            "idle_s": round(idle, 3), "idle_share": round(idle / spans, 4) if spans > 0 else 0.0}

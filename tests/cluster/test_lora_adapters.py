"""LoRA adapters of one base share one server (--enable-lora, --lora-modules, max_loras), each its own
model in the sweep with its own unit ids, and the adapter's weights are in those ids and the manifest.
On a cluster that declares 1 GPU with the stand-in server behind the real launcher: the base and its
two adapters are one wave and one server process, another model the next wave."""

from __future__ import annotations

import json
import os
from pathlib import Path

from test_gpu_path import fake_python, gpu_cluster, model_dir, server_processes  # noqa: F401 - fixtures

from toolsweep.cluster.config import SweepConfig
from toolsweep.cluster.driver import run_sweep
from toolsweep.cluster.placement import model_demands
from toolsweep.cluster.run_record import current_units
from toolsweep.models.config import VLLMModelConfig, lora_server_config, server_groups


def make_adapter(root: Path, name: str, rank: int = 32) -> Path:
    d = root / name
    d.mkdir()
    (d / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": rank, "lora_alpha": 16,
                                                       "target_modules": ["q_proj", "v_proj"]}))
    (d / "adapter_model.safetensors").write_bytes(os.urandom(512))
    return d


def read_events(path: Path) -> list[tuple[float, str, str, int]]:
    out = []
    for line in path.read_text().splitlines():
        t, kind, name, port = line.split()
        out.append((float(t), kind, name, int(port)))
    return sorted(out)


def test_adapters_of_one_base_are_one_server_and_one_placement_demand(tmp_path):
    a1, a2 = make_adapter(tmp_path, "a1", rank=8), make_adapter(tmp_path, "a2", rank=48)
    models = [VLLMModelConfig(name="a1", path="/m/base", adapter=str(a1)),
              VLLMModelConfig(name="base", path="/m/base"),
              VLLMModelConfig(name="a2", path="/m/base", adapter=str(a2)),
              VLLMModelConfig(name="other", path="/m/other")]
    groups = server_groups(models)
    assert {k: [m.name for m in v] for k, v in groups.items()} == {"base": ["a1", "base", "a2"], "other": ["other"]}
    server, loras = lora_server_config("base", groups["base"])
    assert loras == {"a1": str(a1), "a2": str(a2)} and server.served_model_name == "base"
    cli = server.engine_args.to_cli()
    assert "--enable-lora" in cli and cli[cli.index("--max-loras") + 1] == "2"
    assert cli[cli.index("--max-lora-rank") + 1] == "64"  # the smallest rank vLLM accepts that covers r=48
    assert [(d.model, d.gpus) for d in model_demands(models)] == [("base", 1.0), ("other", 1.0)]
    # adapters without their base in the sweep: the base is served under a name of its own
    server, _ = lora_server_config("a1", server_groups([models[0], models[2]])["a1"])
    assert server.served_model_name == "a1-base"


def _config(tmp_path: Path, python: str, base: Path, other: Path, events: Path) -> SweepConfig:
    a1, a2 = make_adapter(tmp_path, "a1"), make_adapter(tmp_path, "a2")
    common = {"kind": "vllm", "device": "gpu", "python": python, "num_cpus": 0.5, "startup_timeout_s": 60,
              "start_stagger_s": 0, "env": {"FAKE_VLLM_EVENTS": str(events)}, "engine_args": {"max_num_seqs": 8}}
    return SweepConfig.model_validate({
        "name": "lora", "seeds": 1,
        "models": [{"name": "base", "path": str(base), **common},
                   {"name": "a1", "path": str(base), "adapter": str(a1), **common},
                   {"name": "a2", "path": str(base), "adapter": str(a2), **common},
                   {"name": "other", "path": str(other), **common}],
        "benchmarks": [{"name": "fake", "options": {"n_tasks": 3}, "settings": ["small"]}],
        "concurrency": {"workers": 1, "episodes_per_worker": 4},
        "bootstrap": {"n_resamples": 200, "live_n_resamples": 50},
        "output_dir": str(tmp_path / "runs"), "mlflow": False,
    })


def test_a_base_and_two_adapters_share_one_server_in_a_sweep_on_one_gpu(gpu_cluster, model_dir, fake_python, tmp_path):
    gpu_cluster([(4, 1)])
    other = tmp_path / "other-model"
    other.mkdir()
    (other / "config.json").write_text("{}")
    (other / "model.safetensors").write_bytes(os.urandom(256))
    (other / "tokenizer.json").write_text("{}")
    events = tmp_path / "events"
    cfg = _config(tmp_path, fake_python, model_dir, other, events)
    out = run_sweep(cfg, progress=False, extra_benchmarks={"fake": "fake_bench:FakeBench"}, log=lambda m: None)
    assert out.done == out.total_units == 12 and out.gave_up == 0

    seen = read_events(events)
    ups = [(name, port) for _, kind, name, port in seen if kind == "up"]
    assert [name for name, _ in ups] == ["base", "other"]  # one server process for base, a1 and a2
    port = dict(ups)["base"]
    reqs = {(name, p) for _, kind, name, p in seen if kind == "req"}
    assert {("base", port), ("a1", port), ("a2", port)} <= reqs  # each adapter asked for by its own name
    summary = json.loads(out.run_dir.summary_path.read_text())
    assert [w["models"] for w in summary["waves"]["waves"]] == [["base", "a1", "a2"], ["other"]]
    assert summary["servers"]["base"]["serves"] == ["base", "a1", "a2"]

    manifest = json.loads(out.run_dir.manifest_path.read_text())
    assert set(manifest["models"]["a1"]["adapter_sha256"]) == {"adapter_model.safetensors", "adapter_config.json"}
    assert manifest["models"]["a1"]["server"] == manifest["models"]["a2"]["server"] == "base"
    assert server_processes(model_dir) == []

    # the adapter's weights are in its unit ids: retrained in place, its units are new; the others' stay
    before, _ = current_units(cfg)
    (tmp_path / "a1" / "adapter_model.safetensors").write_bytes(os.urandom(512))
    after, _ = current_units(cfg)
    old, new = {u.unit_id for u in before}, {u.unit_id for u in after}
    changed = {u.model for u in after if u.unit_id not in old}
    assert changed == {"a1"} and len(old - new) == 3

"""Benchmark plugins, one sub-package each. Registered through the `toolsweep.benchmarks` entry
point group (see pyproject.toml); pure Python, no ray/vllm/mlflow/torch."""

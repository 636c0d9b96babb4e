"""Pure core: types, protocols, the episode loop, sweeps, statistics, run directories, reports.

Imports no ray, vllm, mlflow or torch.
"""

from toolsweep.evaluator.episode import run_episode
from toolsweep.evaluator.protocols import (
    Benchmark,
    ContextExceeded,
    Environment,
    InfraError,
    MetricSpec,
    Policy,
    ReportTable,
)
from toolsweep.evaluator.registry import available_benchmarks, get_benchmark, register_benchmark
from toolsweep.evaluator.types import (
    AgentReply,
    Consult,
    ConsultStep,
    EpisodeMetrics,
    EpisodeResult,
    FunctionCall,
    Message,
    Observation,
    Sampling,
    Step,
    TerminationReason,
    ToolCall,
    Trajectory,
    Usage,
    WorkUnit,
    stable_seed,
)

__all__ = [
    "AgentReply", "Benchmark", "Consult", "ConsultStep", "ContextExceeded", "Environment", "EpisodeMetrics", "EpisodeResult",
    "FunctionCall", "InfraError", "Message", "MetricSpec", "Observation", "Policy", "ReportTable",
    "Sampling", "Step", "TerminationReason", "ToolCall", "Trajectory", "Usage", "WorkUnit",
    "available_benchmarks", "get_benchmark", "register_benchmark", "run_episode", "stable_seed",
]

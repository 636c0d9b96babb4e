"""The `toolsweep` command line. Each subcommand mirrors a Python function of the driver."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import textwrap
from pathlib import Path

from toolsweep.cluster.config import ConfigError, load_config, resolve_plans, select_subset

EXIT_UNITS_FAILED = 1
EXIT_CONFIG = 2
EXIT_PREFLIGHT = 3
EXIT_ENDPOINT_CONFIG = 4
EXIT_RAY_START = 5
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
EXIT_CODES = """\
exit codes:
  0    done
  1    some units were given up on infrastructure (max_attempts spent, or an endpoint down past
       outage_budget_s; listed in failures.jsonl; re-run to retry)
  2    bad config (nothing started)
  3    a model or helper failed the preflight (nothing was run)
  4    an endpoint refused the configuration during the run (bad key, unknown model, unusable URL):
       the run stopped; finished episodes are kept, nothing else was scored
  5    Ray could not be started (e.g. a start-up timeout on a loaded machine): nothing was run
  130  interrupted by Ctrl-C (progress kept)    143  stopped by SIGTERM (progress kept)
"""

MAIN_HELP = """\
toolsweep runs (model x benchmark x setting x task x seed) sweeps of LLM tool-use agents on Ray,
writes every episode to a run directory and mirrors cells with bootstrap CIs to MLflow.

quick start (embedded Ray, sqlite MLflow, scripted policies):
  toolsweep run configs/sweeps/quickstart.yaml
  mlflow ui --backend-store-uri sqlite:///mlflow.db      # charts of every cell converging
"""

RUN_HELP = """\
Run a sweep, or resume it: running the same command again skips every unit already in the run
directory (runs/<sweep>/<run-id>/, run-id derived from the config) and runs the rest.

examples:
  toolsweep run configs/sweeps/quickstart.yaml
  toolsweep run configs/sweeps/toolmaze.yaml --settings C1-P1-std --limit 5     # a quick look first
  toolsweep run sweep.yaml --address auto                     # a cluster from `ray start --head`
  toolsweep run sweep.yaml --tracking-uri http://127.0.0.1:5000
  MLFLOW_TRACKING_URI=http://mlflow:5000 toolsweep run sweep.yaml

config fields (YAML): name, seeds, models[{name, kind: scripted|openai|vllm|hf, ...}],
benchmarks[{name, options, settings, tasks: {limit|ids}, seeds}], sampling{temperature, top_p,
max_tokens}, concurrency{workers, worker_cpus, episodes_per_worker, spares_per_worker},
bootstrap{n_resamples, confidence}, stop_when{ci_half_width, metric, max_rounds, max_seeds,
seeds_per_round, grow, max_tasks, tasks_per_round} (an adaptive sweep: rounds of added seeds or tasks,
docs/adaptive.md), episode_timeout_s, max_attempts, output_dir, run_id,
ray_address, tracking_uri, mlflow.
"""


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value <= 86_400:
        raise argparse.ArgumentTypeError(f"{text} is not between 0 and 86400 seconds")
    return value


def _names(text: str | None) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


def _fail_config(err: Exception) -> int:
    print(f"error: {err}", file=sys.stderr)
    return EXIT_CONFIG


def _on_sigterm(signum: int, frame: object) -> None:
    from toolsweep.cluster.scheduler import SIGTERM_SEEN, Terminated

    SIGTERM_SEEN.append(True)
    raise Terminated()


SUBSET_OPTIONS = ("--models", "--benchmarks", "--settings", "--limit")


def finishing_command(argv: list[str]) -> str:
    """The `toolsweep run ...` command that finishes the cells a subset run left partial: the same one
    with the subset options (`--limit 1`, `--models=a,b`, ...) left out."""
    import shlex

    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in SUBSET_OPTIONS:
            skip = True
        elif not arg.startswith(tuple(f"{o}=" for o in SUBSET_OPTIONS)):
            kept.append(arg)
    return "toolsweep " + shlex.join(kept)


def cmd_run(args: argparse.Namespace) -> int:
    import signal

    from toolsweep.cluster.driver import run_sweep
    from toolsweep.cluster.endpoint_health import EndpointMisconfigured
    from toolsweep.cluster.ray_start import RayStartFailed
    from toolsweep.cluster.workers import WorkersFailed
    from toolsweep.evaluator.rundir import RunDirectoryBusy

    signal.signal(signal.SIGTERM, _on_sigterm)

    try:
        config = load_config(
            args.config, ray_address=args.address, tracking_uri=args.tracking_uri,
            output_dir=args.output_dir, run_id=args.run_id,
        )
        if args.no_mlflow:
            config = config.model_copy(update={"mlflow": False})
        if args.skip_preflight:
            config = config.model_copy(update={"preflight": False})
        if args.scale_up_timeout is not None:
            config = config.model_copy(update={"scale_up_timeout_s": args.scale_up_timeout})
        if args.mlflow_wait is not None:
            config = config.model_copy(update={"mlflow_wait_s": args.mlflow_wait})
        if args.ray_start_timeout is not None:
            config = config.model_copy(update={"ray_start_timeout_s": args.ray_start_timeout})
        # a subset runs its units; the run directory's record goes on describing the whole config
        subset = select_subset(config, models=_names(args.models), benchmarks=_names(args.benchmarks),
                               settings=_names(args.settings), limit=args.limit)
        if not config.ray_address:
            # The embedded Ray's processes end with this one, even when it is killed (see session_guard).
            from toolsweep.cluster.session_guard import start_guard

            start_guard()
        if config.stop_when is not None:  # an adaptive sweep: rounds of run_sweep (docs/adaptive.md)
            from toolsweep.cluster.adaptive import run_adaptive

            if args.models or args.benchmarks or args.settings or args.limit is not None:
                raise ConfigError("an adaptive sweep (stop_when) decides its own cells and seeds: run it without "
                                  "--models/--benchmarks/--settings/--limit, or remove stop_when to run a subset")
            outcome = run_adaptive(config, progress=not args.no_progress)
        else:
            outcome = run_sweep(subset, progress=not args.no_progress, whole=config)
    except ConfigError as err:
        return _fail_config(err)
    except RunDirectoryBusy as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_CONFIG
    except RayStartFailed as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_RAY_START
    except WorkersFailed as err:
        print(f"error: {err}\nfinished episodes are kept; run the same command again", file=sys.stderr)
        return EXIT_UNITS_FAILED
    except EndpointMisconfigured as err:
        print(f"error: the run stopped: {err}\nfinished episodes are kept; fix the model's config and run the same "
              "command again", file=sys.stderr)
        return EXIT_ENDPOINT_CONFIG
    except Exception as err:  # noqa: BLE001 - a model that fails the preflight is not a crash
        from toolsweep.cluster.preflight import PreflightFailed

        if not isinstance(err, PreflightFailed):
            raise
        if err.report is not None and err.report.config_causes():
            # a refused key or an unknown model: running anyway would only fail every unit
            print(f"error: an endpoint refused the configuration, nothing was run\n{err.report.text()}",
                  file=sys.stderr)
            return EXIT_ENDPOINT_CONFIG
        print(f"error: preflight failed, nothing was run\n{err}\n(--skip-preflight runs anyway)", file=sys.stderr)
        return EXIT_PREFLIGHT
    if outcome.done == 0 and not outcome.interrupted and config.mlflow:
        # nothing ran: the record was already there, but an interrupt may have cut its MLflow mirror short
        from toolsweep.cluster.driver import _stderr
        from toolsweep.cluster.sync import repair_mirror

        repair_mirror(outcome.run_dir, config, _stderr)
    if outcome.interrupted:
        print("PARTIAL: the run was interrupted; these numbers cover the episodes finished so far\n")
    print(outcome.table_text)
    print(f"\nrun directory: {outcome.run_dir.path}  (report: {outcome.run_dir.report_path})")
    if config.mlflow:
        from toolsweep.actors.result_sink import resolve_tracking_uri

        print(f"MLflow: experiment {config.name!r} at {resolve_tracking_uri(config.tracking_uri)}")
    if outcome.timeouts:
        print("wall-clock expiries (retried, never scored): "
              + ", ".join(f"{m} {n}" for m, n in sorted(outcome.timeouts.items())), file=sys.stderr)
    if (args.models or args.benchmarks or args.settings or args.limit is not None) and any(
            c.get("complete") is False for c in outcome.cells):
        print(f"partial cells (*) are finished by the sweep's whole command: {finishing_command(args.argv)}")
    if outcome.interrupted:
        print("interrupted: run the same command again to finish the rest (everything finished is kept)")
        return EXIT_TERMINATED if outcome.terminated else EXIT_INTERRUPTED
    return EXIT_UNITS_FAILED if outcome.gave_up else 0


def cmd_validate(args: argparse.Namespace) -> int:
    from toolsweep.evaluator.sweep import expand_units

    try:
        config = load_config(args.config)
        plans = resolve_plans(config)
        if config.stop_when is not None:
            from toolsweep.cluster.adaptive import check_stop_when

            check_stop_when(config)
    except ConfigError as err:
        return _fail_config(err)
    units = expand_units(config.name, [m.name for m in config.models], plans, config.sampling)
    cells = units.cells()
    print(f"{args.config}: valid. {len(units)} units in {len(cells)} cells; run directory {config.run_path()}")
    if config.stop_when is not None:
        from toolsweep.cluster.adaptive import most_units

        print(f"adaptive (stop_when): round 1 runs these {len(units)} units; all rounds at most "
              f"{most_units(config, plans)} units")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from toolsweep.cluster.record import finalize_run
    from toolsweep.cluster.run_record import config_from_run_dir, current_units, load_benchmarks
    from toolsweep.evaluator.rundir import RunDirectory

    run_dir = RunDirectory(args.run_dir)
    try:
        config = config_from_run_dir(run_dir)
    except FileNotFoundError as err:
        return _fail_config(err)
    benchmarks = load_benchmarks(config)
    units, _ = current_units(config, benchmarks)
    _, text = finalize_run(run_dir, config, benchmarks, unit_ids=units.id_set(), full_text=args.full,
                           cell_units=units.cell_sizes())
    from toolsweep.cluster.adaptive import attach_adaptive

    adaptive = attach_adaptive(run_dir)  # an adaptive sweep's rounds stay in the rebuilt summary
    print(text + (f"\n\n{adaptive}" if adaptive else ""))
    print(f"\nwrote {run_dir.summary_path} and {run_dir.report_path}")
    return 0


def cmd_sync_mlflow(args: argparse.Namespace) -> int:
    from toolsweep.cluster.sync import sync_run_dir

    try:
        n = sync_run_dir(Path(args.run_dir), args.tracking_uri)
    except FileNotFoundError as err:
        return _fail_config(err)
    except Exception as err:  # noqa: BLE001 - MLflow down or refusing: the run directory is untouched
        print(f"error: could not mirror {args.run_dir} into MLflow ({type(err).__name__}: {str(err)[:300]}); the run "
              "directory is the record and is untouched: run sync-mlflow again when MLflow is up", file=sys.stderr)
        return EXIT_UNITS_FAILED
    print(f"mirrored {n} cells of {args.run_dir} into MLflow")
    return 0


def _wrapped(label: str, text: str) -> str:
    return textwrap.fill(f"{label}: {text}", 100, initial_indent="  ", subsequent_indent="    ",
                         break_on_hyphens=False)


def cmd_benchmarks(args: argparse.Namespace) -> int:
    from toolsweep.evaluator.registry import available_benchmarks, get_benchmark

    for name, target in available_benchmarks().items():
        try:
            bench = get_benchmark(name, json.loads(args.options) if args.options else None)
        except Exception as exc:  # noqa: BLE001 - e.g. a dataset path is required
            # the whole message: its last lines say how to fix it
            detail = textwrap.indent(f"{type(exc).__name__}: {exc}", "    ").lstrip()
            print(f"{name}  ({target})\n  not loaded: {detail}\n")
            continue
        settings = list(bench.settings())
        print(f"{name}  v{bench.version}  ({target})")
        print(_wrapped("settings", ", ".join(settings)))
        if args.verbose:
            print("  policies:")
            for k, v in bench.scripted_policies().items():
                print(textwrap.fill(f"{k}: {v}", 100, initial_indent="    ", subsequent_indent="      "))
        else:
            print(_wrapped("policies", ", ".join(bench.scripted_policies())))
        baseline = bench.baseline_policy()
        if baseline:
            print(_wrapped("baseline (no-LLM floor)", baseline))
        exploits = bench.exploit_policies()
        if exploits:
            print(_wrapped("exploit policies", ", ".join(e.name for e in exploits)))
        print(_wrapped("metrics", ", ".join(s.name for s in bench.metrics(None))))
        print()
    if not args.verbose:
        print("(--verbose describes each policy)")
    return 0


def _delegate(module: str, argv: list[str]) -> int:
    return int(importlib.import_module(module).main(argv) or 0)


DELEGATED = {"plan": "toolsweep.cluster.plan", "preflight": "toolsweep.cluster.preflight",
             "models": "toolsweep.models.cli", "show": "toolsweep.cluster.show",
             "compare": "toolsweep.cluster.compare"}
"""Commands with their own argument parser: everything after the command name is theirs (--help too)."""


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("toolsweep")
    except PackageNotFoundError:
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="toolsweep", description=MAIN_HELP, epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"toolsweep {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    raw = argparse.RawDescriptionHelpFormatter

    p = sub.add_parser("run", help="run or resume a sweep", description=RUN_HELP, epilog=EXIT_CODES,
                       formatter_class=raw)
    p.add_argument("config", help="sweep YAML, e.g. configs/sweeps/quickstart.yaml")
    p.add_argument("--address", default=os.environ.get("TOOLSWEEP_ADDRESS"),
                   help='Ray cluster address ("auto" for `ray start --head`); default: $TOOLSWEEP_ADDRESS or an '
                   "embedded Ray")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI or sqlite:///mlflow.db)")
    p.add_argument("--output-dir", default=os.environ.get("TOOLSWEEP_OUTPUT_DIR"),
                   help="parent of runs/<sweep>/<run-id>/ (default: $TOOLSWEEP_OUTPUT_DIR, else the config's "
                   "output_dir, else runs)")
    p.add_argument("--run-id", help="name the run directory yourself (default: main, which grows with the config)")
    p.add_argument("--models", help="run only these models (comma-separated names from the config)")
    p.add_argument("--benchmarks", help="run only these benchmarks (comma-separated)")
    p.add_argument("--settings", help="run only these settings (comma-separated; of every selected benchmark)")
    p.add_argument("--limit", type=int, help="run only the first N tasks of each setting")
    p.add_argument("--scale-up-timeout", type=_seconds, metavar="SECONDS",
                   help="on an autoscaling cluster (KubeRay GPU groups that start at zero pods): ask the "
                        "autoscaler for the model servers' GPUs and wait up to SECONDS for them before the "
                        "placement check (default: the config's scale_up_timeout_s, 0 = do not wait)")
    p.add_argument("--mlflow-wait", type=_seconds, metavar="SECONDS",
                   help="wait up to SECONDS for the MLflow server before anything starts, and stop (exit 2) if "
                        "it never answers (default: the config's mlflow_wait_s, 0 = do not wait)")
    p.add_argument("--ray-start-timeout", type=_seconds, metavar="SECONDS",
                   help="an embedded Ray that fails to start (it waits a fixed 30 s for its raylet, too short on a "
                        "busy machine) is started again once, and again while SECONDS have not passed since the "
                        "first try (default: the config's ray_start_timeout_s, 0 = one retry)")
    p.add_argument("--permanent-error-stops-job", action="store_true",
                   help="as a Ray job's entrypoint (a KubeRay RayJob): on exit 2, 3 or 4, which no retry gets past, "
                        "stop this Ray job (status STOPPED) instead of failing it, so the RayJob is not retried")
    p.add_argument("--no-mlflow", action="store_true", help="do not mirror to MLflow")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (logs only)")
    p.add_argument("--skip-preflight", action="store_true",
                   help="start models even if their replies do not parse into actions (see `toolsweep preflight`)")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser(
        "validate", help="check a config without running it", formatter_class=raw,
        description="Check a sweep config (fields, benchmarks, settings, tasks, policies) without starting\n"
        "Ray or any model; prints how many units it expands to.\n\nexample:\n  toolsweep validate configs/sweeps/quickstart.yaml",
    )
    p.add_argument("config")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser(
        "report", help="re-print the table and rewrite report.html of a run directory", formatter_class=raw,
        description="Recompute summary.json (full bootstrap), report.html and plots/ from a run directory's\n"
        "episodes, and print each benchmark's headline metric per setting and model (--full: every cell's\n"
        "first metrics with their terminations, then the paper tables).\n\n"
        "examples:\n  toolsweep report runs/quickstart/main\n  toolsweep report runs/quickstart/main --full | less -S",
    )
    p.add_argument("run_dir")
    p.add_argument("--full", action="store_true", help="print every cell's metrics and the paper tables, not only the headline")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser(
        "sync-mlflow", help="mirror a run directory into MLflow", formatter_class=raw,
        description="Mirror a run directory into MLflow (for runs made while MLflow was down). Replays the\n"
        "episodes in finishing order so the charts show each cell converging; safe to repeat.\n\n"
        "example:\n  toolsweep sync-mlflow runs/quickstart/main --tracking-uri http://127.0.0.1:5000",
    )
    p.add_argument("run_dir")
    p.add_argument("--tracking-uri", help="default: $MLFLOW_TRACKING_URI or sqlite:///mlflow.db")
    p.set_defaults(func=cmd_sync_mlflow)

    p = sub.add_parser(
        "benchmarks", help="list registered benchmarks with their settings", formatter_class=raw,
        description="List every registered benchmark (built-in and from installed plugins) with its settings,\n"
        "scripted policies and metrics.\n\nexample:\n  toolsweep benchmarks\n"
        "  toolsweep benchmarks --options \"{\\\"data_dir\\\": \\\"$TOOLSWEEP_TRAJECT_DATA\\\"}\"   # TRAJECT-Bench's data",
    )
    p.add_argument("--options", help="JSON options passed to every benchmark (e.g. a data_dir)")
    p.add_argument("--verbose", "-v", action="store_true", help="describe each scripted policy")
    p.set_defaults(func=cmd_benchmarks)

    p = sub.add_parser("compare", help="models side by side with intervals (text, md, csv, latex, json)",
                       add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)

    p = sub.add_parser("show", help="read episodes of a run directory as transcripts", add_help=False)
    p.add_argument("rest", nargs=argparse.REMAINDER)

    p = sub.add_parser("plan", help="token budget of every cell against each model's context window", add_help=False)
    p.set_defaults(func=lambda a: _delegate("toolsweep.cluster.plan", a.rest))
    p.add_argument("rest", nargs=argparse.REMAINDER)

    p = sub.add_parser(
        "preflight", help="check that each model's replies parse into valid actions", add_help=False,
    )
    p.set_defaults(func=lambda a: _delegate("toolsweep.cluster.preflight", a.rest))
    p.add_argument("rest", nargs=argparse.REMAINDER)

    p = sub.add_parser("models", help="prepare local models (e.g. `toolsweep models prepare smollm2`)", add_help=False)
    p.set_defaults(func=lambda a: _delegate("toolsweep.models.cli", a.rest))
    p.add_argument("rest", nargs=argparse.REMAINDER)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in DELEGATED:
            return _delegate(DELEGATED[argv[0]], argv[1:])
        args = build_parser().parse_args(argv)
        args.argv = argv  # what was typed: `run` prints the command that finishes a subset's partial cells
        code = int(args.func(args))
        if getattr(args, "permanent_error_stops_job", False):
            from toolsweep.cluster.ray_job import stop_own_job

            stop_own_job(code, lambda msg: print(msg, file=sys.stderr, flush=True))
        return code
    except KeyboardInterrupt as exc:
        from toolsweep.cluster.scheduler import SIGTERM_SEEN, Terminated

        if isinstance(exc, Terminated) or SIGTERM_SEEN:
            print("terminated (SIGTERM)", file=sys.stderr)
            return EXIT_TERMINATED
        print("interrupted: everything recorded is kept; run the same command again to finish (it also completes "
              "the MLflow record)", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())

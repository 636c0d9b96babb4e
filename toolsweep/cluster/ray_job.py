"""A driver that runs as a Ray job (a KubeRay RayJob's entrypoint) ends a permanent error by stopping
its own job instead of failing it.

KubeRay retries a RayJob whose Ray job FAILED (`backoffLimit`), each time on a new cluster: right
for a lost head, useless for a bad config or an MLflow that never answered, which fail the same way
on every cluster (4 retries of 15 minutes each). A job that is STOPPED ends the RayJob as Complete
and is never retried (KubeRay 1.7.0, rayjob_controller.go: only JobStatusFailed makes the deployment
Failed, and only a Failed deployment is retried), and `ray job submit` exits 0 for it, so the
submitter is not retried either.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable

JOB_CONFIG_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"
"""Set by Ray's job supervisor for the entrypoint: its metadata's `job_name` is the submission id."""
DASHBOARD_ENV = "TOOLSWEEP_RAY_DASHBOARD"
DEFAULT_DASHBOARD = "http://127.0.0.1:8265"  # the head's job API: the entrypoint runs on the head
PERMANENT_EXIT_CODES = {2: "bad config", 3: "preflight failed", 4: "endpoint refused the configuration"}


def own_submission_id(environ: dict[str, str] | None = None) -> str | None:
    """The submission id of the Ray job this process is the entrypoint of, or None outside a job."""
    raw = (environ if environ is not None else os.environ).get(JOB_CONFIG_ENV)
    if not raw:
        return None
    try:
        metadata = json.loads(raw).get("metadata") or {}
    except (ValueError, AttributeError):
        return None
    return metadata.get("job_submission_id") or metadata.get("job_name") or None


def stop_own_job(code: int, log: Callable[[str], None], *, wait_s: float = 120.0) -> bool:
    """For a permanent exit code inside a Ray job: ask the job API to stop this job and wait to be
    ended by it (exiting first would record the job as FAILED). Returns False when there is nothing
    to stop or the job API refused, and the caller exits with `code` as usual."""
    if code not in PERMANENT_EXIT_CODES:
        return False
    job_id = own_submission_id()
    if job_id is None:
        return False
    address = os.environ.get(DASHBOARD_ENV, DEFAULT_DASHBOARD)
    log(f"exit {code} ({PERMANENT_EXIT_CODES[code]}) is permanent: stopping Ray job {job_id} so that it is not "
        "retried (the RayJob ends Complete, job status STOPPED); fix the cause and re-create the RayJob")
    try:
        from ray.job_submission import JobSubmissionClient

        JobSubmissionClient(address).stop_job(job_id)
    except Exception as exc:  # noqa: BLE001 - the job then fails as before, and is retried
        log(f"could not stop Ray job {job_id} at {address} ({type(exc).__name__}: {str(exc)[:200]}); it ends as "
            f"failed (exit {code}; a RayJob retries it)")
        return False
    time.sleep(wait_s)  # the job's supervisor ends this process (SIGTERM) and records the job as STOPPED
    return True

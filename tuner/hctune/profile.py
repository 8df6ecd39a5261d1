"""`hctune profile`: run a program under a tracer and register the traces it leaves.

The LD_PRELOAD tracer (build/libhctrace.so) writes one file per process into a private temp
directory next to the output; afterwards the main trace moves to the output path, the others
(forked children, exec'd programs) beside it as <name>.<pid>[.<n>].hct, and all are registered,
the main one last so it is the database's latest trace.  The main trace is the last image of
the first process: wrappers that exec the real program (a pyenv shim, `env`, `nice`) come
first in that chain, the program the user meant last; forked children are the others.

After the program exits profile reads no event (issue 23: its own work then must stay small
beside the program's run): each trace's summary is its chunk index plus the counts the tracer
kept while recording (`<trace>.sum`, hctune.trace.stats.summary), and the full statistics are
computed by the first command that needs them (register.named stores them then).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import signal as signal_module
import shutil
import stat
import struct
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from hctune import native, paths
from hctune.errors import HctuneError
from hctune.trace import spec
from hctune.trace.reader import TraceError
from hctune.trace.register import register
from hctune.trace.stats import SUMMARY_SUFFIX, read_counts, summary

PIN_TOOL = paths.BUILD / "hctrace_pin.so"    # `make pintool PIN_ROOT=...` in a checkout
DEFAULT_DIR = Path("hctune-traces")
_PT_INTERP = 3


@dataclass
class Profile:
    exit_code: int
    main: Path
    main_id: int
    main_stats: dict                   # hctune.trace.stats.summary(): no event read
    others: list[tuple[Path, dict]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)     # unreadable traces, one line each
    signal: int | None = None          # the fatal signal the program died of, if it did
    program_seconds: float = 0.0       # the traced program's run (wall)
    after_seconds: float = 0.0         # profile's own work after the program ended (wall)
    after_cpu_seconds: float = 0.0     # the same in CPU time (user + system, every thread)


def find_program(name: str) -> Path:
    if os.sep not in name:
        found = shutil.which(name)
        if not found:
            raise HctuneError(f"program not found: {name}")
        return Path(found)
    p = Path(name)
    if not p.exists():
        raise HctuneError(f"program not found: {name}")
    if p.is_dir() or not os.access(p, os.X_OK):
        raise HctuneError(f"not an executable program: {name}")
    return p


def _elf_is_dynamic(head: bytes, f) -> bool | None:
    """True if the ELF file has a PT_INTERP (a dynamic loader runs it), None if not ELF64."""
    if head[:4] != b"\x7fELF" or head[4] != 2:
        return None
    order = "<" if head[5] == 1 else ">"
    phoff, = struct.unpack_from(order + "Q", head, 0x20)
    phentsize, phnum = struct.unpack_from(order + "HH", head, 0x36)
    f.seek(phoff)
    table = f.read(phentsize * phnum)
    return any(struct.unpack_from(order + "I", table, i * phentsize)[0] == _PT_INTERP
               for i in range(phnum) if (i + 1) * phentsize <= len(table))


def check_preloadable(program: Path, depth: int = 0) -> None:
    """Refuse, with one line, programs the dynamic loader will not preload into."""
    st = program.stat()
    if st.st_mode & (stat.S_ISUID | stat.S_ISGID):
        raise HctuneError(f"{program} is setuid/setgid: the loader ignores LD_PRELOAD for it, "
                          "so the preload tracer cannot trace it (try --tracer pin)")
    try:
        with open(program, "rb") as f:
            head = f.read(128)
            dynamic = _elf_is_dynamic(head, f) if len(head) >= 64 else None
    except OSError as e:
        raise HctuneError(f"cannot read {program}: {e.strerror}") from None
    if dynamic is False:
        raise HctuneError(f"{program} is statically linked: LD_PRELOAD cannot reach its malloc "
                          "(try --tracer pin)")
    if dynamic is None and head.startswith(b"#!") and depth < 4:
        words = head[2:].split(b"\n")[0].split()
        if words:
            interp = Path(words[0].decode(errors="replace"))
            if interp.name == "env" and len(words) > 1:
                interp = find_program(words[1].decode(errors="replace"))
            if interp.exists():
                check_preloadable(interp, depth + 1)


def default_output(program: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return DEFAULT_DIR / f"{Path(program).name}-{stamp}{spec.EXTENSION}"


def _command(argv: list[str], tracer: str, out: Path, timestamps: bool = False,
             start_after: float | None = None, duration: float | None = None,
             toggle_signal: int | None = None,
             period: float | None = None) -> tuple[list[str], dict]:
    env = dict(os.environ)
    for name in ("HCTRACE_START_AFTER", "HCTRACE_DURATION", "HCTRACE_SIGNAL", "HCTRACE_PERIOD"):
        env.pop(name, None)
    if period is not None:
        if tracer != "preload" or toggle_signal is not None:
            raise HctuneError("--period needs the preload tracer and no --signal")
        if not duration or not duration <= period <= 1e8:
            raise HctuneError(f"--period needs --duration, and seconds from the duration "
                              f"({duration or 0:g}) to 1e8, not {period:g}")
        env["HCTRACE_PERIOD"] = f"{period:.6f}"
    if timestamps:
        env["HCTRACE_TIME"] = "1"
    env["HCTRACE_SUMMARY"] = "1"     # <trace>.sum: the counts profile prints (no event read)
    if toggle_signal is not None:
        if tracer != "preload" or start_after is not None:
            raise HctuneError("--signal needs the preload tracer and no --start-after")
        env["HCTRACE_SIGNAL"] = str(int(toggle_signal))
    if start_after is not None or duration is not None:
        if tracer != "preload":
            raise HctuneError("--start-after/--duration need the preload tracer")
        for name, value in (("start-after", start_after), ("duration", duration)):
            if value is not None and not 0 <= value <= 1e8:
                raise HctuneError(f"--{name} must be seconds between 0 and 1e8, not {value}")
        # the tracer's window (tracer/hctrace_preload.c): seconds since the program started
        if toggle_signal is None:
            env["HCTRACE_START_AFTER"] = f"{start_after or 0:.6f}"
        if duration:
            env["HCTRACE_DURATION"] = f"{duration:.6f}"
    if tracer == "preload":
        tracer_so = native.path("libhctrace.so")
        env["HCTRACE_OUT"] = str(out)
        env["LD_PRELOAD"] = " ".join(filter(None, [str(tracer_so), env.get("LD_PRELOAD", "")]))
        return argv, env
    pin_root = os.environ.get("PIN_ROOT")
    if not pin_root:
        raise HctuneError("--tracer pin needs PIN_ROOT (an Intel Pin kit) and "
                          "`make pintool PIN_ROOT=...`")
    if not PIN_TOOL.exists():
        raise HctuneError(f"the Pin tool is not built: make pintool PIN_ROOT={pin_root}")
    return [str(Path(pin_root) / "pin"), "-follow_execv", "-t", str(PIN_TOOL), "-o", str(out),
            "--", *argv], env


def _run(cmd: list[str], env: dict) -> int:
    """The program's exit status as Popen gives it: negative for a fatal signal."""
    try:
        proc = subprocess.Popen(cmd, env=env)
    except OSError as e:
        raise HctuneError(f"cannot run {cmd[0]}: {e.strerror}") from None
    while True:
        try:
            rc = proc.wait()
            break
        except KeyboardInterrupt:
            continue            # the program got the Ctrl-C too; its traces are still wanted
    return rc


def _order(files: list[Path], base: str) -> list[Path]:
    # first process first, then by pid and exec count as the names say
    def key(p: Path):
        rest = p.name[len(base):].lstrip(".")
        return [int(x) if x.isdigit() else 0 for x in rest.split(".")] if rest else [-1]
    return sorted(files, key=key)


def _main_trace(readable: list[tuple[Path, dict]], base: str) -> tuple[Path, dict]:
    """The last image of the first process: wrappers that exec the real program (shims,
    `env`, `nice`) leave it as the final link of that chain."""
    first = next((fs for fs in readable if fs[0].name == base), None)
    if first is None:
        return readable[0]
    chain = [fs for fs in readable
             if fs[0].name == base or fs[0].name.startswith(f"{base}.{first[1]['pid']}")
             and fs[0].name[len(base):].split(".")[1] == str(first[1]["pid"])]
    return chain[-1]    # readable is in tracer order: base, base.<pid>, base.<pid>.<n>...


class _Hasher(threading.Thread):
    """The content hash of each trace file, taken while the tracer writes it: the files are only
    ever appended to (O_APPEND, whole chunks), so the bytes already there are final and, after
    the program exits, only the last ones are left to hash (issue 23: profile's own work after
    the exit).  The tracer's `.sum` files are rewritten, so they are not hashed."""

    def __init__(self, folder: Path, base: str):
        super().__init__(daemon=True)
        self.folder, self.base = folder, base
        self.done = threading.Event()
        self.state: dict[str, list] = {}          # file name -> [hashlib object, bytes hashed]

    def _catch_up(self) -> int:
        read = 0
        for p in self.folder.iterdir():
            if not p.name.startswith(self.base) or p.name.endswith(SUMMARY_SUFFIX):
                continue
            h = self.state.setdefault(p.name, [hashlib.sha256(), 0])
            try:
                with open(p, "rb") as f:
                    f.seek(h[1])
                    for block in iter(lambda: f.read(1 << 20), b""):
                        h[0].update(block)
                        h[1] += len(block)
                        read += len(block)
            except OSError:
                continue
        return read

    def run(self):
        while not self.done.is_set():
            if not self._catch_up():
                self.done.wait(0.25)

    def finish(self) -> dict[str, str]:
        """After the program exited: the rest of every file, and the hashes by file name."""
        self.done.set()
        self.join()
        self._catch_up()
        return {name: h.hexdigest() for name, (h, _) in self.state.items()}


def invocation(argv: list[str]) -> dict:
    """What `hctune validate` needs to run this program again: argv, the working directory,
    and stdin's path when stdin is a regular file (a pipe or terminal cannot be replayed)."""
    stdin = None
    try:
        if stat.S_ISREG(os.fstat(0).st_mode):
            stdin = os.readlink("/proc/self/fd/0")
            if not os.path.isfile(stdin):
                stdin = None
    except OSError:
        stdin = None
    return {"argv": list(argv), "cwd": os.getcwd(), "stdin": stdin}


def profile(argv: list[str], out: str | Path | None = None, tracer: str = "preload",
            db_path: str | Path = "hctune.db", timestamps: bool = False,
            start_after: float | None = None, duration: float | None = None,
            toggle_signal: int | None = None, period: float | None = None,
            server: "ServerLoad | None" = None) -> Profile:
    """Run argv under the tracer; move, register and summarise its traces.  start_after,
    duration (seconds): record only that window of the run; the trace then begins with one
    allocation per block live when the window opened (docs/tracing.md).  toggle_signal: each
    time the program gets that signal a shut window opens or an open one shuts (or after
    duration).  period (with duration): time slices, a window of duration every period from
    start_after; between windows the trace keeps only frees of blocks it has, and each window
    opens with the blocks allocated since that are still live.  server: argv is a server,
    started, loaded and stopped as `server` says (run_server); its load and readiness commands
    are recorded with the trace."""
    if server is not None:
        server.check()
    if not argv:
        raise HctuneError("no program given: hctune profile ./app args...")
    program = find_program(argv[0])
    if tracer == "preload":
        check_preloadable(program)
    out = Path(out) if out else default_output(argv[0])
    if out.is_dir():
        raise HctuneError(f"{out} is a directory; give a file name with -o")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        base = "trace" + spec.EXTENSION
        # absolute: children may chdir
        cmd, env = _command(list(argv), tracer, (tmp / base).resolve(), timestamps,
                            start_after, duration, toggle_signal, period)
        hasher = _Hasher(tmp, base)
        t0 = time.perf_counter()
        hasher.start()
        try:
            if server is None:
                rc = _run(cmd, env)
            else:
                res = run_server(cmd, env, server)
                if res.problem:
                    raise ServerError(res.problem)
                rc = 0      # stopped as asked (by its stop signal or after it): a whole run
        finally:
            hasher.done.set()
        t_exit, cpu_exit = time.perf_counter(), time.process_time()
        code, died_of = (128 - rc, -rc) if rc < 0 else (rc, None)
        files = _order([p for p in tmp.iterdir() if p.name.startswith(base)
                        and not p.name.endswith(SUMMARY_SUFFIX)], base)
        if not files:
            raise HctuneError(f"no trace was written for {argv[0]} (did it start?)")
        readable, skipped = [], []
        # After the exit: the hashes' last bytes and each trace's chunk index, no event read
        by_name = hasher.finish()
        sums = {f: by_name.get(f.name) for f in files}
        for f in files:
            try:
                readable.append((f, summary(f, read_counts(f.with_name(f.name +
                                                                       SUMMARY_SUFFIX)))))
            except TraceError as e:
                skipped.append(str(e).replace(str(tmp) + os.sep, ""))
        if not readable:
            raise HctuneError(f"no readable trace: {skipped[0]}")
        main = _main_trace(readable, base)
        placed = []
        for f, st in readable:
            if f is main[0]:
                dest = out
            else:
                # trace.hct.<pid>[.<n>] -> <out>.<pid>[.<n>].hct; the first process's own
                # file, when not the main one, -> <out>.<pid>.0.hct (a name the tracer never uses)
                rest = f.name[len(base):] or f".{st['pid']}.0"
                dest = out.with_name(out.stem + rest + spec.EXTENSION)
            os.replace(f, dest)
            placed.append((dest, st, f is main[0], sums[f]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    others = []
    for dest, st, is_main, sha in placed:
        if not is_main:
            register(db_path, dest, tracer, st, sha=sha, full=False)
            others.append((dest, st))
    main_dest, main_st, main_sha = next((d, s, h) for d, s, m, h in placed if m)
    inv = invocation(argv)
    if server is not None:
        inv["server"] = server.to_dict()
    main_id, _ = register(db_path, main_dest, tracer, main_st, inv, sha=main_sha, full=False)
    return Profile(code, main_dest, main_id, main_st, others, skipped, died_of,
                   t_exit - t0, time.perf_counter() - t_exit, time.process_time() - cpu_exit)



# ---- servers under their own load (issue 31; docs/servers.md) ----

SAMPLE_EVERY = 0.1          # seconds between two samples of a server's RSS
READY_TIMEOUT = 30.0        # seconds the --ready command has to succeed
STOP_GRACE = 10.0           # seconds after the stop signal before SIGKILL
_CLIENT_DROP = ("LD_PRELOAD", "HCTRACE_")   # the load never runs under the tracer/candidate


@dataclass
class ServerLoad:
    """A long-running program and the client that loads it: `load` (a shell command, run
    outside the tracer or candidate), `ready` (a shell command that exits 0 once the server
    answers), the signal that stops it, and seconds of warm-up between ready and the load."""
    load: str
    ready: str | None = None
    stop_signal: int = 15
    warmup: float = 0.0
    ready_timeout: float = READY_TIMEOUT

    def to_dict(self) -> dict:
        return {"load": self.load, "ready": self.ready, "stop_signal": self.stop_signal,
                "warmup": self.warmup, "ready_timeout": self.ready_timeout}

    @classmethod
    def from_dict(cls, d: dict | None) -> "ServerLoad | None":
        if not d:
            return None
        return cls(d["load"], d.get("ready"), int(d.get("stop_signal", 15)),
                   float(d.get("warmup", 0.0)), float(d.get("ready_timeout", READY_TIMEOUT)))

    def check(self) -> "ServerLoad":
        """One-line errors for a load or readiness command whose program is not there."""
        for opt, cmd in (("--load", self.load), ("--ready", self.ready)):
            if cmd is None:
                continue
            try:
                words = shlex.split(cmd)
            except ValueError as e:
                raise HctuneError(f"{opt} {cmd!r}: {e}") from None
            while words and "=" in words[0] and not words[0].startswith(("/", ".")):
                words = words[1:]              # VAR=value before the program
            if not words:
                raise HctuneError(f"{opt} is empty")
            name = words[0]
            if os.sep in name:
                if not (os.path.isfile(name) and os.access(name, os.X_OK)):
                    raise HctuneError(f"{opt} command not found: {name}")
            elif shutil.which(name) is None and name not in _SHELL_WORDS:
                raise HctuneError(f"{opt} command not found: {name}")
        if not 0 <= self.warmup <= 1e6:
            raise HctuneError(f"--warmup must be seconds from 0, not {self.warmup:g}")
        if not 0 < self.ready_timeout <= 1e6:
            raise HctuneError(f"--ready-timeout must be seconds above 0, not "
                              f"{self.ready_timeout:g}")
        return self


_SHELL_WORDS = {"cd", "exec", "exit", "true", "false", "test", "[", "echo", "printf", "read",
                "for", "while", "if", "set", "export", "sleep", ":", "."}


class ServerError(HctuneError):
    """The server never got ready, died, or its load failed: one line."""


@dataclass
class ServerRun:
    """One server run under its load: the load's wall time, exit status and stdout, the server's
    RSS (every process of its session) sampled every SAMPLE_EVERY s from start to stop, its own
    exit status and CPU time."""
    load_wall_s: float = 0.0
    load_status: int | None = None
    load_stdout: Path | None = None
    load_last_line: str = ""
    server_status: int | None = None       # Popen's: negative for a signal
    server_user_s: float = 0.0
    server_sys_s: float = 0.0
    curve: list = field(default_factory=list)   # [(seconds since the load began, RSS bytes)]
    problem: str | None = None
    leftovers: int = 0                      # processes of its session killed after the stop

    def rss(self) -> dict:
        """mean (time-weighted over the load), peak, p95 and final RSS of the curve."""
        pts = [(t, r) for t, r in self.curve if t >= 0]
        if not pts:
            return {"mean": None, "peak": None, "p95": None, "final": None, "samples": 0}
        vals = sorted(r for _, r in pts)
        area = sum((t2 - t1) * r1 for (t1, r1), (t2, _) in zip(pts, pts[1:]))
        span = pts[-1][0] - pts[0][0]
        mean = area / span if span > 0 else float(pts[-1][1])
        return {"mean": mean, "peak": max(r for _, r in self.curve), "final": pts[-1][1],
                "p95": vals[min(len(vals) - 1, int(0.95 * len(vals)))], "samples": len(pts)}


_PAGE = os.sysconf("SC_PAGE_SIZE")


def session_processes(sid: int) -> dict[int, int]:
    """pid -> RSS bytes of every live (not zombie) process of session `sid`."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            if int(fields[3]) != sid or fields[0] == b"Z":
                continue
            with open(f"/proc/{name}/statm", "rb") as f:
                out[int(name)] = int(f.read().split()[1]) * _PAGE
        except (OSError, IndexError, ValueError):
            continue
    return out


def client_env(base: dict | None = None) -> dict:
    """The environment of the load and readiness commands: ours, without the tracer or a
    candidate allocator."""
    return {k: v for k, v in (base or os.environ).items() if not k.startswith(_CLIENT_DROP)}


def _last_line(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
            lines = f.read().decode(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][:200] if lines else ""


def _status_words(rc: int) -> str:
    return f"signal {-rc}" if rc < 0 else f"status {rc}"


def _stop(proc: subprocess.Popen, sig: int, grace: float, run: ServerRun) -> None:
    """Stop the server: `sig`, then SIGKILL to its whole session after `grace` s; returns once
    no process of its session is left (its CPU time and exit status into `run`)."""
    def reap(block: bool) -> bool:
        if proc.returncode is not None:
            return True
        try:
            pid, status, ru = os.wait4(proc.pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return True
        if pid == 0:
            return False
        proc.returncode = os.waitstatus_to_exitcode(status)
        run.server_status = proc.returncode
        run.server_user_s, run.server_sys_s = ru.ru_utime, ru.ru_stime
        return True
    if not reap(False):
        try:
            os.kill(proc.pid, sig)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + grace
        while not reap(False) and time.monotonic() < deadline:
            time.sleep(0.02)
    left = [p for p in session_processes(proc.pid) if p != proc.pid]
    run.leftovers = len(left)
    for _ in range(250):                     # bounded: 5 s
        for p in [proc.pid, *left]:
            try:
                os.kill(p, signal_module.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        reap(False)
        left = [p for p in session_processes(proc.pid) if p != proc.pid]
        if proc.returncode is not None and not left:
            return
        time.sleep(0.02)
    reap(True)


def run_server(cmd: list[str], env: dict, spec_: ServerLoad, cwd: str | None = None,
               workdir: Path | None = None, timeout: float | None = None,
               sample: bool = False) -> ServerRun:
    """Start `cmd` (the server, with `env`: the tracer's or a candidate's) in its own session,
    wait until `spec_.ready` exits 0, run `spec_.load` (client environment), then stop the
    server with its stop signal and make sure nothing of its session is left. With `sample`,
    the RSS of all its processes every SAMPLE_EVERY s. Problems (never ready, died, a load that
    failed or timed out) go into .problem, one line; the server is stopped in every case."""
    own = workdir is None
    work = Path(tempfile.mkdtemp(prefix="hctune-server-")) if own else workdir
    run = ServerRun(load_stdout=work / "load.out")
    srv_log = work / "server.log"
    t_start = time.monotonic()
    try:
        with open(srv_log, "wb") as log:
            try:
                proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                                        stdout=log, stderr=log, start_new_session=True)
            except OSError as e:
                run.problem = f"cannot run {cmd[0]}: {e.strerror}"
                return run
        try:
            run.problem = _until_ready(proc, spec_, cwd, srv_log, run, sample, t_start)
            if run.problem is None:
                run.problem = _load(proc, spec_, cwd, work, srv_log, run, sample, timeout)
        finally:
            _stop(proc, spec_.stop_signal, STOP_GRACE, run)
    finally:
        if own:
            shutil.rmtree(work, ignore_errors=True)
    return run


def _died(proc, srv_log, when: str) -> str:
    last = _last_line(srv_log)
    return (f"the server exited {when} ({_status_words(proc.returncode)})"
            + (f": {last}" if last else ""))


def _until_ready(proc, spec_, cwd, srv_log, run, sample, t_start) -> str | None:
    deadline = t_start + spec_.ready_timeout
    env = client_env()
    while True:
        if proc.poll() is not None:
            return _died(proc, srv_log, "at once")
        if spec_.ready is None:
            break
        left = deadline - time.monotonic()
        if left <= 0:
            return (f"the server did not get ready in {spec_.ready_timeout:g} s (--ready "
                    f"{spec_.ready!r} never exited 0)")
        try:
            r = subprocess.run(["sh", "-c", spec_.ready], env=env, cwd=cwd,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, timeout=max(0.5, min(5.0, left)),
                               start_new_session=True)
            if r.returncode == 0:
                break
            if r.returncode == 127:
                return f"--ready command not found: {spec_.ready}"
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.05)
    end = time.monotonic() + spec_.warmup
    while time.monotonic() < end:
        if proc.poll() is not None:
            return _died(proc, srv_log, "during the warm-up")
        if sample:
            run.curve.append((time.monotonic() - end, sum(session_processes(proc.pid).values())))
        time.sleep(min(SAMPLE_EVERY, max(0.0, end - time.monotonic())))
    return None


def _load(proc, spec_, cwd, work, srv_log, run, sample, timeout) -> str | None:
    out, err = work / "load.out", work / "load.err"
    t0 = time.monotonic()
    with open(out, "wb") as fo, open(err, "wb") as fe:
        load = subprocess.Popen(["sh", "-c", spec_.load], env=client_env(), cwd=cwd,
                                stdin=subprocess.DEVNULL, stdout=fo, stderr=fe,
                                start_new_session=True)
    problem = None
    try:
        while True:
            if sample:
                run.curve.append((time.monotonic() - t0,
                                  sum(session_processes(proc.pid).values())))
            try:
                load.wait(timeout=SAMPLE_EVERY)
                break
            except subprocess.TimeoutExpired:
                pass
            if proc.poll() is not None:
                problem = _died(proc, srv_log, "during the load")
                break
            if timeout is not None and time.monotonic() - t0 > timeout:
                problem = f"the load timed out after {timeout:g} s"
                break
    finally:
        if load.poll() is None:
            try:
                os.killpg(load.pid, signal_module.SIGKILL)
            except ProcessLookupError:
                pass
            load.wait()
    run.load_wall_s = time.monotonic() - t0
    run.load_status = load.returncode
    if problem is None and load.returncode != 0 and proc.poll() is None:
        # a load that failed because the server is dying (a crash, a core being written): the
        # server's death is the cause to name; a server still serving after this is not dying
        try:
            proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            pass
    run.load_last_line = _last_line(err) or _last_line(out)
    if sample and proc.poll() is None:
        run.curve.append((run.load_wall_s, sum(session_processes(proc.pid).values())))
    if problem is None and proc.poll() is not None:
        problem = _died(proc, srv_log, "during the load")
    if problem is None and load.returncode == 127:
        problem = f"--load command not found: {spec_.load}"
    if problem is None and load.returncode != 0:
        problem = (f"the load failed ({_status_words(load.returncode)})"
                   + (f": {run.load_last_line}" if run.load_last_line else ""))
    return problem

"""`hctune serve`: the web app and JSON API (hctune.serve.app) under uvicorn, plus N local
workers (`hctune worker` processes) when asked."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys
import threading
from pathlib import Path

import click

from hctune.errors import HctuneError


MIN_TOKEN = 16   # characters of HCTUNE_TOKEN at least (a short one is guessed)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _die_with_parent():
    """Linux: the local workers get SIGTERM when the server goes, however it goes (uvicorn
    re-raises the signal that stopped it, so a `finally` alone is not enough)."""
    import ctypes  # deferred: runs in the worker child before exec
    import signal  # deferred: (as above)
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


RESTART_SECONDS = 2.0   # how often the local workers are looked at


def _supervise(procs: list, start, stop: threading.Event) -> None:
    """Restart a local worker that died (killed, crashed): its study's running trial is failed
    and retried by the others (hctune.jobs.runner), and the new one takes up the queue."""
    while not stop.wait(RESTART_SECONDS):
        for i, p in enumerate(procs):
            code = p.poll()
            if code is not None and not stop.is_set():
                click.echo(f"hctune serve: worker {p.pid} exited ({code}); starting another",
                           err=True)
                procs[i] = start()


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8300, show_default=True)
@click.option("--storage", default=None,
              help="Optuna storage URL (default: the --db database).")
@click.option("--token", envvar="HCTUNE_TOKEN", default=None, show_envvar=True,
              help="Every request needs it (reads too, unless --public-read); required off "
                   "loopback. Prefer the environment variable HCTUNE_TOKEN: `ps` shows a "
                   "command line to every user of the machine.")
@click.option("--public-read", is_flag=True,
              help="With a token: anyone may read studies and traces (downloads and writes "
                   "still need the token).")
@click.option("--workers", type=click.IntRange(0, 64), default=0, show_default=True,
              help="Local `hctune worker` processes to start.")
@click.option("--http-workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Server processes answering HTTP (uvicorn's workers; each keeps its own "
                   "cache of the studies' trials).")
@click.option("--data-dir", type=click.Path(file_okay=False), default=None,
              help="Where uploads and emitted files go (default: <db>.serve/ beside a SQLite "
                   "db, else the user's hctune data directory).")
@click.option("--max-upload", type=click.IntRange(1), default=256, show_default=True,
              metavar="MB", help="Largest trace upload, in MiB.")
@click.option("--trials-ttl", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
              help="How long a read of a study's trials is served before it is read again "
                   "(default 1; 0: every request reads them).")
@click.option("--allowed-host", "allowed_hosts", multiple=True, metavar="NAME",
              help="A host name the server answers besides the address it listens on (and "
                   "localhost on a loopback address); repeatable. Any other Host header is "
                   "refused (DNS rebinding); '*' turns the check off (a proxy checks it).")
@click.option("--upload-quota", type=click.IntRange(1), default=4096, show_default=True,
              metavar="MB", help="All the trace files this server stores, in MiB.")
@click.option("--max-traces", type=click.IntRange(1), default=1000, show_default=True,
              help="Traces this server stores at most.")
@click.option("--min-free", type=click.IntRange(0), default=1024, show_default=True,
              metavar="MB", help="Space an upload leaves free on the data directory's disk.")
@click.option("--compile-slots", type=click.IntRange(1, 16), default=1, show_default=True,
              help="Shared libraries compiled at once for downloads (more asked: 429).")
@click.pass_context
def command(ctx, host, port, storage, token, public_read, workers, http_workers, data_dir,
            max_upload, trials_ttl, allowed_hosts, upload_quota, max_traces, min_free,
            compile_slots):
    """Serve the web app and JSON API (OpenAPI at /docs) over the results database."""
    import uvicorn  # deferred: uvicorn, FastAPI, SQLAlchemy, Optuna: only `hctune serve` needs them

    from hctune import paths  # deferred: (as above)
    from hctune.db import Database, is_url  # deferred: (as above)
    from hctune.search.storage import default_url  # deferred: (as above)
    from hctune.serve.app import ENV_CONFIG, Config, create_app  # deferred: (as above)

    if not _loopback(host) and not token:
        raise HctuneError(f"--host {host} is not a loopback address: set HCTUNE_TOKEN "
                          "(or give --token)")
    if token and ctx.get_parameter_source("token") == click.core.ParameterSource.COMMANDLINE:
        click.echo("hctune serve: --token shows in `ps` to every user of this machine; "
                   "prefer HCTUNE_TOKEN=... in the environment", err=True)
    if public_read and not token:
        raise HctuneError("--public-read without a token: everything is public already")
    if token is not None and len(token) < MIN_TOKEN:
        raise HctuneError(f"the token is {len(token)} characters long: give at least "
                          f"{MIN_TOKEN} (e.g. `python3 -c 'import secrets; "
                          "print(secrets.token_urlsafe(24))'`)")
    db_path = ctx.obj["db_path"]
    Database(db_path).close()   # create or upgrade the schema before anything reads it
    url = storage or default_url(db_path)
    from hctune.search.storage import open_storage  # deferred: (as above)
    open_storage(url)   # a bad or unreachable URL: one line now, not an error per request
    if data_dir:
        data = Path(data_dir)
    elif is_url(db_path):            # a database server: this machine's data directory
        data = paths.data_dir() / "serve"
    else:
        data = Path(str(Path(db_path).resolve()) + ".serve")
    cfg = Config(db_path, url, data, token=token, max_upload=max_upload << 20,
                 public_read=public_read, local_workers=workers, bind_host=host,
                 allowed_hosts=allowed_hosts, upload_quota=upload_quota << 20,
                 max_traces=max_traces, min_free=min_free << 20, compile_slots=compile_slots,
                 **({} if trials_ttl is None else {"trials_ttl": trials_ttl}))
    procs = []
    # the database and storage URLs (passwords and all) by environment, not on a command line
    # that `ps` shows
    env = {**os.environ, "HCTUNE_DB": db_path, **({"HCTUNE_STORAGE": storage} if storage else {}),
           # the /workers page marks them local (hctune.jobs.runner.Presence)
           "HCTUNE_WORKER_ORIGIN": f"serve:{os.getpid()}"}
    def start_worker():
        return subprocess.Popen([sys.executable, "-m", "hctune", "worker"], env=env,
                                preexec_fn=_die_with_parent)
    for _ in range(workers):
        procs.append(start_worker())
    stop = threading.Event()
    if workers:
        threading.Thread(target=_supervise, args=(procs, start_worker, stop), daemon=True,
                         name="hctune-workers").start()
    click.echo(f"hctune serve: http://{host}:{port}/ (API at /docs; {workers} local workers)",
               err=True)
    try:
        if http_workers == 1:
            uvicorn.run(create_app(cfg), host=host, port=port, log_level="warning")
        else:   # uvicorn starts its processes from an import string; they read cfg from here
            os.environ[ENV_CONFIG] = cfg.to_env()
            uvicorn.run("hctune.serve.app:app_from_env", factory=True, workers=http_workers,
                        host=host, port=port, log_level="warning")
    finally:
        stop.set()
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()

"""`pip install hctune` outside the checkout: build the wheel, install it into a fresh
virtualenv in a temporary directory, and from an unrelated directory (no checkout on the path,
PYTHONPATH unset, an empty per-user cache) profile a real program, search, emit --so and run
the program on the emitted library.

The wheel itself is installed with `pip install --no-deps`; its pinned dependencies come from
the checkout's .venv through a .pth line (only its site-packages directory: the .pth files
there, the checkout's editable hctune among them, are not processed), and `pip check` verifies
they satisfy the wheel's pins.  That keeps the test at seconds instead of the ~40 s (warm pip
cache; more when downloading) of resolving them from PyPI; HCTUNE_WHEEL_FROM_PYPI=1 does the
full `pip install` from PyPI instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT

AWK = '{ for (i = 1; i <= NF; i++) c[$i]++ } END { n = 0; for (w in c) n++; print n }'


def _run(cmd, **kw):
    kw.setdefault("timeout", 600)
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert res.returncode == 0, f"{cmd}\n{res.stdout[-2000:]}\n{res.stderr[-3000:]}"
    return res


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # build from a copy of the tracked files: never writes into the checkout
    src = out / "src"
    files = _run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT).stdout.split("\n")
    for f in filter(None, files):
        if (ROOT / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, src / f)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
          "-w", str(out), str(src)])
    return next(out.glob("hctune-*.whl"))


def test_wheel_carries_the_data(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for want in ("hctune/_data/configs/knobs.toml", "hctune/_data/configs/debian-packages.txt",
                 "hctune/_data/templates/malloc.c.j2", "hctune/_data/allocator/hc/hc_api.c",
                 "hctune/_data/allocator/replay/hcreplay_main.c",
                 "hctune/_data/tracer/hctrace_preload.c", "hctune/cli.py"):
        assert want in names, want
    # every C file of the allocator ships, whatever its name (globs, not a list)
    for c in (ROOT / "allocator" / "hc").glob("*.[ch]"):
        assert f"hctune/_data/allocator/hc/{c.name}" in names, c.name


def test_installed_wheel_works_outside_the_checkout(wheel, tmp_path):
    venv = tmp_path / "venv"
    # without a pip of its own (ensurepip costs ~6 CPU seconds): this pip installs into it
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    py = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(py)]
    # (without the checkout on PYTHONPATH, where pip would find hctune installed already)
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if os.environ.get("HCTUNE_WHEEL_FROM_PYPI"):
        _run([*pip, "install", "-q", str(wheel)], env=clean)
    else:
        _run([*pip, "install", "-q", "--no-deps", str(wheel)], env=clean)
        site = _run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]
                    ).stdout.strip()
        Path(site, "hctune-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
        _run([*pip, "check"], env=clean)
    proj = tmp_path / "project"
    proj.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "HCTUNE_DB", "HCTUNE_BUILD", "LD_PRELOAD", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
               HCTUNE_CACHE=str(tmp_path / "cache"))
    hct = str(venv / "bin" / "hctune")

    def run(*args, extra_env=None):
        return _run(list(args), cwd=proj, env=dict(env, **(extra_env or {})))

    where = run(str(py), "-c", "import hctune, hctune.paths as p; print(hctune.__file__); "
                "print(p.data_dir()); print(p.checkout())").stdout.split("\n")
    assert where[0].startswith(str(venv)) and where[1].startswith(str(venv)), where
    assert where[2] == "None"
    version = run(hct, "--version").stdout
    assert version.startswith("hctune 0.1") and "commit" not in version

    doc = json.loads(run(hct, "doctor", "--json").stdout)
    assert not any(n["built"] for n in doc["native"])

    gawk = shutil.which("gawk")
    if gawk is None:
        pytest.skip("gawk is not installed (Debian package gawk)")
    (proj / "in.txt").write_text("".join(f"w{i % 97} x{i % 13} y{i} z{i % 5}\n"
                                         for i in range(4000)))
    expected = run(gawk, AWK, "in.txt").stdout
    prof = run(hct, "profile", "-o", "gawk.hct", gawk, AWK, "in.txt")
    assert expected in prof.stdout
    assert (proj / "hctune.db").exists() and (proj / "gawk.hct").exists()
    run(hct, "search", "--objective", "mem", "--trials", "3", "--seed", "1", "--repeat", "1",
        "--allocators", "hc")
    run(hct, "emit", "-o", "out/malloc.c", "--so", "out/libhcmalloc.so")
    text = (proj / "out" / "malloc.c").read_text()
    assert "hctune 0.1" in text and str(ROOT) not in text
    so = proj / "out" / "libhcmalloc.so"
    tuned = run(gawk, AWK, "in.txt", extra_env={"LD_PRELOAD": str(so), "HCMALLOC_STATS": "1"})
    assert tuned.stdout == expected
    assert "footprint" in tuned.stderr.lower()      # it really ran on HC (its statistics)

    doc = json.loads(run(hct, "doctor", "--json").stdout)
    built = {n["name"]: n["path"] for n in doc["native"] if n["built"]}
    assert "libhctrace.so" in built and "hcreplay" in built
    assert all(p.startswith(str(tmp_path / "cache")) for p in built.values())

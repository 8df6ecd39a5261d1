"""scripts/setup-deps.sh, the one place the Debian packages are installed, with the package
query, apt-get and `id` faked by shims on PATH (nothing is installed or removed)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "setup-deps.sh"
LIST = ROOT / "configs" / "debian-packages.txt"

# dpkg-query -W -f='${Status}' PKG: installed unless named in $FAKE_MISSING and not yet in the
# file the fake apt-get appends to.
DPKG = """#!/bin/sh
pkg=$(eval echo \\${$#})
for m in $FAKE_MISSING; do
  if [ "$m" = "$pkg" ] && ! grep -qx "$pkg" "$FAKE_INSTALLED" 2>/dev/null; then exit 1; fi
done
printf 'install ok installed'
"""
APT = """#!/bin/sh
echo "apt-get $*" >> "$FAKE_LOG"
[ "$1" = install ] || exit 0
for a in "$@"; do case $a in -*|install) ;; *) echo "$a" >> "$FAKE_INSTALLED" ;; esac; done
"""


def _run(tmp_path: Path, missing: str, uid: int, *args: str):
    shims = tmp_path / "bin"
    shims.mkdir(exist_ok=True)
    for name, text in (("dpkg-query", DPKG), ("apt-get", APT), ("id", f"#!/bin/sh\necho {uid}\n")):
        (shims / name).write_text(text)
        (shims / name).chmod(0o755)
    env = dict(os.environ, PATH=f"{shims}:{os.environ['PATH']}", FAKE_MISSING=missing,
               FAKE_LOG=str(tmp_path / "apt.log"), FAKE_INSTALLED=str(tmp_path / "installed"))
    res = subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True,
                         timeout=60)
    log = (tmp_path / "apt.log").read_text() if (tmp_path / "apt.log").exists() else ""
    return res, log


def test_list_is_said_once():
    pkgs = [ln.split()[0] for ln in LIST.read_text().splitlines() if ln.strip()
            and not ln.startswith("#")]
    for p in ("build-essential", "valgrind", "libjemalloc2", "postgresql", "strace", "chromium",
              "chromium-driver", "libpython3.X-testsuite"):
        assert p in pkgs
    assert len(pkgs) == len(set(pkgs))
    # .ci/run and the Makefile go through the script, not a list of their own
    assert "setup-deps.sh" in (ROOT / ".ci" / "run").read_text()
    assert "libjemalloc2" not in (ROOT / ".ci" / "run").read_text()
    assert (ROOT / "Makefile").read_text().count("scripts/setup-deps.sh") >= 2


def test_all_present_does_nothing(tmp_path):
    res, log = _run(tmp_path, "", 0)
    assert res.returncode == 0, res.stderr
    assert log == ""
    assert res.stderr.startswith("setup-deps: nothing to install") and res.stderr.count("\n") == 1


def test_not_root_required_missing_prints_one_sudo_line(tmp_path):
    res, log = _run(tmp_path, "gawk libjemalloc2", 1000)
    assert res.returncode == 2
    assert res.stdout.strip() == "sudo apt-get install gawk libjemalloc2"
    assert log == ""              # never tries apt-get without root


def test_not_root_optional_missing_goes_on(tmp_path):
    res, log = _run(tmp_path, "libjemalloc2 chromium", 1000)
    assert res.returncode == 0
    assert res.stdout.strip() == "sudo apt-get install libjemalloc2 chromium"
    assert "optional" in res.stderr and log == ""


def test_python_testsuite_named_for_this_python(tmp_path):
    minor = subprocess.run(["python3", "-c", "import sys; print(sys.version_info[1])"],
                           capture_output=True, text=True).stdout.strip()
    res, _ = _run(tmp_path, f"gawk libpython3.{minor}-testsuite", 1000)
    assert res.stdout.strip() == f"sudo apt-get install gawk libpython3.{minor}-testsuite"


def test_root_installs_only_what_is_missing(tmp_path):
    res, log = _run(tmp_path, "valgrind gawk", 0)
    assert res.returncode == 0, res.stderr
    lines = log.splitlines()
    assert lines[0].startswith("apt-get update")
    assert lines[1].startswith("apt-get install") and lines[1].endswith(" gawk valgrind")


def test_check_only_never_installs(tmp_path):
    res, log = _run(tmp_path, "gawk", 0, "--check")
    assert res.returncode == 2 and log == ""

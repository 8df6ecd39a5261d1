#!/usr/bin/env bash
# Install the Debian packages of configs/debian-packages.txt that are missing.
#   as root:   apt-get update + apt-get install of the missing ones (nothing when all are there)
#   otherwise: print the one `sudo apt-get install ...` line; exit 2 if a required package is
#              missing (optional ones only make a part skip or degrade: exit 0 with a note)
#   --check:   only report, install nothing (exit 2 when a required package is missing)
# `make demo`, `make test` and .ci/run call it first.  The package query is `dpkg-query`, found
# on PATH (tests put a fake one there).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
list=${HCTUNE_DEPS_FILE:-$here/configs/debian-packages.txt}
check_only=0
[ "${1:-}" = "--check" ] && check_only=1

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup-deps: not a Debian/Ubuntu system (no dpkg-query); install the equivalents of:" >&2
  grep -v '^#' "$list" | awk 'NF { printf " %s", $1 } END { print "" }' >&2
  exit 0
fi

minor=$(python3 -c 'import sys; print(sys.version_info[1])' 2>/dev/null || echo "")
installed() { [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]; }

missing_req=() missing_opt=()
while read -r pkg need _; do
  case $pkg in ''|'#'*) continue ;; esac
  if [[ $pkg == *3.X-* ]]; then
    [ -n "$minor" ] || continue
    pkg=${pkg/3.X-/3.$minor-}
  fi
  installed "$pkg" && continue
  if [ "$need" = required ]; then missing_req+=("$pkg"); else missing_opt+=("$pkg"); fi
done < "$list"

missing=("${missing_req[@]}" "${missing_opt[@]}")
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup-deps: nothing to install: every Debian package in $(basename "$list") is there" >&2
  exit 0
fi

if [ "$(id -u)" = 0 ] && [ $check_only = 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  echo "setup-deps: installing ${missing[*]}" >&2
  apt-get update -qq
  # one by one after the batch fails: a package this release lacks (e.g. chromium-driver's name,
  # a python testsuite) must not stop the others
  if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
    for p in "${missing[@]}"; do
      apt-get install -y -qq --no-install-recommends "$p" >/dev/null \
        || echo "setup-deps: could not install $p" >&2
    done
  fi
  for p in "${missing_req[@]}"; do
    installed "$p" || { echo "setup-deps: required package $p is still missing" >&2; exit 2; }
  done
  exit 0
fi

if [ ${#missing_req[@]} -gt 0 ]; then
  echo "setup-deps: missing required Debian packages; run:" >&2
  echo "sudo apt-get install ${missing[*]}"
  exit 2
fi
echo "setup-deps: optional packages missing (the parts that use them skip or say so); to add them:" >&2
echo "sudo apt-get install ${missing_opt[*]}"
exit 0

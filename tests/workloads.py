"""Real programs' workloads the tests (and bench/replay_overhead.py) run, said once: the gawk,
sqlite3 and python3 runs the replay tests trace, and the gawk and sqlite3 inputs the allocator
tests feed real programs. Plain functions and constants; the fixtures built on them are in
conftest.py."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

AWK = """{ w[$1 % 3000] = w[$1 % 3000] " " $1; c[$1 % 777]++ }
END { n = 0; for (k in w) n += length(w[k]); for (k in c) s = s k ":" c[k] ","; print n, length(s) }
"""
SQL = """CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 15000)
INSERT INTO t SELECT i, printf('row-%d-%s', i, hex(zeroblob(i % 40))), i * 0.5 FROM n;
CREATE INDEX tb ON t(b);
SELECT count(*), sum(length(b)) FROM t WHERE b LIKE 'row-1%';
SELECT c, group_concat(b) FROM t GROUP BY a % 100 ORDER BY 1 LIMIT 3;
"""
PY = """import json
d = {str(i): [i] * (i % 17) for i in range(12000)}
s = json.dumps(d)
print(len(s), len(json.loads(s)))
"""


def python3() -> str:
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else shutil.which("python3")


def programs(work: Path) -> dict[str, tuple[list[str], dict]]:
    """name -> (argv, extra environment): deterministic programs, so a traced run and an
    untraced run make the same calls.  python3 sends every object through malloc
    (PYTHONMALLOC=malloc) and fixes its hash seed."""
    (work / "nums.txt").write_text("".join(f"{i}\n" for i in range(1, 40001)))
    (work / "t.awk").write_text(AWK)
    (work / "t.sql").write_text(SQL)
    (work / "t.py").write_text(PY)
    progs = {}
    if shutil.which("gawk"):
        progs["gawk"] = ([shutil.which("gawk"), "-f", str(work / "t.awk"), str(work / "nums.txt")],
                         {})
    if shutil.which("sqlite3"):
        progs["sqlite3"] = ([shutil.which("sqlite3"), ":memory:", f".read {work / 't.sql'}"], {})
    if python3():
        progs["python3"] = ([python3(), str(work / "t.py")],
                            {"PYTHONMALLOC": "malloc", "PYTHONHASHSEED": "0"})
    return progs


def run_program(argv, extra, preload=None, **env_extra) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(extra)
    env.update(env_extra)
    if preload:
        env["LD_PRELOAD"] = str(preload)
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return res


def sqlite_script() -> str:
    return """
CREATE TABLE item(id INTEGER PRIMARY KEY, name TEXT, grp INTEGER, payload BLOB);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 30000)
INSERT INTO item SELECT i, 'name-' || (i * 7919 % 30011), i % 97, zeroblob(i % 1500) FROM n;
CREATE INDEX item_name ON item(name);
SELECT grp, count(*), sum(length(payload)), min(name), max(name) FROM item GROUP BY grp
  ORDER BY grp LIMIT 20;
SELECT group_concat(name, ',') FROM (SELECT name FROM item WHERE grp = 13 ORDER BY name LIMIT 300);
DELETE FROM item WHERE id % 3 = 0;
UPDATE item SET payload = zeroblob(length(payload) * 2 % 4000) WHERE grp < 40;
VACUUM;
SELECT count(*), sum(length(payload)), total(id) FROM item;
SELECT substr(replace(group_concat(upper(name)), 'NAME', 'n'), 1, 2000) FROM item WHERE grp = 5;
"""


def words_file(path: Path, lines: int) -> Path:
    rng = random.Random(20060101)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(1, 14)))
             for _ in range(5000)]
    with open(path, "w") as f:
        for _ in range(lines):
            f.write(" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 20))) + "\n")
    return path


GAWK_PROGRAM = r"""
{ for (i = 1; i <= NF; i++) { count[$i]++; line[NR % 500] = line[NR % 500] " " $i } }
END {
  n = asorti(count, keys)
  for (i = 1; i <= n; i += 97) printf "%s %d\n", keys[i], count[keys[i]]
  for (k in line) total += length(line[k])
  print n, total
}
"""

"""The Python package's layers (docs/ARCHITECTURE.md's picture): every import, at the top of a
module or inside a function, goes down the picture, and the modules of one folder import each
other without a cycle. Static (the source's import statements, read with ast): a deferred
import that would close a cycle fails here, not at run time in one rarely taken path."""

from __future__ import annotations

import ast
import functools
import re

from pathlib import Path

from hctune import paths

PKG = paths.ROOT / "tuner" / "hctune"
DOC = paths.ROOT / "docs" / "ARCHITECTURE.md"


@functools.lru_cache(maxsize=None)
def _modules() -> dict[str, object]:
    out = {}
    for p in sorted(PKG.rglob("*.py")):
        parts = ("hctune", *p.relative_to(PKG).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def _rows() -> list[list[str]]:
    """The picture's rows, top first: each a list of entries (`emit`, `search/`, `hctune`)."""
    text = DOC.read_text()
    m = re.search(r"<!-- layers:.*?-->\s*```\n(.*?)```\s*<!-- /layers -->", text, re.S)
    assert m, "docs/ARCHITECTURE.md has lost its layer picture (<!-- layers: ... --> block)"
    rows = []
    for line in m.group(1).splitlines():
        names = re.split(r"\s{3,}", line.strip())
        entries = []
        for word in names:
            if re.fullmatch(r"[a-z_]+/?", word):
                entries.append(word)
            else:
                break          # the description
        if entries and not line.strip().startswith("▲"):
            rows.append(entries)
    return rows


def _imports(path, modules) -> set[str]:
    """The hctune modules `path` imports anywhere in it (skipping `if TYPE_CHECKING:`)."""
    return set(_imports_of(str(path), tuple(modules)))


@functools.lru_cache(maxsize=None)
def _imports_of(path: str, modules: tuple[str, ...]) -> frozenset[str]:
    tree = ast.parse(Path(path).read_text())
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    out = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from hctune.x import y`: the submodule hctune.x.y when there is one, else hctune.x
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules
                     else node.module for a in node.names]
        else:
            continue
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name:
                out.add(name)
    return frozenset(out)


def _entry(module: str, rows) -> tuple[int, str] | None:
    """(row index, entry) that holds `module`: the deepest folder entry, else its own name."""
    rel = module.split(".")[1:] or ["hctune"]
    for i, row in enumerate(rows):
        for e in row:
            if e.endswith("/") and rel[0] == e[:-1]:
                return i, e
            if not e.endswith("/") and rel == [e]:
                return i, e
    return None


def test_the_picture_places_every_module_once():
    rows = _rows()
    entries = [e for row in rows for e in row]
    assert len(entries) == len(set(entries)), f"an entry is twice in the picture: {entries}"
    missing = [m for m in _modules() if _entry(m, rows) is None]
    assert not missing, (f"{', '.join(missing)}: in no row of docs/ARCHITECTURE.md's layer "
                         "picture; add it to the row below everything it imports")
    used = {_entry(m, rows)[1] for m in _modules()}
    assert set(entries) <= used, f"the picture names modules that do not exist: {set(entries) - used}"


def test_every_import_goes_down_the_picture():
    rows, modules = _rows(), _modules()
    bad = []
    for mod, path in modules.items():
        if _entry(mod, rows) is None:
            continue                        # test_the_picture_places_every_module_once says so
        (i, e) = _entry(mod, rows)
        for dep in _imports(path, modules):
            if _entry(dep, rows) is None:
                continue
            (j, f) = _entry(dep, rows)
            if f == e and e.endswith("/"):
                continue                    # inside one folder: the cycle test below
            if mod.startswith(dep + ".") and dep != "hctune":
                continue                    # a folder's __init__, run before its module
            if dep == "hctune" and mod != "hctune":
                continue                    # the top package: always imported first
            if j <= i:
                bad.append(f"{mod} ({e}, row {i + 1}) imports {dep} ({f}, row {j + 1})")
    assert not bad, ("imports up or across docs/ARCHITECTURE.md's layers (move the shared part "
                     "down, or the module up):\n  " + "\n  ".join(sorted(bad)))


def test_no_cycle_inside_a_folder():
    modules = _modules()
    graph = {m: {d for d in _imports(p, modules) if d != m and not m.startswith(d + ".")}
             for m, p in modules.items()}
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                cycles.append(stack[stack.index(d):] + [d])
            elif d not in state:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n  " + "\n  ".join(" -> ".join(c) for c in cycles)


def test_the_checks_see_a_cycle_hidden_in_a_function(tmp_path):
    """The reader finds an import inside a function, which a plain `import` at test time
    would never run."""
    src = tmp_path / "m.py"
    src.write_text("def f():\n    from hctune.validate import validate\n    return validate\n")
    assert _imports(src, _modules()) == {"hctune.validate"}


def test_every_import_inside_a_function_says_why():
    """Imports inside functions only defer a heavy library (Optuna, FastAPI, matplotlib,
    SQLAlchemy, Jinja2, numpy, rich) or what only one command needs, and say so on their line
    (`# deferred: ...`); anything else belongs at the top of the module, where the layer test
    above sees it like every other import."""
    bare = []
    for mod, path in _modules().items():
        lines = path.read_text().splitlines()
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)) and \
                            "#" not in lines[node.lineno - 1]:
                        bare.append(f"{path.relative_to(paths.ROOT)}:{node.lineno}: "
                                    f"{lines[node.lineno - 1].strip()}")
    assert not bare, ("imports inside functions without a reason (move them to the top, or "
                      "say what heavy library they defer):\n  " + "\n  ".join(sorted(bare)))

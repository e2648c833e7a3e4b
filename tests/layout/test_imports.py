"""The package layout shows the flow: no import cycles, no lower layer importing a higher one.

Every import counts, also those inside functions (a lazy import only hides a cycle); imports under
`if TYPE_CHECKING:` do not (they never run). Layers, lowest first, are in LAYERS; docs/architecture.md
draws the same picture.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("tuner", "serve_apps")
# Leaf modules (stdlib and tuner.common only) that any layer may use.
LEAVES = {"tuner.common": 0, "tuner.trial.outcome": 0, "tuner.engines.registry": 0}
LAYERS = {
    "tuner.spec": 1,
    "tuner.load": 2,
    "tuner.sim": 3,
    "tuner.engines": 4,
    "tuner.trial": 5,
    "tuner.tracking": 6, "serve_apps": 6,
    "tuner.search": 7, "tuner.promote": 7,
    "tuner.bench": 8, "tuner.run": 8,
    "tuner.cli": 9, "tuner.__main__": 9,
}


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _type_checking_only(tree: ast.AST) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for n in ast.walk(node))
    return skip


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        tree = ast.parse(path.read_text())
        skip = _type_checking_only(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            graph[name].update(t for t in targets if t in mods and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def layer(module: str) -> int:
    for table in (LEAVES, LAYERS):
        best = max((p for p in table if module == p or module.startswith(p + ".")), key=len, default=None)
        if best is not None:
            return table[best]
    raise AssertionError(f"{module} is in no layer: add its package to LAYERS in {__file__}")


def test_no_import_cycles() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_lower_layer_imports_a_higher_one() -> None:
    bad = [f"{m} (layer {layer(m)}) imports {t} (layer {layer(t)})"
           for m, targets in sorted(import_graph().items()) for t in sorted(targets)
           if m != "tuner" and t != "tuner" and layer(t) > layer(m)]
    assert bad == []


def test_tuner_root_holds_only_packages() -> None:
    loose = sorted(p.name for p in (ROOT / "tuner").glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert loose == []

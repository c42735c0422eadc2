"""Imports inside autoplan/ point only downward, and no two modules import each other (directly or round a circle).

Layers, top to bottom (DESIGN.md; a module may import its own layer and the layers below)::

    6  autoplan (the package's Python API), autoplan.cli
    5  autoplan.validate, autoplan.demo, autoplan.export, autoplan.draw
    4  autoplan.execute
    3  autoplan.plan
    2  autoplan.profile
    1  autoplan.models
    0  autoplan.errors, autoplan.jsonio, autoplan.processes

Every ``import`` / ``from ... import`` counts: at module level, inside functions, and under
``if TYPE_CHECKING:``. The modules are read with ``ast``, not imported.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "autoplan"

LAYERS: dict[str, int] = {
    "autoplan.errors": 0, "autoplan.jsonio": 0, "autoplan.processes": 0,
    "autoplan.models": 1,
    "autoplan.profile": 2,
    "autoplan.plan": 3,
    "autoplan.execute": 4,
    "autoplan.validate": 5, "autoplan.demo": 5, "autoplan.export": 5, "autoplan.draw": 5,
    "autoplan.cli": 6, "autoplan": 6,
}

EXCEPTIONS: dict[tuple[str, str], str] = {}
"""(importing module, imported module) -> why this upward import is justified. None so far."""


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


MODULES = _modules()


def layer_of(module: str) -> int:
    """The layer of the longest prefix of ``module`` listed in LAYERS."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in LAYERS:
            return LAYERS[prefix]
    raise KeyError(module)


def imports_of(module: str, path: Path) -> set[str]:
    """The autoplan modules ``module`` imports anywhere in its source (``from autoplan.x import y``
    counts as ``autoplan.x.y`` when that is a module, else ``autoplan.x``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base_name = ".".join(base + ([node.module] if node.module else []))
            else:
                base_name = node.module or ""
            targets = [f"{base_name}.{a.name}" if f"{base_name}.{a.name}" in MODULES else base_name
                       for a in node.names]
        else:
            continue
        found.update(t for t in targets if t == "autoplan" or t.startswith("autoplan."))
    return found


GRAPH = {m: imports_of(m, p) for m, p in MODULES.items()}


def test_every_module_has_a_layer():
    missing = [m for m in MODULES if not any(m == k or m.startswith(k + ".") for k in LAYERS)]
    assert not missing, f"put these modules in a layer of LAYERS: {missing}"


def test_imports_point_downward():
    upward = []
    for module, targets in GRAPH.items():
        for target in sorted(targets):
            if layer_of(target) > layer_of(module) and (module, target) not in EXCEPTIONS:
                upward.append(f"{module} (layer {layer_of(module)}) imports {target} (layer {layer_of(target)})")
    assert not upward, "imports that point upward:\n" + "\n".join(upward)


def test_no_import_cycles():
    """No circle of modules importing each other (``autoplan`` itself, the API facade, left out: every
    submodule's package is imported first by Python anyway, and the facade imports lazily)."""
    graph = {m: {t for t in ts if t in MODULES and t != "autoplan" and t != m}
             for m, ts in GRAPH.items() if m != "autoplan"}
    cycles = []
    state: dict[str, int] = {}     # 1: on the current path, 2: done
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycles.append(" -> ".join(path[path.index(t):] + [t]))
            elif t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_checker_sees_an_upward_import(tmp_path):
    """The checks can fail: an import inside a function of a models/ module is seen."""
    src = tmp_path / "x.py"
    src.write_text("def f():\n    from autoplan.profile.formats import ModelProfile\n    from . import shapes\n")
    got = imports_of("autoplan.models.x", src)
    assert got == {"autoplan.profile.formats", "autoplan.models.shapes"}
    assert layer_of("autoplan.profile.formats") > layer_of("autoplan.models.x")

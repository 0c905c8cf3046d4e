"""The package's layers, checked from its source, and the CDC core's imports, checked by importing it.

Layers import only downward (docs/development.md: operators/spark/triggers -> engine -> lake -> cdc), and no two
modules import each other through any chain. Every import counts, at the top of a module, inside a
function or under ``TYPE_CHECKING``: an import moved into a function to dodge a cycle is still a
dependency, and the next reader of the module has to know it. The source is read with ``ast``, so the
check needs neither the package's dependencies nor anything outside the repository.

The CDC core must import neither Airflow nor Spark: Spark executors and lean workers import it.
"""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import airflow_provider_mysqlcdc.cdc as cdc

PACKAGE = "airflow_provider_mysqlcdc"
SOURCE = Path(__file__).resolve().parents[2] / PACKAGE

ALLOWED: dict[str, frozenset[str]] = {
    layer: frozenset({layer, *below}) for layer, below in {
        # "": the package's __init__ (its version); a top-level module is a layer of its own
        "": (),
        "exceptions": (),
        "cdc": ("exceptions",),
        "lake": ("cdc", "exceptions"),
        "engine": ("lake", "cdc", "exceptions"),
        "hooks": ("cdc", "exceptions"),
        "spark": ("engine", "lake", "cdc", "exceptions"),
        "triggers": ("engine", "hooks", "lake", "cdc", "exceptions"),
        # assets builds the asset watcher's trigger (replica_asset), so it sits above triggers
        "assets": ("triggers", "lake", "cdc", "exceptions"),
        "operators": ("assets", "triggers", "spark", "engine", "hooks", "lake", "cdc", "exceptions"),
        # the UI plugin's page reads the lake (and the engine's verification reports) beside the operators
        "ui": ("engine", "hooks", "lake", "cdc", "exceptions"),
        "get_provider_info": ("", "assets", "cdc", "exceptions"),
    }.items()
}
"""The layers of the package each layer may import (itself included)."""

FORBIDDEN: dict[str, frozenset[str]] = {
    "cdc": frozenset({"airflow", "pyspark"}),
    "lake": frozenset({"airflow"}),
    "engine": frozenset({"airflow", "pyspark"}),
}
"""Third-party packages a layer must not import: the core runs on Spark executors without Airflow, and the
engine is the loops without Airflow; only the lake's Spark views use Spark."""


@dataclass(frozen=True)
class Imports:
    """What each module of a package imports: its modules, and the top-level names of everything else."""

    package: str
    internal: Mapping[str, frozenset[str]]
    external: Mapping[str, frozenset[str]]


def module_name(path: Path, root: Path, package: str) -> str:
    parts = [package, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer_of(module: str, package: str) -> str:
    """The module's layer: the name under the package (``cdc``, ``operators``, ``assets``), "" for its __init__;
    a sub-package's modules are their layer's (``lake.read.replica`` is ``lake``)."""
    parts = module.split(".")
    return parts[1] if parts[0] == package and len(parts) > 1 else ""


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules: set[str]) -> Iterator[str]:
    """The modules (or, outside the package, the dotted names) an import statement loads: ``from a.b import c``
    loads the module ``a.b.c`` if there is one, else takes ``c`` from ``a.b``."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = node.module or ""
    if node.level:  # relative: from the module's package, one level up per dot after the first
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - node.level + 1]
        base = ".".join([*anchor, base] if base else anchor)
    for alias in node.names:
        yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base


def read_imports(root: Path, package: str) -> Imports:
    """Every import statement of every module under ``root`` (the package ``package``), wherever it is."""
    paths = {module_name(p, root, package): p for p in sorted(root.rglob("*.py"))}
    modules = set(paths)
    internal: dict[str, frozenset[str]] = {}
    external: dict[str, frozenset[str]] = {}
    for module, path in paths.items():
        names = {name for node in ast.walk(ast.parse(path.read_text(), str(path)))
                 if isinstance(node, (ast.Import, ast.ImportFrom))
                 for name in _imported(node, module, path.name == "__init__.py", modules)}
        internal[module] = frozenset(n for n in names if n in modules and n != module)
        external[module] = frozenset(n.split(".")[0] for n in names if n.split(".")[0] != package)
    return Imports(package, internal, external)


def violations(imports: Imports, allowed: Mapping[str, frozenset[str]],
               forbidden: Mapping[str, frozenset[str]]) -> list[str]:
    """``module -> imported`` for every import against the layering, and a module of a layer with no rule."""
    found = []
    for module, targets in sorted(imports.internal.items()):
        layer = layer_of(module, imports.package)
        if layer not in allowed:
            found.append(f"{module}: layer {layer!r} has no rule in ALLOWED")
            continue
        found += [f"{module} -> {t}" for t in sorted(targets) if layer_of(t, imports.package) not in allowed[layer]]
        found += [f"{module} -> {name}" for name in sorted(imports.external[module] & forbidden.get(layer, set()))]
    return found


def cycles(graph: Mapping[str, frozenset[str]]) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component: list[str] = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_every_layer_imports_only_the_layers_below_it_and_no_module_takes_part_in_a_cycle() -> None:
    imports = read_imports(SOURCE, PACKAGE)
    assert len(imports.internal) > 50, f"found only {len(imports.internal)} modules under {SOURCE}"
    assert violations(imports, ALLOWED, FORBIDDEN) == []
    assert cycles(imports.internal) == []


TABLE_FORMATS = {"deltalake": frozenset({f"{PACKAGE}.lake.format.delta_table"})}
"""Each table format's library and the modules that implement ``lake.format.table_format`` with it: the one place
a format is reached (README and docs/development.md, "A new table format"); every other module goes
through the protocols."""


def test_a_table_formats_library_is_imported_by_its_implementation_alone() -> None:
    imports = read_imports(SOURCE, PACKAGE)
    for library, implementation in TABLE_FORMATS.items():
        importers = {module for module, names in imports.external.items() if library in names}
        assert importers == implementation, f"{library} imported outside {sorted(implementation)}"


def test_the_check_finds_what_is_against_the_layering(tmp_path: Path) -> None:
    """On a small package: imports hidden in functions and under TYPE_CHECKING, relative ones, a sub-package's
    module in its layer, a forbidden third-party import and a layer without a rule are all found."""
    files = {
        "__init__.py": "",
        "cdc/__init__.py": "",
        "cdc/core.py": "def f():\n    from fake.lake.store import STORE\n    return STORE\n",
        "lake/__init__.py": "",
        "lake/store.py": "from ..cdc import core\nSTORE = core\n",
        "lake/read/__init__.py": "",
        "lake/read/view.py": "from ..store import STORE\nfrom fake.engine import loop\n",
        "engine/__init__.py": "",
        "engine/loop.py": ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fake.engine import run\n"
                           "def g():\n    import airflow.sdk\n"),
        "engine/run.py": "from . import loop\n",
        "extra.py": "",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)

    imports = read_imports(tmp_path, "fake")

    assert imports.internal["fake.lake.store"] == {"fake.cdc.core"}
    assert imports.internal["fake.lake.read.view"] == {"fake.lake.store", "fake.engine.loop"}
    assert violations(imports, ALLOWED, FORBIDDEN) == [
        "fake.cdc.core -> fake.lake.store", "fake.engine.loop -> airflow",
        "fake.extra: layer 'extra' has no rule in ALLOWED", "fake.lake.read.view -> fake.engine.loop",
    ]
    assert cycles(imports.internal) == [["fake.cdc.core", "fake.lake.store"], ["fake.engine.loop", "fake.engine.run"]]


def test_cdc_core_imports_neither_airflow_nor_pyspark() -> None:
    modules = [f"airflow_provider_mysqlcdc.cdc.{m.name}" for m in pkgutil.iter_modules(cdc.__path__)]
    assert modules, "the cdc package has no modules"
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}: importlib.import_module(m)\n"
        "bad = sorted(n for n in sys.modules if n.split('.')[0] in ('airflow', 'pyspark'))\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"cdc/ pulled in: {out.stdout.strip()}"

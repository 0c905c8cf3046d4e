"""The tests as a toolbox: no test module imports another test module
(nor a ``conftest.py``). What tests share lives in helper
modules (``tests/*.py``, ``tests/<kind>/*.py``, never named ``test_*``) and fixtures in a ``conftest.py``;
importing a test module runs its module-level code and, with its fixtures imported too, hides where
they come from. Read from the source (``ast``), imports inside functions included."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def python_files() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "fixtures" not in p.relative_to(TESTS).parts)


def imported_names(path: Path) -> Iterator[tuple[int, str]]:
    return imports_in(path.read_text(), path.relative_to(ROOT).with_suffix("").parts[:-1], str(path))


def imports_in(source: str, package: tuple[str, ...], filename: str = "<source>") -> Iterator[tuple[int, str]]:
    """Every dotted name an import statement of a module of ``package`` reaches: the module, and for
    ``from m import n`` also ``m.n`` (which is a module when ``n`` is one); relative imports made absolute."""
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[:len(package) - node.level + 1], *([node.module] if node.module else [])])
            yield node.lineno, base
            for alias in node.names:
                yield node.lineno, f"{base}.{alias.name}"


def is_test_module(name: str) -> bool:
    """A test module, or a ``conftest.py`` (pytest loads it; importing it too runs it twice, as another module)."""
    parts = name.split(".")
    return parts[0] == "tests" and any(part.startswith("test_") or part == "conftest" for part in parts[1:])


def test_no_test_module_imports_another_test_module() -> None:
    offences = sorted({f"{path.relative_to(ROOT)}:{line} imports {name}"
                       for path in python_files() for line, name in imported_names(path) if is_test_module(name)})
    assert not offences, "move what they share to a helper module or a conftest.py:\n" + "\n".join(offences)


@pytest.mark.parametrize("source", [
    "from tests.unit.test_lake import Lakes",
    "from tests.unit import test_lake",
    "import tests.unit.test_lake",
    "from .test_lake import Lakes",
    "def f():\n    from ..unit.test_lake import Lakes",
    "from tests.unit.conftest import lake",
])
def test_the_check_sees_every_form_of_import(source: str) -> None:
    names = [name for _, name in imports_in(source, ("tests", "unit"))]
    assert any(is_test_module(name) and name.startswith(("tests.unit.test_lake", "tests.unit.conftest"))
               for name in names), names


def test_a_helper_module_is_not_a_test_module() -> None:
    assert not any(is_test_module(name) for _, name in imports_in("from tests.lakes import Lakes", ("tests", "unit")))


def test_every_test_module_holds_tests_and_no_helper_is_named_like_one() -> None:
    empty = []
    for path in python_files():
        if path.name.startswith("test_"):
            tree = ast.parse(path.read_text(), str(path))
            if not any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                       and n.name.lower().startswith("test") for n in tree.body):
                empty.append(str(path.relative_to(ROOT)))
    assert not empty, f"test modules without a test (a helper module is named for what it holds): {empty}"

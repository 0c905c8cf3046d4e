"""The documentation site builds with warnings as errors, and keeps the promises README and the
troubleshooting page make: README is a front page that links to the site, and every exception the
package raises on purpose is explained on the troubleshooting page."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

from airflow_provider_mysqlcdc import exceptions

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def test_the_docs_build_without_warnings(tmp_path: Path) -> None:
    # autodoc imports the operators, hence Airflow: give it a home of its own
    env = {**os.environ, "AIRFLOW_HOME": str(tmp_path / "airflow")}
    out = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS), str(tmp_path / "html")],
        cwd=ROOT, capture_output=True, text=True, env=env,
    )
    assert out.returncode == 0, out.stderr[-5000:]
    page = (tmp_path / "html" / "reference" / "operators.html").read_text()
    # the reference is generated from the docstrings: an operator's templated argument is on it
    assert "MySqlBinlogStreamOperator" in page and "(templated)" in page


def test_every_exception_is_on_the_troubleshooting_page() -> None:
    page = (DOCS / "troubleshooting.md").read_text()
    ours = [name for name, kind in inspect.getmembers(exceptions, inspect.isclass)
            if issubclass(kind, exceptions.MySqlCdcError)]
    assert len(ours) > 10
    missing = [name for name in ours if f"`{name}`" not in page]
    assert not missing, f"troubleshooting.md does not explain {missing}"


def test_every_page_is_in_the_table_of_contents() -> None:
    index = (DOCS / "index.md").read_text()
    pages = sorted(str(p.relative_to(DOCS).with_suffix("")) for p in DOCS.rglob("*.md") if p.name != "index.md"
                   and "_build" not in p.parts)
    assert [p for p in pages if not re.search(rf"^{re.escape(p)}$", index, re.M)] == []


def test_readme_is_the_front_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 250
    assert readme.startswith("# airflow-provider-mysqlcdc")
    assert "./dev/quickstart.sh" in readme.split("\n\n")[1] and "./dev/test.sh" in readme.split("\n\n")[1]
    linked = set(re.findall(r"\(docs/([\w/-]+)\.md", readme))
    assert {"quickstart", "concepts", "troubleshooting"} <= linked
    assert all((DOCS / f"{page}.md").exists() for page in linked)

"""Sphinx configuration of the documentation site (built by ``tests/checks/test_docs.py`` with warnings as
errors, and by hand with ``sphinx-build -W docs docs/_build``).

Sphinx rather than MkDocs: Airflow and its providers document with Sphinx, and autodoc renders the
operators' and hooks' reST docstrings (``:param x: ... (templated)``) as they are written, so the reference
pages are generated from the code and cannot drift from it. Pages are Markdown, read by MyST.
"""

from __future__ import annotations

import os
import sys
from importlib.metadata import version as _version

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

project = "airflow-provider-mysqlcdc"
author = "airflow-provider-mysqlcdc developers"
release = _version("airflow-provider-mysqlcdc")
version = release

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.viewcode"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"show-inheritance": True}
# Airflow's and the Spark provider's own classes are not documented here: a base class or type from them
# is shown by name, and a missing cross-reference to it is not an error.
nitpicky = False

html_theme = "furo"
html_title = "MySQL CDC for Airflow"

"""Every operator argument is documented (``:param:``) with its default, "(templated)" exactly for the
template fields; the argument names are the same everywhere; ``deferrable`` follows Airflow's config.
Docstrings and signatures only: no server, no I/O."""

from __future__ import annotations

import ast
import inspect
import os
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import pytest
from airflow.sdk import BaseOperator, conf

from airflow_provider_mysqlcdc.operators.pipeline import mysql_cdc_pipeline
from airflow_provider_mysqlcdc.operators.resnapshot import MySqlResnapshotOperator
from airflow_provider_mysqlcdc.operators.snapshot import MySqlSnapshotSparkOperator
from airflow_provider_mysqlcdc.operators.split import MySqlChunkSplitOperator
from airflow_provider_mysqlcdc.operators.stream import MySqlBinlogStreamOperator
from airflow_provider_mysqlcdc.operators.verify import (
    MySqlVerifyOperator,
    MySqlVerifyPlanOperator,
    MySqlVerifySummaryOperator,
)
from dev.dag_file import load_dag

OPERATORS = [MySqlChunkSplitOperator, MySqlSnapshotSparkOperator, MySqlBinlogStreamOperator, MySqlResnapshotOperator,
             MySqlVerifyPlanOperator, MySqlVerifyOperator]
DOCUMENTED = [*OPERATORS, MySqlVerifySummaryOperator]  # the summary reads the lake only: no connection
PARAM = re.compile(r":param (\w+):")


def documented(obj: Any) -> dict[str, str]:
    """The ``:param name: text`` entries of a docstring, each text with its continuation lines joined."""
    params: dict[str, str] = {}
    name = None
    for line in inspect.cleandoc(obj.__doc__ or "").splitlines():
        match = PARAM.match(line)
        if match:
            name = match.group(1)
            assert name not in params, f"{obj.__name__}: :param {name}: twice"
            params[name] = line[match.end():].strip()
        elif name is not None and line.startswith(" ") and line.strip():
            params[name] += " " + line.strip()
        else:
            name = None
    return params


def own_parameters(func: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    return {name: p for name, p in inspect.signature(func).parameters.items()
            if name != "self" and p.kind is not inspect.Parameter.VAR_KEYWORD}


def inherited(cls: type) -> tuple[set[str], set[str]]:
    """The ``__init__`` parameters and template fields of the operator classes ``cls`` derives from
    (other than Airflow's ``BaseOperator``)."""
    bases = [b for b in cls.__mro__[1:] if issubclass(b, BaseOperator) and b is not BaseOperator
             and "__init__" in vars(b)]
    return ({n for b in bases for n in own_parameters(b.__init__)},
            {f for b in bases for f in b.template_fields})


def check_default(where: str, parameter: inspect.Parameter, text: str) -> None:
    """A required argument says so; any other one says ``Default:``, and a literal given as
    ``Default: ``x`` `` is the signature's default."""
    if parameter.default is inspect.Parameter.empty:
        assert "required" in text.lower(), f"{where}: required, and its :param: must say so"
        return
    assert "Default:" in text, f"{where}: its :param: must give its default ('Default: ...')"
    literal = re.search(r"Default: ``(.+?)``", text)
    if literal is None:
        return  # a default described in words, e.g. a configuration setting
    shown, actual = literal.group(1), parameter.default
    if shown == str(actual):
        return
    try:
        value = ast.literal_eval(shown)
    except (ValueError, SyntaxError):
        value = object()
    assert value == actual, f"{where}: documented default {shown!r}, but the signature's is {actual!r}"


@pytest.mark.parametrize("operator", DOCUMENTED, ids=lambda cls: cls.__name__)
def test_every_argument_is_documented_with_its_default_and_templating(operator: type[BaseOperator]) -> None:
    params = documented(operator)
    own = own_parameters(operator.__init__)
    base_params, base_fields = inherited(operator)
    fields = set(operator.template_fields)

    missing = sorted(set(own) - set(params))
    assert not missing, f"{operator.__name__}: no :param: for {missing}"
    stale = sorted(set(params) - set(own) - base_params)
    assert not stale, f"{operator.__name__}: :param: for {stale}, which are not arguments"
    for name, parameter in own.items():
        check_default(f"{operator.__name__}({name})", parameter, params[name])

    marked = {name for name, text in params.items() if "(templated)" in text}
    assert marked == fields & set(params), (
        f"{operator.__name__}: '(templated)' on {sorted(marked - fields)} which are not template fields, "
        f"missing on {sorted((fields & set(params)) - marked)}"
    )
    undocumented = sorted(fields - set(params) - base_fields)
    assert not undocumented, f"{operator.__name__}: template fields without a :param: {undocumented}"
    # constructor arguments named as their template fields, stored unchanged (docs/design/airflow.md)
    assert fields - base_fields <= set(own)


def test_the_pipeline_helper_documents_every_argument() -> None:
    params = documented(mysql_cdc_pipeline)
    own = own_parameters(mysql_cdc_pipeline)
    assert set(params) == set(own)
    for name, parameter in own.items():
        check_default(f"mysql_cdc_pipeline({name})", parameter, params[name])


def test_the_same_names_everywhere() -> None:
    """``<type>_conn_id`` like the official providers, the same in the operators, the helper and the
    example DAG's params; no ``conn_id`` or ``mysql_conn_id`` left."""
    helper = set(own_parameters(mysql_cdc_pipeline))
    for operator in OPERATORS:
        names = set(own_parameters(operator.__init__))
        assert "mysql_cdc_conn_id" in names and not names & {"conn_id", "mysql_conn_id"}
        assert inspect.signature(operator.__init__).parameters["mysql_cdc_conn_id"].default == "mysql_cdc_default"
    assert "spark_conn_id" in own_parameters(MySqlSnapshotSparkOperator.__init__)
    assert {"mysql_cdc_conn_id", "spark_conn_id"} <= helper
    example = load_dag("mysql_cdc_example")
    assert {"mysql_cdc_conn_id", "spark_conn_id"} <= set(example.params.keys())
    assert not set(example.params.keys()) & {"mysql_conn_id", "conn_id"}


def test_the_snapshot_takes_spark_conn_id_templated_and_refuses_conn_id() -> None:
    operator = MySqlSnapshotSparkOperator(task_id="s", batch={}, base_uri="/lake", spark_conn_id="spark_yarn")
    assert operator.spark_conn_id == operator._conn_id == "spark_yarn"
    assert "spark_conn_id" in operator.template_fields and "conn_id" not in operator.template_fields
    with pytest.raises(TypeError, match="spark_conn_id"):
        MySqlSnapshotSparkOperator(task_id="t", batch={}, base_uri="/lake", conn_id="spark_yarn")


def test_deferrable_defaults_to_the_airflow_setting() -> None:
    setting = conf.getboolean("operators", "default_deferrable", fallback=False)
    assert MySqlBinlogStreamOperator(task_id="s", base_uri="/lake", tables=["a.b"]).deferrable is setting
    assert MySqlBinlogStreamOperator(task_id="s", base_uri="/lake", tables=["a.b"], deferrable=not setting) \
        .deferrable is not setting
    # the example DAGs defer whatever the deployment says
    assert load_dag("mysql_cdc_example").task_dict["stream"].deferrable is True
    many = load_dag("mysql_cdc_many_tables")
    assert all(many.task_dict[f"{group}.stream"].deferrable is True for group in ("shop", "billing"))


def test_deferrable_follows_the_setting_when_it_is_on() -> None:
    """A fresh interpreter with ``[operators] default_deferrable = True`` (the default is read when the
    module is imported, as in the official providers)."""
    code = ("from airflow_provider_mysqlcdc.operators.stream import MySqlBinlogStreamOperator as O\n"
            "print(O(task_id='s', base_uri='/lake', tables=['a.b']).deferrable,"
            " O(task_id='t', base_uri='/lake', tables=['a.b'], deferrable=False).deferrable)")
    env = {**os.environ, "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         timeout=120)
    assert out.stdout.split() == ["True", "False"]

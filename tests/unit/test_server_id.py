"""Server-id ranges: parsing, validation, distinct ids per reader, and the clash message."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.cdc.server_id import ServerIdRange, explain_server_id_clash
from airflow_provider_mysqlcdc.exceptions import InvalidOptionError


def test_parse_and_allocate() -> None:
    ids = ServerIdRange.parse("5400-5408")
    assert (ids.start, ids.end, len(ids), str(ids)) == (5400, 5408, 9, "5400-5408")
    assert [ids.allocate(i) for i in range(9)] == list(range(5400, 5409))
    assert str(ServerIdRange.parse(" 7 ")) == "7" and ServerIdRange.parse(4294967295).end == 2**32 - 1
    with pytest.raises(InvalidOptionError, match="has only 9: widen the connection's server_id"):
        ids.allocate(9)


@pytest.mark.parametrize("bad", ["", "abc", "0", "5-3", "1-4294967296", "1,2"])
def test_bad_ranges_are_refused(bad: str) -> None:
    with pytest.raises(InvalidOptionError, match="server_id"):
        ServerIdRange.parse(bad)


def test_clash_message() -> None:
    text = ("A slave with the same server_uuid/server_id as this slave has connected to the master; the first "
            "event 'mysql-bin.000001' at 4")
    error = explain_server_id_clash(text, 5401, ServerIdRange.parse("5400-5408"))
    assert error is not None and "server id 5401" in str(error) and "5400-5408" in str(error)
    assert explain_server_id_clash("Could not find first log file name", 5401, ServerIdRange(1, 1)) is None

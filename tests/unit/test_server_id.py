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


@pytest.mark.parametrize(
    "text",
    [
        # MySQL before 8.0.26 (error 1236)
        "A slave with the same server_uuid/server_id as this slave has connected to the master; the first event "
        "'mysql-bin.000001' at 4",
        # MySQL 8.0.26+
        "A replica with the same server_uuid/server_id as this replica has connected to the source; the first event",
        # MariaDB 10.11 (error 4052, measured): the *older* reader gets it when a newer one takes its id
        "A slave with the same server_uuid/server_id is already connected; the first event 'mysql-bin.000001' at 4, "
        "the last event read from 'mysql-bin.000001' at 537",
    ],
)
def test_clash_message(text: str) -> None:
    error = explain_server_id_clash(text, 5401, ServerIdRange.parse("5400-5408"))
    assert error is not None and "server id 5401" in str(error) and "5400-5408" in str(error)


def test_other_errors_are_not_clashes() -> None:
    assert explain_server_id_clash("Could not find first log file name", 5401, ServerIdRange(1, 1)) is None

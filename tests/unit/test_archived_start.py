"""Where a checkpoint lies in archived binlog files: by GTIDs whatever the files' names, by file and position
without GTIDs, and nowhere when the archive may begin after it."""

from __future__ import annotations

from collections.abc import Iterator

from airflow_provider_mysqlcdc.cdc.offset.archived_start import archived_start
from airflow_provider_mysqlcdc.cdc.offset.binlog_offset import BinlogOffset
from airflow_provider_mysqlcdc.cdc.offset.startup import Transaction

UUID = "3e11fa47-71ca-11e1-9e33-c80aa9429562"


class Archive:
    """Binlog files of transactions by GTID, each 100 bytes long, the first at position 4 (as a scan reports
    it: a transaction starts where the one before ended)."""

    def __init__(self, files: dict[str, list[str]], flavor: str = "mariadb") -> None:
        self.files, self.flavor = files, flavor
        self.names = list(files)

    def transactions(self, file: str) -> Iterator[Transaction]:
        start = BinlogOffset(file, 4, flavor=self.flavor)
        for name in self.names[self.names.index(file):]:
            for number, gtid in enumerate(self.files[name]):
                end = BinlogOffset(name, 104 + 100 * number, flavor=self.flavor)
                yield Transaction(start, end, gtid, 0)
                start = end

    def start(self, offset: BinlogOffset) -> BinlogOffset | None:
        return archived_start(self.names, self.transactions, offset)


def checkpoint(file: str, position: int, gtid: str, events_to_skip: int = 0, rows_to_skip: int = 0) -> BinlogOffset:
    return BinlogOffset(file, position, gtid, "mariadb", events_to_skip, rows_to_skip, "mariadb server_id=1")


def test_a_gtid_checkpoint_is_found_by_its_gtids_in_files_of_other_names() -> None:
    archive = Archive({"copy.000007": ["0-1-4", "0-1-5", "0-1-6"], "copy.000008": ["0-1-7", "0-1-8"]})
    lost = checkpoint("mysql-bin.000003", 1234, "0-1-6")
    # right after the last transaction the GTIDs cover: the end of the first file, whose next transaction is
    # the second's; GTIDs, server and the rest as they were
    assert archive.start(lost) == checkpoint("copy.000007", 304, "0-1-6")
    assert archive.start(checkpoint("mysql-bin.000003", 1234, "0-1-4")) == checkpoint("copy.000007", 104, "0-1-4")
    # inside a transaction (a batch cut it): its start in the archive, the rows already taken still skipped
    inside = checkpoint("mysql-bin.000003", 1234, "0-1-6", events_to_skip=2, rows_to_skip=5)
    assert archive.start(inside) == checkpoint("copy.000007", 304, "0-1-6", events_to_skip=2, rows_to_skip=5)
    # every archived transaction covered: the archive's end (nothing to read, the server goes on)
    assert archive.start(checkpoint("mysql-bin.000003", 1234, "0-1-9")) == checkpoint("copy.000008", 204, "0-1-9")


def test_a_copy_of_the_checkpoints_own_binlog_is_read_from_the_checkpoint_itself() -> None:
    archive = Archive({"mysql-bin.000003": ["0-1-1", "0-1-2"], "mysql-bin.000004": ["0-1-3"]})
    lost = checkpoint("mysql-bin.000003", 104, "0-1-1")
    assert archive.start(lost) == lost
    # past events outside transactions (a file's first events, after the last transaction it covers): there, not
    # at the end of the transaction before, so that its changes carry the server's offsets
    after_events = checkpoint("mysql-bin.000004", 385, "0-1-2")
    assert archive.start(after_events) == after_events
    # a file of the name whose transactions the GTIDs place after the checkpoint's position is another binlog's
    other = Archive({"mysql-bin.000003": ["0-1-1", "0-1-2", "0-1-3"]})
    assert other.start(checkpoint("mysql-bin.000003", 150, "0-1-2")) == checkpoint("mysql-bin.000003", 204, "0-1-2")


def test_mysql_gtid_sets_are_matched_too() -> None:
    archive = Archive({"b.000001": [f"{UUID}:1", f"{UUID}:2"], "b.000002": [f"{UUID}:3"]}, flavor="mysql")
    lost = BinlogOffset("a.000009", 55, f"{UUID}:1-2", "mysql")
    assert archive.start(lost) == BinlogOffset("b.000001", 204, f"{UUID}:1-2", "mysql")


def test_an_archive_that_may_begin_after_the_checkpoint_does_not_hold_it() -> None:
    # its first transaction is one the checkpoint lacks: the transactions before it may be in no file here
    archive = Archive({"copy.000007": ["0-1-8", "0-1-9"]})
    assert archive.start(checkpoint("mysql-bin.000003", 1234, "0-1-6")) is None
    # unless its first file is the checkpoint's own (a checkpoint before the file's first transaction)
    own = Archive({"mysql-bin.000003": ["0-1-8", "0-1-9"]})
    assert own.start(checkpoint("mysql-bin.000003", 256, "0-1-7")) == checkpoint("mysql-bin.000003", 256, "0-1-7")


def test_without_gtids_the_archive_must_hold_the_checkpoint_file_by_name() -> None:
    archive = Archive({"mysql-bin.000003": [], "mysql-bin.000004": []}, flavor="mysql")
    lost = BinlogOffset("mysql-bin.000004", 777, None, "mysql", events_to_skip=1)
    assert archive.start(lost) == lost
    assert archive.start(BinlogOffset("mysql-bin.000002", 777, None, "mysql")) is None
    assert archive.start(BinlogOffset("copy.000004", 777, None, "mysql")) is None

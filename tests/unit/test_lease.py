"""The lake's stream lease: one holder at a time, takeover after expiry with a new token, fencing.

The leases read a fake clock that a test moves on, so expiry and renewal do not wait on the wall clock."""

from __future__ import annotations

import pytest

from airflow_provider_mysqlcdc.exceptions import LakeLeaseError, NewerLakeFormatError
from airflow_provider_mysqlcdc.lake.handle import Lake
from airflow_provider_mysqlcdc.lake.write.lease import StreamLease


class Clock:
    """Seconds since the epoch that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_one_holder_at_a_time_and_the_same_holder_again(tmp_path) -> None:
    lake = Lake.at(str(tmp_path))
    first = StreamLease(lake, "dag.stream in run 1", 60)
    first.acquire()
    with pytest.raises(LakeLeaseError, match="held by 'dag.stream in run 1'.*Set max_active_runs=1"):
        StreamLease(lake, "dag.stream in run 2", 60).acquire()
    retry = StreamLease(lake, "dag.stream in run 1", 60)  # a retry or resume of the same task
    retry.acquire()
    assert retry.token == first.token == 1


def test_takeover_after_expiry_fences_the_stalled_holder(tmp_path, clock: Clock) -> None:
    lake = Lake.at(str(tmp_path))
    stalled = StreamLease(lake, "a", 20, clock)
    stalled.acquire()
    clock.advance(19.9)
    with pytest.raises(LakeLeaseError, match="held by 'a'"):
        StreamLease(lake, "b", 60, clock).acquire()
    clock.advance(0.1)  # expired: valid only before its expiry
    taker = StreamLease(lake, "b", 60, clock)
    taker.acquire()
    assert taker.token == 2
    with pytest.raises(LakeLeaseError, match="'a' lost its lease .*now held by 'b' \\(token 2"):
        stalled.check()
    taker.check()


def test_release_lets_the_next_writer_in_and_renewal_keeps_the_lease(tmp_path, clock: Clock) -> None:
    lake = Lake.at(str(tmp_path))
    holder = StreamLease(lake, "a", 40, clock)
    holder.acquire()
    expiries = []
    for _ in range(4):  # renewed at each check once half of it is gone: never expires while checked
        clock.advance(15)
        holder.check()
        expiries.append(lake.read_json(holder.path)["expires_at"] - clock.now)
    assert expiries == [25, 40, 25, 40]  # written again only at the checks that found less than half left
    with pytest.raises(LakeLeaseError):
        StreamLease(lake, "b", 60, clock).acquire()
    holder.check(until=clock.now + 600)  # held through a wait elsewhere
    clock.advance(599)
    with pytest.raises(LakeLeaseError):
        StreamLease(lake, "b", 60, clock).acquire()
    holder.release()
    StreamLease(lake, "b", 60, clock).acquire()
    with pytest.raises(LakeLeaseError, match="lost its lease"):
        holder.check()


def test_a_holder_that_never_acquired_cannot_commit(tmp_path) -> None:
    with pytest.raises(LakeLeaseError, match="lost its lease .* held by nobody"):
        StreamLease(Lake.at(str(tmp_path)), "a", 60).check()


def test_the_lease_is_a_versioned_document_and_an_unknown_version_is_refused(tmp_path) -> None:
    lake = Lake.at(str(tmp_path))
    lease = StreamLease(lake, "a", 60)
    lease.acquire()
    document = lake.read_json(lease.path)
    assert document["format_version"] == 2 and document["holder"] == "a"
    lake.write_json(lease.path, {**document, "format_version": 7})
    with pytest.raises(NewerLakeFormatError, match="format_version 7, written by a newer version.*reads formats 0 to "
                                                   "2. Upgrade airflow-provider-mysqlcdc"):
        lease.check()


def test_a_holder_says_it_left_the_lake_clean_and_the_next_taker_clears_it(tmp_path, clock: Clock) -> None:
    lake = Lake.at(str(tmp_path))
    first = StreamLease(lake, "a", 60, clock)
    first.acquire()
    assert first.left_clean_at is None
    first.check(until=clock.now + 60, clean_seq=7)  # a deferral after batch 7's checkpoint
    resumed = StreamLease(lake, "a", 60, clock)
    resumed.acquire()
    assert resumed.left_clean_at == 7
    resumed.check(until=clock.now + 60)  # renewed while running: it may have committed since
    again = StreamLease(lake, "a", 60)
    again.acquire()
    assert again.left_clean_at is None
    again.release(clean_seq=9)  # a stop after batch 9's checkpoint
    taker = StreamLease(lake, "b", 60)
    taker.acquire()
    assert taker.left_clean_at == 9
    # taking the lease cleared it before anything of the taker's could be committed
    assert lake.read_json(taker.path)["clean_seq"] is None

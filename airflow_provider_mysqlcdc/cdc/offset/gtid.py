"""GTIDs of both flavours, which order binlog offsets across binlog files and failovers.

MySQL writes executed GTID *sets*: ``uuid:1-5:7-9,uuid2:1-3``; one offset is after another when its set
contains the other's. MySQL 8.3+ adds tags (``SET gtid_next='AUTOMATIC:<tag>'``): after a uuid its untagged
intervals, then ``:tag:intervals`` groups, ``uuid:1-5:blue:1-3``; a tag is another source of the same uuid,
and a transaction is ``uuid:tag:n``. The server prints each uuid once, in order, its untagged intervals
first and then its tags in order (lower case, as it stores them); ``str`` writes that layout, with ``,``
between uuids where ``@@gtid_executed`` has ``,`` and a newline. MariaDB writes a GTID *position*:
one ``domain-server-seq`` per replication domain, the last transaction applied in that domain;
sequence numbers grow within a domain, so positions compare domain by domain.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from airflow_provider_mysqlcdc.exceptions import InvalidOptionError

_UUID = re.compile(r"^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$")
_INTERVAL = re.compile(r"^(\d+)(?:-(\d+))?$")
_TAG = re.compile(r"^[a-z_][a-z0-9_]{0,31}$", re.IGNORECASE)
_UUID_LENGTH = 36  # canonical: lower case, with dashes

Interval = tuple[int, int]


def _canonical_uuid(uuid: str) -> str:
    hexits = uuid.replace("-", "").lower()
    return "-".join((hexits[:8], hexits[8:12], hexits[12:16], hexits[16:20], hexits[20:]))


def _merge(intervals: list[Interval]) -> tuple[Interval, ...]:
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


@lru_cache(maxsize=1024)
def _source(text: str) -> str:
    """``uuid`` or ``uuid:tag`` of one transaction's GTID, canonical (cached: the stream adds a GTID at every
    commit, from a handful of sources)."""
    uuid, tagged, tag = text.partition(":")
    uuid, tag = uuid.strip(), tag.strip()
    if not _UUID.match(uuid) or (tagged and not _TAG.match(tag)):
        raise InvalidOptionError(f"{text!r} is not the source of a MySQL GTID (expected 'uuid' or 'uuid:tag')")
    return f"{_canonical_uuid(uuid)}:{tag.lower()}" if tagged else _canonical_uuid(uuid)


@dataclass(frozen=True)
class GtidSet:
    """A MySQL executed GTID set, normalised: sources sorted, intervals merged (inclusive ends)."""

    sources: tuple[tuple[str, tuple[Interval, ...]], ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> GtidSet:
        """Parse the server's text (it may contain newlines after commas); '' is the empty set.

        A UUID may be written without dashes; a tag (8.4) applies to the intervals after it, up to
        the next tag, as in ``uuid:1-3:blue:1-5``. Tags are case-insensitive, so they are lowered.
        """
        found: dict[str, list[Interval]] = {}
        for part in (text or "").replace("\n", "").split(","):
            part = part.strip()
            if not part:
                continue
            uuid, *rest = part.split(":")
            uuid = uuid.strip()
            if not _UUID.match(uuid) or not rest:
                raise InvalidOptionError(f"{part!r} is not a MySQL GTID set entry (expected 'uuid:1-5')")
            uuid = _canonical_uuid(uuid)
            source, tag_without_interval = uuid, False
            for item in rest:
                item = item.strip()
                interval = _INTERVAL.match(item)
                if interval:
                    start = int(interval.group(1))
                    end = int(interval.group(2) or start)
                    if start < 1 or end < start:
                        raise InvalidOptionError(f"bad GTID interval {item!r} in {part!r}")
                    found.setdefault(source, []).append((start, end))
                    tag_without_interval = False
                elif _TAG.match(item) and not tag_without_interval:
                    source, tag_without_interval = f"{uuid}:{item.lower()}", True
                else:
                    raise InvalidOptionError(f"bad GTID interval or tag {item!r} in {part!r}")
            if tag_without_interval:
                raise InvalidOptionError(f"the GTID tag in {part!r} has no interval after it")
        return cls(tuple(sorted((s, _merge(iv)) for s, iv in found.items())))

    def __str__(self) -> str:
        """The server's own layout: one entry per UUID, untagged intervals first, then each tag's."""
        entries: list[str] = []
        previous = ""
        for source, intervals in self.sources:  # sorted: 'uuid' comes before 'uuid:tag'
            text = "".join([f":{a}" if a == b else f":{a}-{b}" for a, b in intervals])
            uuid = source[:_UUID_LENGTH]
            if uuid == previous:
                entries[-1] += source[_UUID_LENGTH:] + text
            else:
                entries.append(source + text)
                previous = uuid
        return ",".join(entries)

    def _map(self) -> dict[str, tuple[Interval, ...]]:
        return dict(self.sources)

    def issubset(self, other: GtidSet) -> bool:
        theirs = other._map()
        return all(
            any(oa <= a and b <= ob for oa, ob in theirs.get(source, ())) for source, intervals in self.sources
            for a, b in intervals
        )

    def union(self, other: GtidSet) -> GtidSet:
        found: dict[str, list[Interval]] = {}
        for source, intervals in self.sources + other.sources:
            found.setdefault(source, []).extend(intervals)
        return GtidSet(tuple(sorted((s, _merge(iv)) for s, iv in found.items())))

    def add(self, gtid: str) -> GtidSet:
        """The set with one executed GTID, ``uuid:n`` or ``uuid:tag:n``, added: the stream does it at every commit,
        so the usual case, the next number of a source's last interval, is one tuple replaced."""
        source, number = _transaction(gtid)
        sources = self.sources
        for i, (name, intervals) in enumerate(sources):
            if name == source:
                start, end = intervals[-1]
                if number == end + 1:
                    grown = (*intervals[:-1], (start, number))
                elif any(a <= number <= b for a, b in intervals):
                    return self
                else:
                    grown = _merge([*intervals, (number, number)])
                return GtidSet((*sources[:i], (source, grown), *sources[i + 1:]))
        return GtidSet(tuple(sorted((*sources, (source, ((number, number),))))))

    def contains(self, gtid: str) -> bool:
        """Whether the one transaction ``gtid`` (``uuid:n`` or ``uuid:tag:n``) is in the set."""
        source, number = _transaction(gtid)
        return any(a <= number <= b for name, intervals in self.sources if name == source for a, b in intervals)


def _transaction(gtid: str) -> tuple[str, int]:
    """One transaction's GTID, ``uuid:n`` or ``uuid:tag:n``, as its canonical source and number."""
    source, _, number = gtid.rpartition(":")
    number = number.strip()
    if not source or not number.isdecimal() or int(number) < 1:
        raise InvalidOptionError(f"{gtid!r} is not a MySQL GTID (expected 'uuid:n' or 'uuid:tag:n', n >= 1)")
    return _source(source), int(number)


@dataclass(frozen=True)
class MariaDbGtidPosition:
    """A MariaDB GTID position: per domain, the (server id, sequence number) last applied."""

    domains: tuple[tuple[int, int, int], ...] = ()

    @classmethod
    def parse(cls, text: str | None) -> MariaDbGtidPosition:
        stripped = (text or "").strip()
        if stripped and "," not in stripped:  # one domain, as most servers have
            return cls((_mariadb_gtid(stripped),))
        found: dict[int, tuple[int, int, int]] = {}
        for part in (text or "").split(","):
            part = part.strip()
            if not part:
                continue
            domain, server, seq = _mariadb_gtid(part)
            if domain in found:
                raise InvalidOptionError(f"MariaDB GTID position {text!r} names domain {domain} twice")
            found[domain] = (domain, server, seq)
        return cls(tuple(sorted(found.values())))

    def __str__(self) -> str:
        if len(self.domains) == 1:
            domain, server, seq = self.domains[0]
            return f"{domain}-{server}-{seq}"
        return ",".join(f"{d}-{s}-{n}" for d, s, n in self.domains)

    def _seqs(self) -> dict[int, int]:
        return {d: n for d, _, n in self.domains}

    def issubset(self, other: MariaDbGtidPosition) -> bool:
        """Everything applied at this position is applied at ``other`` (a missing domain is seq 0)."""
        mine, theirs = self.domains, other.domains
        if len(mine) == 1 and len(theirs) == 1:  # one domain, as most servers have: every offset compares so
            return mine[0][2] <= (theirs[0][2] if theirs[0][0] == mine[0][0] else 0)
        seqs = other._seqs()
        return all(n <= seqs.get(d, 0) for d, _, n in mine)

    def advance(self, gtid: str) -> MariaDbGtidPosition:
        """The position after the transaction ``gtid`` (``domain-server-seq``) commits (the stream does this at
        every commit: the domain's entry is replaced in place, the others stay sorted)."""
        new = _mariadb_gtid(gtid)
        if len(self.domains) == 1 and self.domains[0][0] == new[0]:
            return MariaDbGtidPosition((new,))
        kept = [d for d in self.domains if d[0] != new[0]]
        return MariaDbGtidPosition(tuple(sorted([*kept, new])))


def _mariadb_gtid(text: str) -> tuple[int, int, int]:
    """``domain-server-seq`` as numbers (split, not a regular expression: the stream reads one per transaction)."""
    parts = text.split("-")
    if len(parts) != 3 or not all(p.isdecimal() for p in parts):
        raise InvalidOptionError(f"{text!r} is not a MariaDB GTID (expected 'domain-server-seq', e.g. '0-1-100')")
    return int(parts[0]), int(parts[1]), int(parts[2])

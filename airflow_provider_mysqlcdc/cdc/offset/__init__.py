"""Positions in the binlog: ``BinlogOffset`` (the one offset, one ordering), GTID sets and positions,
where a stream starts, and as-of points resolved to offsets.
"""

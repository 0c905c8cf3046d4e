"""Checking and repairing a replica while its stream runs: chunks read again and compared with the replica
as of their high watermark (``verify``), and chosen chunks read again and MERGEd (``resnapshot``)."""

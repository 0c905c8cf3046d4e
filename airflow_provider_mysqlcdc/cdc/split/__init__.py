"""Chunks of a table (the snapshot's splits): cutting a table into key ranges, the collation-exact key
order, which chunk holds a key, and which stream events are new after their chunk's high watermark.
"""

"""The source server: how to reach it (connection, TLS), what it is (flavour, version, server ids),
whether it is set up for CDC and keeps its binlog long enough, and identifier quoting for its SQL.
"""

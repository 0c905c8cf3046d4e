"""Errors a user can act on. Each message names what is wrong and what to set or grant."""


class MySqlCdcError(Exception):
    """Base class for every error this provider raises on purpose."""


class SourceConfigError(MySqlCdcError):
    """The MySQL/MariaDB server is not set up for CDC (binlog settings, version, privileges)."""


class TableNotSupportedError(MySqlCdcError):
    """A captured table cannot be snapshotted as configured (e.g. no primary key and no chunk key)."""


class InvalidOptionError(MySqlCdcError, ValueError):
    """An option value given by the user is malformed or out of range."""

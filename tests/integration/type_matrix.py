"""The type matrix: a column of every MySQL type with SQL literals for rows 1..n and the canonical values
expected of some (a last row NULL wherever it can be), the table that holds it, and a writer that changes it.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from decimal import Decimal
from typing import Any

from tests.writers import TransactionWriter

MAX_DEC = "9" * 35 + "." + "9" * 30
POLYGON = "ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))')"
MANY = [f"m{i}" for i in range(300)]  # an ENUM of more than 255 members is stored in 2 bytes

# column name -> (type, SQL literals for rows 1.., {row number: expected canonical value})
MATRIX: dict[str, tuple[str, list[str], dict[int, Any]]] = {
    "ti": ("TINYINT", ["-128", "127", "0"], {1: -128}),
    "tu": ("TINYINT UNSIGNED", ["0", "255"], {2: 255}),
    "si": ("SMALLINT", ["-32768", "32767"], {}),
    "su": ("SMALLINT UNSIGNED", ["65535"], {}),
    "mi": ("MEDIUMINT", ["-8388608", "8388607"], {}),
    "mu": ("MEDIUMINT UNSIGNED", ["16777215"], {1: 16777215}),
    "ii": ("INT", ["-2147483648", "2147483647"], {}),
    "iu": ("INT UNSIGNED", ["4294967295"], {}),
    "bi": ("BIGINT", ["-9223372036854775808", "9223372036854775807"], {}),
    "bu": ("BIGINT UNSIGNED", ["18446744073709551615", "0"], {1: 2**64 - 1}),
    "bo": ("BOOL", ["1", "0", "2"], {3: 2}),
    "d65": ("DECIMAL(65,30)", [MAX_DEC, "-" + MAX_DEC, "0.000000000000000000000000000001"], {1: Decimal(MAX_DEC)}),
    "d12": ("DECIMAL(12,2)", ["-1234567890.12", "0.10"], {2: Decimal("0.10")}),
    "fl": ("FLOAT", ["16777217", "0.1234567", "-3.4028234e38", "1e-45"], {1: 16777216.0}),
    "db": ("DOUBLE", ["2.718281828459045", "-1.7976931348623157e308", "5e-324"], {3: 5e-324}),
    "b1": ("BIT(1)", ["b'1'", "b'0'"], {1: True, 2: False}),
    "b64": ("BIT(64)", ["b'" + "1" * 64 + "'", "b'0'"], {1: 2**64 - 1}),
    "b5": ("BIT(5)", ["b'10101'"], {1: 21}),
    "yr": ("YEAR", ["1901", "2155", "0"], {2: 2155, 3: 0}),  # numeric 0 is YEAR 0000
    "da": ("DATE", ["'1000-01-01'", "'9999-12-31'", "'0000-00-00'", "'2020-00-00'"],
           {2: dt.date(9999, 12, 31), 3: None}),
    "t0": ("TIME", ["'-838:59:59'", "'838:59:59'", "'00:00:00'"],
           {1: -dt.timedelta(hours=838, minutes=59, seconds=59)}),
    "t3": ("TIME(3)", ["'-00:00:01.5'", "'25:00:00.001'"], {1: dt.timedelta(seconds=-1.5)}),
    "t2": ("TIME(2)", ["'-00:00:00.25'", "'-00:00:01.99'", "'-838:59:58.99'"], {1: dt.timedelta(seconds=-0.25)}),
    "t6": ("TIME(6)", ["'838:59:59.999999'", "'-12:34:56.000001'", "'-838:59:58.999999'", "'-00:00:00.5'"],
           {2: -dt.timedelta(hours=12, minutes=34, seconds=56, microseconds=1)}),
    "dm": ("DATETIME", ["'1000-01-01 00:00:00'", "'9999-12-31 23:59:59'", "'0000-00-00 00:00:00'"], {3: None}),
    "dm3": ("DATETIME(3)", ["'2024-02-29 12:00:00.123'"], {}),
    "dm6": ("DATETIME(6)", ["'9999-12-31 23:59:59.999999'", "'2020-02-00 10:00:00'"], {2: None}),
    "da0": ("DATE", ["'0000-01-01'", "'2024-02-29'"], {1: None, 2: dt.date(2024, 2, 29)}),  # Python has no year 0
    "dm0": ("DATETIME(3)", ["'0000-12-31 23:59:59.5'"], {1: None}),
    "ts": ("TIMESTAMP NULL", ["'1970-01-01 00:00:01'", "'2038-01-19 03:14:07'", "'0000-00-00 00:00:00'"],
           {1: dt.datetime(1970, 1, 1, 0, 0, 1), 3: None}),
    "ts3": ("TIMESTAMP(3) NULL", ["'2001-02-03 04:05:06.789'"], {}),
    "ts6": ("TIMESTAMP(6) NULL", ["'2038-01-19 03:14:07.999999'"], {1: dt.datetime(2038, 1, 19, 3, 14, 7, 999999)}),
    "ch": ("CHAR(5)", ["'ab  '", "'😀'"], {1: "ab"}),
    "vc": ("VARCHAR(50)", ["'x😀y '", "'ünï'", "''"], {1: "x😀y "}),
    "tx": ("TEXT", ["'emoji 🚀 and accents é'"], {}),
    "mt": ("MEDIUMTEXT", ["REPEAT('ab', 40000)"], {}),
    "lt": ("LONGTEXT", ["'long'"], {}),
    "l1": ("VARCHAR(10) CHARACTER SET latin1", ["'àé'", "'ÿ '"], {1: "àé"}),
    "c1": ("CHAR(4) CHARACTER SET latin1", ["'é '"], {1: "é"}),
    "bn": ("BINARY(4)", ["X'41000000'", "X'00000000'", "X'01'"], {3: b"\x01\x00\x00\x00"}),
    "vb": ("VARBINARY(10)", ["X'00FF'", "X''"], {1: b"\x00\xff", 2: b""}),
    "tb": ("TINYBLOB", ["X'00'"], {}),
    "bl": ("BLOB", ["X'DEADBEEF00'"], {1: b"\xde\xad\xbe\xef\x00"}),
    "lb": ("LONGBLOB", ["REPEAT(X'FF00', 50000)"], {}),
    "en": ("ENUM('a','b c','it''s','😀')", ["'it''s'", "'😀'", "'not a member'"], {1: "it's", 3: ""}),
    "st": ("SET('x','y','z')", ["'x,z'", "''", "'z,x,y'"], {2: "", 3: "x,y,z"}),
    "sn": ("SET('x','y') NOT NULL DEFAULT ''", ["''", "'y'"], {1: ""}),
    "js": ("JSON", ["'{\"a\": [1, \"ü\"], \"b\": null}'", "'[]'"], {2: "[]"}),
    "ge": ("GEOMETRY", [POLYGON], {}),
    "pt": ("POINT", ["POINT(1.5, -2)"], {1: bytes.fromhex("0101000000000000000000f83f00000000000000c0")}),
    "ls": ("LINESTRING", ["ST_GeomFromText('LINESTRING(0 0,1 1,2 1)')"], {}),
    # widths and precisions with their own wire layouts
    "d0": ("DECIMAL(20,0)", ["-12345678901234567890", "0", "1"], {1: Decimal("-12345678901234567890")}),
    "d5": ("DECIMAL(5,5)", ["-0.00001", "0.99999"], {1: Decimal("-0.00001")}),
    "d18": ("DECIMAL(18,9)", ["-999999999.999999999", "0.000000001"], {2: Decimal("1E-9")}),
    "t1": ("TIME(1)", ["'-00:00:00.1'", "'-838:59:58.9'", "'12:00:00.5'"], {1: dt.timedelta(seconds=-0.1)}),
    "t4": ("TIME(4)", ["'-00:00:01.0001'", "'-00:01:00.9999'"], {1: -dt.timedelta(seconds=1, microseconds=100)}),
    "t5": ("TIME(5)", ["'-00:00:00.00001'", "'-01:00:00.5'"], {1: dt.timedelta(microseconds=-10)}),
    "dm1": ("DATETIME(1)", ["'2000-02-29 23:59:59.9'"], {1: dt.datetime(2000, 2, 29, 23, 59, 59, 900000)}),
    "ts4": ("TIMESTAMP(4) NULL", ["'1970-01-01 00:00:01.0001'"], {1: dt.datetime(1970, 1, 1, 0, 0, 1, 100)}),
    "b9": ("BIT(9)", ["b'100000001'"], {1: 257}),
    "b16": ("BIT(16)", ["b'1111111111111111'"], {1: 65535}),
    "s9": ("SET('a','b','c','d','e','f','g','h','i')", ["'a,i'", "'h'"], {1: "a,i"}),
    "e2": ("ENUM(" + ",".join(f"'{m}'" for m in MANY) + ")", ["'m299'", "'m0'"], {1: "m299"}),
    "v3": ("VARCHAR(300)", ["REPEAT('é', 300)", "''"], {1: "é" * 300}),
    "cw": ("CHAR(100)", ["REPEAT('ü', 100)"], {1: "ü" * 100}),
    "vbw": ("VARBINARY(300)", ["REPEAT(X'00', 300)"], {1: bytes(300)}),
    "tt": ("TINYTEXT", ["'tiny'"], {}),
    "mb": ("MEDIUMBLOB", ["X'0102'"], {1: b"\x01\x02"}),
    # NOT NULL fixed-width columns in a row are read together; their NULL row holds the defaults
    "nbu": ("BIGINT UNSIGNED NOT NULL DEFAULT 0", ["18446744073709551615"], {1: 2**64 - 1}),
    "nmi": ("MEDIUMINT NOT NULL DEFAULT 0", ["-8388608"], {1: -8388608}),
    "nmu": ("MEDIUMINT UNSIGNED NOT NULL DEFAULT 0", ["16777215"], {1: 16777215}),
    "nde": ("DECIMAL(10,4) NOT NULL DEFAULT 0", ["-123456.7891", "0.0001"], {1: Decimal("-123456.7891")}),
    "nfl": ("FLOAT NOT NULL DEFAULT 0", ["-0.1"], {}),
    "ndm": ("DATETIME(6) NOT NULL DEFAULT '2000-01-01'", ["'0000-00-00 00:00:00'", "'2001-01-01 00:00:00.000001'"],
            {1: None, 2: dt.datetime(2001, 1, 1, 0, 0, 0, 1)}),
    "nts": ("TIMESTAMP(3) NOT NULL DEFAULT '2000-01-01 00:00:00'", ["'0000-00-00 00:00:00'"], {1: None}),
    "nda": ("DATE NOT NULL DEFAULT '2000-01-01'", ["'0000-00-00'", "'2020-00-01'"], {1: None, 2: None}),
    "nti": ("TIME(2) NOT NULL DEFAULT '00:00:00'", ["'-00:00:00.01'"], {1: dt.timedelta(seconds=-0.01)}),
    "nyr": ("YEAR NOT NULL DEFAULT 2000", ["1901"], {1: 1901}),
    "nb1": ("BIT(1) NOT NULL DEFAULT b'0'", ["b'1'"], {1: True}),
    "nen": ("ENUM('a','b') NOT NULL DEFAULT 'a'", ["'b'"], {1: "b"}),
    "nse": ("SET('a','b') NOT NULL DEFAULT 'a,b'", ["'b'"], {1: "b"}),
    "nbn": ("BINARY(3) NOT NULL DEFAULT ''", ["X'0100'"], {1: b"\x01\x00\x00"}),
    "nvc": ("VARCHAR(5) NOT NULL DEFAULT ''", ["'x'"], {1: "x"}),
    "ndb": ("DOUBLE NOT NULL DEFAULT 0", ["-0.5"], {1: -0.5}),
}


ROWS = max(len(v[1]) for v in MATRIX.values()) + 1  # the last row is NULL everywhere it can be


def create_types_table(admin: Any) -> None:
    """The type matrix's columns and rows (the last row NULL wherever it can be)."""
    with admin.cursor() as cur:
        columns = ", ".join(f"`{name}` {ddl}" for name, (ddl, _, _) in MATRIX.items())
        cur.execute(f"CREATE TABLE types (id INT PRIMARY KEY, {columns})")
        cur.execute("SET SESSION sql_mode = ''")
        for row in range(1, ROWS + 1):
            values = {n: literals[row - 1] for n, (_, literals, _) in MATRIX.items() if row <= len(literals)}
            cur.execute(f"INSERT INTO types (id{''.join(f', `{n}`' for n in values)}) "
                        f"VALUES ({row}{''.join(f', {v}' for v in values.values())})")


class TypesWriter(TransactionWriter):
    """Copies rows of the type-matrix table under new keys, updates and deletes them."""

    pause = 0.2

    def write(self, cur: Any, rnd: random.Random) -> None:
        columns = ", ".join(f"`{name}`" for name in MATRIX)
        cur.execute("SET SESSION sql_mode = ''")  # the copies keep the zero dates of the originals
        source, key = rnd.randint(1, ROWS), 100 + self.count
        cur.execute(f"INSERT INTO types (id, {columns}) SELECT %s, {columns} FROM types WHERE id = %s", (key, source))
        cur.execute("UPDATE types SET vc = %s, js = %s, ts6 = NOW(6), d65 = -d65 WHERE id = %s",
                    (f"ü{key}", json.dumps({"k": key}), rnd.randint(1, key)))
        cur.execute("DELETE FROM types WHERE id = %s", (rnd.randint(100, key + 5),))

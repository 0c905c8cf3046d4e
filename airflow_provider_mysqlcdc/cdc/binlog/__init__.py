"""The binlog read as changes: the dump connection, its events parsed, MySQL's and MariaDB's
compressed forms, row images decoded (row by row, or column by column into Arrow), statements that change
rows, and the reader that yields each change with an exact offset.
"""

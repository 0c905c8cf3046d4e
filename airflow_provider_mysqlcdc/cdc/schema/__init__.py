"""Tables' schemas: their ids and columns, the MySQL types and their conversions, reading them from
``information_schema``, what a DDL does to them, and the idle stream's check of them.
"""

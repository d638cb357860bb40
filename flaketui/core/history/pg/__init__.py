"""The shared history on a PostgreSQL server: connection, schema, push (writers) and sync.

The server keeps the raw history only; scoring runs on a local SQLite replica (``sync``). The
driver is psycopg 3, from the optional extra ``flaketui[postgres]``; nothing here is imported
unless a history address is a ``postgresql://`` URL.
"""

-- pgsteady-test: pg_version=11
REINDEX TABLE orders;

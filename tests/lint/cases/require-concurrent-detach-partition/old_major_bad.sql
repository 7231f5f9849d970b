-- pgsteady-test: pg_version=11
ALTER TABLE measurements DETACH PARTITION measurements_2019;

-- pgsteady-test: assume_in_transaction=false
ALTER TABLE measurements DETACH PARTITION measurements_2019 CONCURRENTLY;

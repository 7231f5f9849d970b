-- pgsteady-test: assume_in_transaction=true
DROP INDEX CONCURRENTLY orders_status_idx;

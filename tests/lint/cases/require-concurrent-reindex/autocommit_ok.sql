-- pgsteady-test: assume_in_transaction=false
REINDEX INDEX CONCURRENTLY orders_status_idx;
REINDEX (VERBOSE) TABLE CONCURRENTLY orders;

-- pgsteady: no-transaction
REINDEX TABLE CONCURRENTLY orders;

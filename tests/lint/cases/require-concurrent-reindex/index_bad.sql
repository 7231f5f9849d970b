REINDEX INDEX orders_status_idx;

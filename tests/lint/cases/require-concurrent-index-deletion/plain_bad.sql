DROP INDEX orders_status_idx;

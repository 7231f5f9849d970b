CLUSTER orders USING orders_created_at_idx;

CREATE VIEW order_totals AS SELECT customer_id, sum(total) AS total FROM orders GROUP BY 1;
CREATE OR REPLACE VIEW order_totals AS
    SELECT customer_id, sum(total) AS total, count(*) AS n FROM orders GROUP BY 1;

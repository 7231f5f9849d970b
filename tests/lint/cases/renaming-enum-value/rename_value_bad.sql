ALTER TYPE order_status RENAME VALUE 'canceled' TO 'cancelled';

ALTER TABLE orders ADD COLUMN customer_id bigint;
ALTER TABLE orders ADD CONSTRAINT orders_customer_fk
    FOREIGN KEY (customer_id) REFERENCES customers (id) NOT VALID;

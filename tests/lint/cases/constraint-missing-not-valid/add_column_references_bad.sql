-- Rails' add_reference: the foreign key is checked against every row under the lock.
ALTER TABLE orders ADD COLUMN customer_id bigint REFERENCES customers (id);

ALTER TABLE orders ADD CONSTRAINT orders_customer_fk FOREIGN KEY (customer_id) REFERENCES customers (id) NOT VALID;
ALTER TABLE orders ADD CONSTRAINT orders_product_fk FOREIGN KEY (product_id) REFERENCES products (id) NOT VALID;
ALTER TABLE orders ADD CONSTRAINT orders_warehouse_fk FOREIGN KEY (warehouse_id) REFERENCES warehouses (id) NOT VALID;

CREATE TABLE refunds (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, order_id bigint);
ALTER TABLE refunds ADD CONSTRAINT refunds_order_fk FOREIGN KEY (order_id) REFERENCES orders (id);

CREATE TABLE order_lines (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id bigint REFERENCES orders (id),
    product_id bigint REFERENCES products (id)
);

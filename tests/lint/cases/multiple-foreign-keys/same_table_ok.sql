CREATE TABLE order_notes (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id bigint REFERENCES orders (id),
    reply_to bigint REFERENCES orders (id)
);

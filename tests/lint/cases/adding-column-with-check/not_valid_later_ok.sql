ALTER TABLE order_lines ADD COLUMN quantity integer;
ALTER TABLE order_lines ADD CONSTRAINT order_lines_quantity_check CHECK (quantity > 0) NOT VALID;

ALTER TABLE order_lines ADD COLUMN quantity integer CHECK (quantity > 0);

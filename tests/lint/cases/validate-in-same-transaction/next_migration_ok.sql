-- the NOT VALID add was committed by an earlier migration
ALTER TABLE orders VALIDATE CONSTRAINT orders_customer_fk;

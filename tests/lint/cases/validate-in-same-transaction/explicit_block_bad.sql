-- pgsteady-test: assume_in_transaction=false
BEGIN;
ALTER TABLE orders ADD CONSTRAINT orders_total_nn CHECK (total IS NOT NULL) NOT VALID;
ALTER TABLE orders VALIDATE CONSTRAINT orders_total_nn;
COMMIT;

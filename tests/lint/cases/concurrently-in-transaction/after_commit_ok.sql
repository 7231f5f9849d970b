-- pgsteady-test: assume_in_transaction=false
BEGIN;
ALTER TABLE orders ADD COLUMN note text;
COMMIT;
CREATE INDEX CONCURRENTLY orders_note_idx ON orders (note);

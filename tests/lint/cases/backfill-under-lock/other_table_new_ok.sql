-- Tables created in this transaction: nobody else can use them yet, so the ALTER's lock on
-- one keeps no one waiting while the other is backfilled.
CREATE TABLE plans (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text);
ALTER TABLE plans ADD COLUMN active boolean;
CREATE TABLE plan_log (id bigint, note text);
UPDATE plan_log SET note = 'x' WHERE id > 0;
UPDATE users SET plan_id = 1 WHERE plan_id IS NULL;

CREATE TABLE plans (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text);
ALTER TABLE plans ADD COLUMN active boolean;
UPDATE plans SET active = true WHERE id > 0;

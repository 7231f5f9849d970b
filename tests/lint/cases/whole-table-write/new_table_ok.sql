CREATE TABLE plans (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text);
UPDATE plans SET name = lower(name);

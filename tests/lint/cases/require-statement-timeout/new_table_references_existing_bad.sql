-- pgsteady-test: assume_runner_timeouts=false
CREATE TABLE teams (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL);
ALTER TABLE teams ADD COLUMN owner_id bigint REFERENCES users (id);

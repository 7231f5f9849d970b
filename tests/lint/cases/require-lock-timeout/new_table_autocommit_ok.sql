-- pgsteady-test: assume_runner_timeouts=false assume_in_transaction=false
CREATE TABLE teams (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL);
CREATE INDEX teams_name_idx ON teams (name);

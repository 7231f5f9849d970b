-- pgsteady-test: assume_runner_timeouts=false assume_in_transaction=false
CREATE TABLE notes (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, body text);
CREATE INDEX CONCURRENTLY notes_body_idx ON users (nickname);

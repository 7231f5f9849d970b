-- A table nothing created before: IF NOT EXISTS creates it, empty, in this migration.
CREATE TABLE IF NOT EXISTS audit_log (id bigint PRIMARY KEY, actor text);
CREATE INDEX audit_log_actor ON audit_log (actor);

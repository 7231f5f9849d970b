\set ON_ERROR_STOP on
CREATE TABLE audit_log (id bigint PRIMARY KEY, note text);

CREATE TABLE staging_events (id bigint PRIMARY KEY, payload jsonb);
ALTER TABLE staging_events SET SCHEMA archive;

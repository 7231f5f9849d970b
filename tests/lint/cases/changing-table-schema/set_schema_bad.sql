ALTER TABLE events SET SCHEMA archive;

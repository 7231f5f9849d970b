ALTER TABLE countries ADD COLUMN code text;
ALTER TABLE countries ADD COLUMN name varchar(100);

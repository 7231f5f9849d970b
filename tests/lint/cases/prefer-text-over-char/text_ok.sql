ALTER TABLE countries ADD COLUMN code text CHECK (length(code) = 2);
ALTER TABLE countries ADD COLUMN name varchar(100);

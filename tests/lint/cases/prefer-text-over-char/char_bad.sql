ALTER TABLE countries ADD COLUMN code char(2);

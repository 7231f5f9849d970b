CREATE TABLE invoices (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, status text);
CREATE INDEX invoices_status_idx ON invoices (status);

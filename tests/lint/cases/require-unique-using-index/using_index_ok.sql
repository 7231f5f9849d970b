-- pgsteady-test: assume_in_transaction=false
CREATE UNIQUE INDEX CONCURRENTLY accounts_pkey_idx ON accounts (id);
ALTER TABLE accounts ADD CONSTRAINT accounts_pkey PRIMARY KEY USING INDEX accounts_pkey_idx;

-- ADD CONSTRAINT ... CHECK takes ACCESS EXCLUSIVE even NOT VALID; the backfill then runs
-- under it until the migration commits.
ALTER TABLE accounts ADD CONSTRAINT balance_positive CHECK (balance > 0) NOT VALID;
UPDATE accounts SET balance = 0 WHERE balance IS NULL;

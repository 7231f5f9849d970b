-- The ALTER's ACCESS EXCLUSIVE on orgs is kept until the transaction commits: every reader
-- of orgs waits for the whole backfill of users.
ALTER TABLE orgs ADD COLUMN plan text;
UPDATE users SET plan_id = 1 WHERE plan_id IS NULL;
DELETE FROM sessions WHERE expired;

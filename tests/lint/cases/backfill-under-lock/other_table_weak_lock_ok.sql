-- A foreign key added NOT VALID takes SHARE ROW EXCLUSIVE: readers of orgs go on during the
-- backfill of users.
ALTER TABLE orgs ADD CONSTRAINT orgs_owner_fkey FOREIGN KEY (owner_id) REFERENCES users (id) NOT VALID;
UPDATE users SET plan_id = 1 WHERE plan_id IS NULL;

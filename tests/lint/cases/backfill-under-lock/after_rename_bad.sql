-- ALTER TABLE ... RENAME takes ACCESS EXCLUSIVE too, kept until the transaction commits.
ALTER TABLE accounts RENAME COLUMN kind TO plan; -- pgsteady: ignore renaming-column -- no reader uses it yet
UPDATE users SET plan_id = 1 WHERE plan_id IS NULL;

CREATE VIEW active_users AS SELECT id, email FROM users WHERE deleted_at IS NULL;
-- pgsteady-test: above ran in an earlier migration
CREATE OR REPLACE VIEW active_users AS
    SELECT id, email, plan FROM users WHERE deleted_at IS NULL;

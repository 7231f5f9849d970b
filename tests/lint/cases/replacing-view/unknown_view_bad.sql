-- OR REPLACE is for views that exist; without history, assume this one does.
CREATE OR REPLACE VIEW active_users AS SELECT id, email FROM users;

UPDATE users SET plan = 'free' WHERE id BETWEEN 1 AND 5000;
DELETE FROM audit_log WHERE created_at < now() - interval '90 days';

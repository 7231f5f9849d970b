DELETE FROM audit_log;

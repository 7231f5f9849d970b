-- From hatchet-dev/hatchet cmd/hatchet-migrate/migrate/migrations/20260129222535_v1_0_73.sql
-- (goose): the table is emptied earlier in the same transaction, so no row lacks the value.
TRUNCATE TABLE "TenantResourceLimitAlert";
ALTER TABLE "TenantResourceLimitAlert"
    ADD COLUMN IF NOT EXISTS "resource" "LimitResource" NOT NULL;

ALTER TABLE users ADD COLUMN seq bigserial;

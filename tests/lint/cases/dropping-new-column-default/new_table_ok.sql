-- a table made in this migration: no running code inserts into it yet
CREATE TABLE shop_tag (id bigint PRIMARY KEY);
ALTER TABLE "shop_tag" ADD COLUMN "label" text DEFAULT 'x' NOT NULL;
ALTER TABLE "shop_tag" ALTER COLUMN "label" DROP DEFAULT;

CREATE TABLE shop_product (id bigint PRIMARY KEY, name text NOT NULL);
-- pgsteady-test: above ran in an earlier migration
-- a nullable column: rows inserted without it get NULL, which is allowed
ALTER TABLE "shop_product" ADD COLUMN "note" text DEFAULT '' NULL;
ALTER TABLE "shop_product" ALTER COLUMN "note" DROP DEFAULT;

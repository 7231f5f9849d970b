CREATE TABLE shop_product (id bigint PRIMARY KEY, in_stock boolean DEFAULT true NOT NULL);
-- pgsteady-test: above ran in an earlier migration
-- the default dropped in a later migration, after the code that writes the column
ALTER TABLE "shop_product" ALTER COLUMN "in_stock" DROP DEFAULT;

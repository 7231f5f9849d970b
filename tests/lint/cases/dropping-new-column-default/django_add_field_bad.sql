-- what Django's AddField(BooleanField(default=True)) writes
CREATE TABLE shop_product (id bigint PRIMARY KEY, name text NOT NULL);
-- pgsteady-test: above ran in an earlier migration
ALTER TABLE "shop_product" ADD COLUMN "in_stock" boolean DEFAULT true NOT NULL;
ALTER TABLE "shop_product" ALTER COLUMN "in_stock" DROP DEFAULT;

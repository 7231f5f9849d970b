from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction
    dependencies = [("shop", "0002_product_in_stock")]

    operations = [
        AddIndexConcurrently(
            model_name="product",
            index=models.Index(fields=["name"], name="shop_product_name_idx"),
        ),
    ]

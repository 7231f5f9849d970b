"""The example's one model: products, a table the running service reads all the time."""

from django.db import models


class Product(models.Model):
    name = models.CharField(max_length=200)
    price_cents = models.IntegerField(default=0)
    in_stock = models.BooleanField(default=True)

    class Meta:
        indexes = [models.Index(fields=["name"], name="shop_product_name_idx")]

"""The example's URLs: the health probes (``/health/live``, ``/health/ready``, ``/health/deep``)."""

from django.urls import include, path

from pgsteady.django.health import db_check, health_urls
from pgsteady.health import Health

health = Health({"db": db_check("default")}, service="shop")

urlpatterns = [path("health/", include(health_urls(health)))]

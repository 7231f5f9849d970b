"""pgsteady for Django: ``ENGINE = "pgsteady.django"`` and the ``pgsteady.django`` app.

The backend (:mod:`.base`) gives every connection its timeouts and label; the app's
``migrate`` applies each migration under a short lock_timeout with retries;
``pgsteady_lint`` and ``pgsteady_preflight`` check pending migrations before a deploy.
See docs/django.md. Nothing is defined here: Django imports this package as the app and
``pgsteady.django.base`` as the backend.
"""

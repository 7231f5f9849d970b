# gunicorn -c gunicorn_conf.py wsgi_app:app   (sync workers; the Deploying page's config)
import os

preload_app = True  # --preload: import the app once, then fork; each worker gets its own pools
workers = int(os.environ.get("WEB_CONCURRENCY", "3"))
worker_class = "sync"
bind = os.environ.get("BIND", "127.0.0.1:8000")
# The limits, shortest first: the request deadline (WEB_DEADLINE, 2 s) < timeout. A worker
# silent for `timeout` seconds is killed, and its connections die with it mid-query.
timeout = 30
graceful_timeout = 30  # SIGTERM: finish the requests in flight, then exit

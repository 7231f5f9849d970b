# gunicorn -c gunicorn_uvicorn_conf.py asgi_app:app   (asyncio workers; the Deploying page)
from gunicorn_conf import *  # noqa: F403 - the same limits and preload

worker_class = "uvicorn.workers.UvicornWorker"

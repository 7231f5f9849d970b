"""An ASGI service with an AsyncDatabase and an AsyncSteady made at import, served by
gunicorn with uvicorn workers and ``preload_app`` (the Deploying page, docs/deploying.md).
The pools open in each worker's lifespan, on that worker's event loop."""

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from pgsteady import AsyncDatabase
from pgsteady.health import Health, db_check
from pgsteady.sqlalchemy import AsyncSteady, url_from_dsn

DSN = os.environ["PGSTEADY_DSN"]  # PgBouncer, transaction mode
DEADLINE = float(os.environ.get("WEB_DEADLINE", "2"))
db = AsyncDatabase(DSN, pool_size=2, pooler="transaction", service="api", deadline=DEADLINE)
engine = create_async_engine(url_from_dsn(DSN), pool_size=2, max_overflow=0,
                             connect_args={"prepare_threshold": None})
steady = AsyncSteady(engine, pooler="transaction", service="api", deadline=DEADLINE)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    await db.open()
    yield
    await db.close()
    await steady.aclose()
    await engine.dispose()


app = FastAPI(lifespan=lifespan)
app.mount("/ops", Health({"db": db_check(db)}, service="api").asgi())


@app.get("/whoami")
async def whoami(rid: str) -> dict[str, object]:
    asked = f"{os.getpid()}:{rid}"
    got = (await db.fetchone("select %s::text, pg_backend_pid()", (asked,)))[0]
    via_steady = await steady.scalar(text("select cast(:v as text)"), {"v": asked})
    return {"asked": asked, "got": got, "steady": via_steady, "pid": os.getpid()}

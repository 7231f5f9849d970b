"""The lab's Redis: owner-only, loopback, nothing on disk, gone on every way out."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys

import pytest
import redis

from pgsteady.lab.cluster import Cluster


def test_cluster_redis_needs_its_password_and_stops(pgsteady_postgres):
    """Cluster(redis=True): the URL works, no password is refused, the config is 0600,
    repr hides the password, and the server and its directory are gone after stop()."""
    cluster = Cluster(postgres=pgsteady_postgres, redis=True)
    with cluster:
        server = cluster.redis
        with redis.Redis.from_url(cluster.redis_url(), socket_timeout=2) as client:
            assert client.ping()
            assert client.config_get("save")["save"] == ""
            assert client.config_get("appendonly")["appendonly"] == "no"
        with pytest.raises(redis.AuthenticationError), \
                redis.Redis(host="127.0.0.1", port=server.port, socket_timeout=2) as anon:
            anon.ping()
        assert stat.S_IMODE(os.stat(cluster.dir / "redis.conf").st_mode) == 0o600
        assert cluster.redis_url().split("@")[0] not in repr(server)
        workdir = cluster.dir
    assert not server.running and not workdir.exists()


def test_lab_up_with_redis_prints_no_password():
    """`pgsteady lab up --redis --once` names the Redis and where its password is, and
    never prints the password itself."""
    out = subprocess.run([sys.executable, "-m", "pgsteady", "lab", "up", "--redis", "--once"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    line = next(line for line in out.stdout.splitlines() if line.startswith("redis:"))
    assert re.match(r"redis:\s+redis://:\*\*\*@127\.0\.0\.1:\d+/0 \(password: requirepass in "
                    r".*/redis\.conf\)$", line)

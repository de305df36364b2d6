"""Fixtures for the cluster tests: one redis-server and one PostgreSQL for the session, and a
cluster of console processes on a fresh database for each test module (tests/cluster/harness.py).

A module changes its cluster by overriding ``cluster_options`` (module scope):
``{"names": ("a", "b", "c"), "env": {"CONSOLE_SAFETY_POLL_SECONDS": "30"}}``; ``redis_url``
likewise, for a module that restarts a Redis of its own.
"""

import re

import pytest
import redis

from tests.cluster.harness import Cluster, ClusterTemplate
from tests.support.proxy import nginx_proxy
from tests.support.services import PostgresServer, RedisServer


@pytest.fixture(scope="session")
def redis_server():
    server = RedisServer().start()
    yield server
    server.close()


@pytest.fixture(scope="session")
def postgres_server():
    server = PostgresServer().start()
    yield server
    server.close()


@pytest.fixture(scope="session")
def cluster_template(postgres_server):
    """Migrated once, with a reviewer and a host service account and their API tokens."""
    return ClusterTemplate.create(postgres_server)


@pytest.fixture(scope="module")
def cluster_options():
    return {}


@pytest.fixture(scope="module")
def redis_url(redis_server):
    """The session's Redis, emptied for each module: the consoles of the modules before (stopped, on
    databases of their own) left their channels in its groups, and no console here declares them dead."""
    client = redis.Redis.from_url(redis_server.url)
    client.flushdb()
    client.close()
    return redis_server.url


@pytest.fixture(scope="module")
def module_cluster(request, cluster_template, redis_url, cluster_options, tmp_path_factory):
    database = re.sub(r"\W", "_", request.module.__name__.rpartition(".")[2]).lower()
    cluster = Cluster(
        cluster_template, redis_url, tmp_path_factory.mktemp(database), database=database, **cluster_options
    )
    try:
        yield cluster.start()
    finally:
        cluster.close()


@pytest.fixture
def cluster(module_cluster):
    """The module's cluster, every member running and beating (a test before may have killed or frozen one)."""
    module_cluster.heal()
    return module_cluster


@pytest.fixture(scope="module")
def proxy(module_cluster):
    """nginx with the shipped deploy/nginx.conf in front of the module's consoles (tests/support/proxy.py)."""
    with nginx_proxy([member.port for member in module_cluster.members], name="cluster-proxy") as proxy:
        yield proxy


@pytest.fixture
def front(cluster, proxy):
    """The cluster as a browser or a host reaches it: through the proxy, which picks either console."""
    return cluster.through(proxy.url)


@pytest.fixture
def label(request):
    """This test's name for its runs: the cluster tools record it with every execution."""
    return re.sub(r"\W", "-", request.node.name)

"""The deployment profile (toolnexus_site/deployment.py): DATABASE_URL and REDIS_URL read into settings,
and a URL that cannot work refused with a message that says what to change."""

import re

import pytest
from channels_redis.core import RedisChannelLayer
from django.utils.module_loading import import_string
from redis.asyncio import BlockingConnectionPool

from tests.support.live_console import console_env, manage
from toolnexus_site.deployment import (
    REDIS_CONNECTION_OPTIONS,
    DeploymentConfigError,
    audit_keys,
    channel_layers,
    postgres_database,
    trusted_proxies,
)


def test_a_postgresql_url_becomes_a_django_database_with_a_connection_pool():
    database = postgres_database(
        "postgresql://console:p%40ss%2Fword@db.example:6543/approvals?sslmode=require&pool_max=7"
    )
    assert database == {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "approvals",
        "USER": "console",
        "PASSWORD": "p@ss/word",
        "HOST": "db.example",
        "PORT": "6543",
        "CONN_MAX_AGE": 0,
        "OPTIONS": {"pool": {"min_size": 2, "max_size": 7, "timeout": 20}, "sslmode": "require"},
        "TEST": {"NAME": "test_approvals"},
    }


@pytest.mark.parametrize("scheme", ["postgres", "postgresql", "pgsql"])
def test_every_postgres_spelling_is_accepted_and_no_host_means_the_local_socket(scheme):
    database = postgres_database(f"{scheme}:///console?pool_min=0")
    assert (database["NAME"], database["HOST"], database["PORT"], database["USER"]) == ("console", "", "", "")
    assert database["OPTIONS"]["pool"]["min_size"] == 0


@pytest.mark.parametrize(
    "url, scheme",
    [("mysql://db/console", "mysql"), ("sqlite:///var/db.sqlite3", "sqlite"), ("db.example/console", "no scheme")],
)
def test_a_database_url_that_is_not_postgresql_is_refused_naming_its_scheme(url, scheme):
    with pytest.raises(
        DeploymentConfigError,
        match=rf"DATABASE_URL must start with postgresql:// \(got {scheme}://\); "
        "leave it unset for the embedded SQLite database",
    ):
        postgres_database(url)


def test_a_database_url_without_a_database_name_is_refused():
    with pytest.raises(DeploymentConfigError, match="names no database: add it after the host"):
        postgres_database("postgresql://console@db.example:5432/")


@pytest.mark.parametrize("port", ["abc", "99999"])
def test_a_bad_port_is_refused_saying_what_a_port_looks_like(port):
    with pytest.raises(DeploymentConfigError, match="DATABASE_URL has a bad port: put a number from 1 to 65535"):
        postgres_database(f"postgresql://db.example:{port}/console")
    with pytest.raises(DeploymentConfigError, match="REDIS_URL has a bad port"):
        channel_layers(f"redis://cache.example:{port}/0", 100)


@pytest.mark.parametrize(
    "query, message",
    [
        ("pool_max=many", "pool_max must be a whole number of connections, 1 or more \\(got 'many'\\)"),
        ("pool_max=0", "pool_max must be a whole number of connections, 1 or more"),
        ("pool_min=-1", "pool_min must be a whole number of connections, 0 or more"),
        ("pool_min=9&pool_max=3", "pool_min \\(9\\) is above its pool_max \\(3\\)"),
    ],
)
def test_bad_pool_sizes_are_refused_with_what_is_wrong(query, message):
    with pytest.raises(DeploymentConfigError, match=message):
        postgres_database(f"postgresql://db.example/console?{query}")


def test_a_redis_url_selects_the_redis_channel_layer_with_the_capacity():
    assert channel_layers("redis://:secret@127.0.0.1:6380/2", 250) == {
        "default": {
            "BACKEND": "approvals.hotpath.redis_layer.WaitingPoolRedisChannelLayer",
            "CONFIG": {
                "hosts": [{"address": "redis://:secret@127.0.0.1:6380/2", **REDIS_CONNECTION_OPTIONS}],
                "capacity": 250,
                "expiry": 60,
                "group_expiry": 86400,
            },
        }
    }
    assert (
        channel_layers("unix:///run/redis.sock", 5)["default"]["CONFIG"]["hosts"][0]["address"]
        == "unix:///run/redis.sock"
    )


def test_the_redis_layers_connections_outlast_its_blocking_read_and_wait_for_a_free_one():
    # Built by the installed channels_redis and redis-py, as the console builds it: a version that
    # drops or renames an option, or blocks longer on an idle read, fails here.
    config = channel_layers("redis://:secret@127.0.0.1:6380/2", 100)["default"]
    layer = import_string(config["BACKEND"])(**config["CONFIG"])
    assert isinstance(layer, RedisChannelLayer)
    pool = layer.create_pool(0)
    assert isinstance(pool, BlockingConnectionPool)  # waits for a connection instead of raising
    assert (pool.max_connections, pool.timeout) == (100, 20)
    connection = pool.make_connection()
    assert (connection.host, connection.port, connection.db, connection.password) == ("127.0.0.1", 6380, 2, "secret")
    # channels_redis reads an idle channel with a blocking BZPOPMIN of brpop_timeout seconds.
    assert connection.socket_timeout >= layer.brpop_timeout + 5
    assert connection.socket_connect_timeout == 5
    assert (connection.socket_keepalive, connection.health_check_interval) == (True, 30)


@pytest.mark.parametrize("unset", [None, ""])
def test_without_a_redis_url_the_layer_is_the_in_memory_one(unset):
    assert channel_layers(unset, 100) == {
        "default": {
            "BACKEND": "approvals.hotpath.channel_layer.FanOutInMemoryChannelLayer",
            "CONFIG": {"capacity": 100},
        }
    }


def test_a_redis_url_that_is_not_redis_is_refused_without_repeating_its_password():
    with pytest.raises(
        DeploymentConfigError, match=r"must start with redis://, rediss:// or unix:// \(got http://\)"
    ) as refused:
        channel_layers("http://:hunter2@cache.example:6379/0", 100)
    assert "hunter2" not in str(refused.value)


def test_a_bad_database_url_stops_the_console_at_start_up_with_its_message(tmp_path):
    env = console_env(tmp_path / "unused.sqlite3", DATABASE_URL="mysql://db.example/console")
    with pytest.raises(RuntimeError, match=r"DeploymentConfigError: DATABASE_URL must start with postgresql://"):
        manage(env, "check")


def test_audit_keys_are_read_as_numbered_versions():
    keys = audit_keys("1:" + "a" * 32 + ", 2:" + "b" * 40, "unused")
    assert keys == {1: b"a" * 32, 2: b"b" * 40}


def test_without_audit_keys_one_is_derived_from_the_secret_key_and_differs_per_secret():
    assert list(audit_keys("", "secret-one")) == [1]
    assert audit_keys(None, "secret-one") != audit_keys(None, "secret-two")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("just-a-secret-without-a-version-000000", "comma-separated <version>:<secret> pairs"),
        ("0:" + "a" * 32, "comma-separated <version>:<secret> pairs"),
        ("1:short", "key version 1 is 5 characters; use at least 32"),
        ("1:" + "a" * 32 + ",1:" + "b" * 32, "names key version 1 twice"),
    ],
)
def test_bad_audit_keys_are_refused_saying_what_to_change(text, message):
    with pytest.raises(DeploymentConfigError, match=re.escape(message)):
        audit_keys(text, "unused")


def test_the_key_derived_from_the_secret_key_stays_version_1_unless_the_setting_names_it():
    default = audit_keys("", "secret-one")[1]
    assert audit_keys("2:" + "b" * 32, "secret-one") == {1: default, 2: b"b" * 32}
    assert audit_keys("1:" + "a" * 32, "secret-one") == {1: b"a" * 32}


def test_trusted_proxies_are_addresses_and_networks_and_none_by_default():
    assert trusted_proxies(None) == trusted_proxies(" ") == ()
    assert [str(n) for n in trusted_proxies("172.30.0.10, 10.0.0.0/8,2001:db8::/32")] == [
        "172.30.0.10/32",
        "10.0.0.0/8",
        "2001:db8::/32",
    ]


def test_a_trusted_proxy_given_by_name_is_refused_saying_what_to_give():
    with pytest.raises(DeploymentConfigError, match=r"IP addresses or networks.*'proxy.internal' is neither"):
        trusted_proxies("10.0.0.1, proxy.internal")


@pytest.mark.parametrize("everyone", ["0.0.0.0/0", "::/0"])
def test_trusting_every_address_as_a_proxy_is_refused(everyone):
    with pytest.raises(DeploymentConfigError, match=r"trusts every address, so any client could name its own"):
        trusted_proxies(f"10.0.0.1,{everyone}")


def test_a_bad_trusted_proxy_stops_the_console_at_start_up_with_its_message(tmp_path):
    env = console_env(tmp_path / "unused.sqlite3", CONSOLE_TRUSTED_PROXIES="proxy.internal")
    with pytest.raises(RuntimeError, match=r"DeploymentConfigError: CONSOLE_TRUSTED_PROXIES must list IP addresses"):
        manage(env, "check")

"""The deployment profile (toolnexus_site/deployment.py): CONSOLE_ENV and what production needs, DATABASE_URL
and REDIS_URL read into settings, and a setting that cannot work refused with a message that says what to change."""

import re

import pytest
from channels_redis.core import RedisChannelLayer
from django.core.checks.security.base import _check_secret_key as passes_djangos_w009
from django.utils.module_loading import import_string
from redis.asyncio import BlockingConnectionPool

from tests.support.live_console import console_env, manage
from tests.support.signing_keys import production_signing_key_file
from toolnexus_site.deployment import (
    DEVELOPMENT_SECRET_KEY,
    REDIS_CONNECTION_OPTIONS,
    DeploymentConfigError,
    audit_keys,
    channel_layers,
    console_environment,
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


# -- CONSOLE_ENV: development by default, production refuses to start unsafely ------------------------------

SECRET_KEY = "k7Hq-2vNw9xZ_pL4mR8tY1cB6dF3gJ0sA5eU-iO7kW2qX9zV4nM1"  # 52 characters, many different
AUDIT_KEYS = "2:" + "audit-secret-for-production-00000001"
PRODUCTION = {
    "CONSOLE_ENV": "production",
    "DJANGO_SECRET_KEY": SECRET_KEY,
    "DJANGO_ALLOWED_HOSTS": "console.example.com",
    "CONSOLE_AUDIT_KEYS": AUDIT_KEYS,
    "CONSOLE_SIGNING_KEY_FILE": production_signing_key_file(),
}


def refusal(environ):
    with pytest.raises(DeploymentConfigError) as refused:
        console_environment(environ)
    return str(refused.value)


def test_development_is_the_default_with_debug_off_and_nothing_https_only():
    environment = console_environment({})
    assert environment.name == "development" and not environment.production
    assert environment.debug is False
    assert environment.secret_key == DEVELOPMENT_SECRET_KEY
    assert environment.allowed_hosts == ["127.0.0.1", "localhost", "[::1]"]
    assert (environment.hsts_seconds, environment.ssl_redirect, environment.proxy_tls) == (0, False, False)
    assert environment.session_seconds == 12 * 3600
    assert console_environment({"DJANGO_DEBUG": "1"}).debug is True


def test_the_development_key_stays_the_one_development_trails_were_sealed_with():
    # Existing trails are sealed with a key derived from it (version 1): changing it would break them.
    assert DEVELOPMENT_SECRET_KEY == "dev-only-insecure-key-set-DJANGO_SECRET_KEY-in-production"
    derived = audit_keys(None, DEVELOPMENT_SECRET_KEY)[1]
    assert derived.hex() == "448b186bf7a6535f9d3e08608c5acebffa8d03cbf8154720e796ed36666ff2b3"


def test_production_with_nothing_set_names_every_setting_to_set_at_once():
    message = refusal({"CONSOLE_ENV": "production"})
    assert message.startswith("The console will not start in production until these settings are changed:")
    for needed in (
        "DJANGO_SECRET_KEY (or DJANGO_SECRET_KEY_FILE) is not set",
        "DJANGO_ALLOWED_HOSTS is not set",
        "CONSOLE_AUDIT_KEYS (or CONSOLE_AUDIT_KEYS_FILE) is not set",
        "CONSOLE_SIGNING_KEY_FILE is not set: give the console the Ed25519 key it signs answers with",
    ):
        assert needed in message
    assert message.count("\n  - ") == 4
    assert message.endswith('docs/operations.md, "Production settings".')


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"DJANGO_SECRET_KEY": DEVELOPMENT_SECRET_KEY}, "DJANGO_SECRET_KEY is the development key, which anyone can"),
        ({"DJANGO_SECRET_KEY": "django-insecure-" + SECRET_KEY}, "DJANGO_SECRET_KEY starts with 'django-insecure-'"),
        ({"DJANGO_SECRET_KEY": SECRET_KEY[:49]}, "DJANGO_SECRET_KEY is 49 characters: use 50 or more"),
        ({"DJANGO_SECRET_KEY": "abcd" * 13}, "DJANGO_SECRET_KEY has 4 different characters: use a random key with 5"),
        ({"DJANGO_DEBUG": "1"}, "DJANGO_DEBUG is refused in production (got '1')"),
        ({"DJANGO_DEBUG": "true"}, "DJANGO_DEBUG is refused in production (got 'true')"),
        ({"DJANGO_ALLOWED_HOSTS": ""}, "DJANGO_ALLOWED_HOSTS is not set"),
        ({"DJANGO_ALLOWED_HOSTS": "localhost, 127.0.0.1,[::1]"}, "DJANGO_ALLOWED_HOSTS is the development default"),
        ({"DJANGO_ALLOWED_HOSTS": "console.example.com,*"}, "DJANGO_ALLOWED_HOSTS has '*', which answers to any Host"),
        ({"CONSOLE_AUDIT_KEYS": "2:short"}, "CONSOLE_AUDIT_KEYS' key version 2 is 5 characters; use at least 32"),
        ({"DJANGO_SECRET_KEY_FALLBACKS": "x" * 60}, "DJANGO_SECRET_KEY_FALLBACKS' key 1 has 1 different characters"),
        (
            {"DJANGO_SECRET_KEY_FALLBACKS": f"{SECRET_KEY[::-1]},{DEVELOPMENT_SECRET_KEY}"},
            "DJANGO_SECRET_KEY_FALLBACKS' key 2 is the development key",
        ),
        ({"CONSOLE_PROXY_TLS": "yes"}, "CONSOLE_PROXY_TLS must be 1 (on) or 0 (off) (got 'yes')"),
        ({"CONSOLE_HSTS_SECONDS": "1y"}, "CONSOLE_HSTS_SECONDS must be a whole number of seconds, 0 or more"),
        ({"CONSOLE_SESSION_HOURS": "0"}, "CONSOLE_SESSION_HOURS must be a number of hours above 0"),
    ],
)
def test_each_unsafe_production_setting_is_refused_naming_what_to_set(change, says):
    message = refusal({**PRODUCTION, **change})
    assert says in message
    assert message.count("\n  - ") == 1
    assert SECRET_KEY not in message and AUDIT_KEYS not in message  # a refusal never repeats a secret


@pytest.mark.parametrize(
    ("key", "passes"),
    [
        ("a1b2c" * 10, True),  # 50 characters, 5 different: the least Django's W009 accepts
        ("a1b2c" * 10 + "d", True),
        (("a1b2c" * 10)[:49], False),  # one short
        ("a1b2" * 12 + "a1", False),  # 50 characters, 4 different
        ("django-insecure-" + "a1b2c" * 10, False),
        (DEVELOPMENT_SECRET_KEY, False),  # Django's W009 lets it through; the console does not
    ],
)
def test_production_keys_follow_djangos_w009_rule_at_its_boundaries(key, passes):
    environ = {**PRODUCTION, "DJANGO_SECRET_KEY": key}
    if passes:
        assert console_environment(environ).secret_key == key
        assert passes_djangos_w009(key)
    else:
        assert "DJANGO_SECRET_KEY" in refusal(environ)


def test_an_unknown_or_empty_console_env_is_refused():
    assert "CONSOLE_ENV must be development or production (got 'prod')" in refusal({"CONSOLE_ENV": "prod"})
    assert "(got '')" in refusal({"CONSOLE_ENV": ""})


@pytest.mark.parametrize("ending", ["\n", "\r\n", ""])
def test_the_secret_key_may_come_from_a_file_without_its_trailing_newline(tmp_path, ending):
    key_file = tmp_path / "secret_key"
    key_file.write_bytes((SECRET_KEY + ending).encode())
    environ = {**PRODUCTION, "DJANGO_SECRET_KEY": "", "DJANGO_SECRET_KEY_FILE": str(key_file)}
    assert console_environment(environ).secret_key == SECRET_KEY


def test_the_audit_keys_and_fallbacks_may_come_from_files_too(tmp_path):
    (tmp_path / "audit").write_text(AUDIT_KEYS + "\n")
    (tmp_path / "fallbacks").write_text(SECRET_KEY[::-1] + "\n")
    environ = {
        **PRODUCTION,
        "CONSOLE_AUDIT_KEYS": "",
        "CONSOLE_AUDIT_KEYS_FILE": str(tmp_path / "audit"),
        "DJANGO_SECRET_KEY_FALLBACKS_FILE": str(tmp_path / "fallbacks"),
    }
    environment = console_environment(environ)
    assert environment.audit_keys[2] == AUDIT_KEYS[2:].encode()
    assert environment.secret_key_fallbacks == [SECRET_KEY[::-1]]


def test_a_key_file_that_cannot_be_used_is_refused_naming_it(tmp_path):
    (tmp_path / "empty").write_text("\n")
    both = refusal({**PRODUCTION, "DJANGO_SECRET_KEY_FILE": str(tmp_path / "empty")})
    assert "DJANGO_SECRET_KEY and DJANGO_SECRET_KEY_FILE are both set: keep one of them." in both
    empty = refusal({**PRODUCTION, "DJANGO_SECRET_KEY": "", "DJANGO_SECRET_KEY_FILE": str(tmp_path / "empty")})
    assert f"DJANGO_SECRET_KEY_FILE names {tmp_path / 'empty'}, which is empty." in empty
    missing = refusal({**PRODUCTION, "DJANGO_SECRET_KEY": "", "DJANGO_SECRET_KEY_FILE": str(tmp_path / "nope")})
    assert f"DJANGO_SECRET_KEY_FILE names {tmp_path / 'nope'}, which cannot be read (No such file" in missing
    # In development too: a file named and unusable is a mistake, not a reason to fall back to the public key.
    assert "which cannot be read" in refusal({"DJANGO_SECRET_KEY_FILE": str(tmp_path / "nope")})


def test_production_is_https_only_with_hsts_and_a_shift_long_session():
    environment = console_environment(PRODUCTION)
    assert environment.production and environment.debug is False
    assert environment.allowed_hosts == ["console.example.com"]
    assert (environment.hsts_seconds, environment.hsts_include_subdomains, environment.hsts_preload) == (
        31_536_000,
        True,
        True,
    )
    assert environment.ssl_redirect is True
    assert environment.proxy_tls is False  # only when the operator says a proxy terminates TLS
    assert environment.session_seconds == 12 * 3600
    assert environment.audit_keys[2] == AUDIT_KEYS[2:].encode()


def test_production_options_are_read_from_the_environment():
    environment = console_environment(
        {
            **PRODUCTION,
            "CONSOLE_HSTS_SECONDS": "3600",
            "CONSOLE_HSTS_INCLUDE_SUBDOMAINS": "0",
            "CONSOLE_HSTS_PRELOAD": "0",
            "CONSOLE_SSL_REDIRECT": "0",
            "CONSOLE_PROXY_TLS": "1",
            "CONSOLE_SESSION_HOURS": "0.5",
            "DJANGO_SECRET_KEY_FALLBACKS": f"{SECRET_KEY[::-1]}, {SECRET_KEY.upper()}",
            "DJANGO_DEBUG": "0",
        }
    )
    assert (environment.hsts_seconds, environment.hsts_include_subdomains, environment.hsts_preload) == (
        3600,
        False,
        False,
    )
    assert (environment.ssl_redirect, environment.proxy_tls, environment.session_seconds) == (False, True, 1800)
    assert environment.secret_key_fallbacks == [SECRET_KEY[::-1], SECRET_KEY.upper()]


def test_production_holds_only_the_audit_keys_it_names_none_derived_from_the_secret_key():
    # A derived version 1 would let whoever holds DJANGO_SECRET_KEY re-seal a rewritten trail.
    assert console_environment(PRODUCTION).audit_keys == {2: b"audit-secret-for-production-00000001"}
    named = console_environment({**PRODUCTION, "CONSOLE_AUDIT_KEYS": "1:" + "a" * 32 + "," + AUDIT_KEYS})
    assert named.audit_keys == {1: b"a" * 32, 2: b"audit-secret-for-production-00000001"}


def test_a_malformed_audit_key_is_named_by_its_position_never_by_its_content():
    message = refusal({**PRODUCTION, "CONSOLE_AUDIT_KEYS": AUDIT_KEYS + ",the-secret-itself-without-a-version"})
    assert "entry 2 is not" in message
    assert "the-secret" not in message


# -- CONSOLE_SIGNING_KEY_FILE: the Ed25519 key answers are signed with (docs/signing.md) ------------------------

HOW_TO_MAKE_ONE = "make one with `python manage.py new_signing_key <path>`"


def pem(key, password=None):
    from cryptography.hazmat.primitives import serialization

    encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def test_production_reads_its_signing_key_file():
    environment = console_environment(PRODUCTION)
    assert environment.signing_key_file == production_signing_key_file()
    assert console_environment({}).signing_key_file == ""  # development: var/signing-key.pem, made once


def test_production_without_a_signing_key_file_is_refused_saying_how_to_make_one():
    message = refusal({**PRODUCTION, "CONSOLE_SIGNING_KEY_FILE": ""})
    assert "CONSOLE_SIGNING_KEY_FILE is not set" in message
    assert HOW_TO_MAKE_ONE in message and "openssl genpkey -algorithm ed25519 -out <path>" in message
    assert message.count("\n  - ") == 1


def unusable_key_files(tmp_path):
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    files = {
        "missing": (tmp_path / "nope.pem", "which cannot be read (No such file or directory)"),
        "not PEM": (tmp_path / "text.pem", "which is not an unencrypted PEM private key"),
        "empty": (tmp_path / "empty.pem", "which is not an unencrypted PEM private key"),
        "encrypted": (tmp_path / "encrypted.pem", "which is not an unencrypted PEM private key"),
        "public half": (tmp_path / "public.pem", "which is not an unencrypted PEM private key"),
        "RSA": (tmp_path / "rsa.pem", "which holds an RSA key, not Ed25519; the console signs with Ed25519"),
        "P-256": (tmp_path / "ec.pem", "which holds an EC key, not Ed25519"),
    }
    files["not PEM"][0].write_text("2:" + "audit-secret-for-production-00000001\n")
    files["empty"][0].write_bytes(b"")
    files["encrypted"][0].write_bytes(pem(Ed25519PrivateKey.generate(), b"a passphrase"))
    from cryptography.hazmat.primitives import serialization

    public = Ed25519PrivateKey.generate().public_key()
    files["public half"][0].write_bytes(
        public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    files["RSA"][0].write_bytes(pem(rsa.generate_private_key(public_exponent=65537, key_size=2048)))
    files["P-256"][0].write_bytes(pem(ec.generate_private_key(ec.SECP256R1())))
    return files


@pytest.mark.parametrize("environ", [PRODUCTION, {}], ids=["production", "development"])
def test_an_unusable_signing_key_file_is_refused_naming_it_and_how_to_make_one(tmp_path, environ):
    for name, (path, says) in unusable_key_files(tmp_path).items():
        message = refusal({**environ, "CONSOLE_SIGNING_KEY_FILE": str(path)})
        assert f"CONSOLE_SIGNING_KEY_FILE names {path}, {says}" in message, name
        assert HOW_TO_MAKE_ONE in message, name
        assert message.count("\n  - ") == 1, name
        assert "PRIVATE KEY" not in message, name  # never the file's contents


def test_an_unreadable_signing_key_file_stops_the_console_at_start_up(tmp_path):
    path = tmp_path / "signing-key.pem"
    path.write_text("not a key\n")
    env = console_env(tmp_path / "unused.sqlite3", CONSOLE_SIGNING_KEY_FILE=str(path))
    with pytest.raises(RuntimeError, match=rf"CONSOLE_SIGNING_KEY_FILE names {path}, which is not an unencrypted PEM"):
        manage(env, "check")

"""Replaces channels_redis' connection pool, which raises "Too many connections" past its limit, with
one that waits for a free connection, so a burst of sockets joining or leaving queues instead of
failing. Kept apart from channel_layer.py so the embedded default never imports redis."""

from channels_redis.core import RedisChannelLayer
from redis.asyncio import BlockingConnectionPool


class WaitingPoolRedisChannelLayer(RedisChannelLayer):
    """channels_redis' layer, its ``hosts`` dicts given to redis-py's ``BlockingConnectionPool``.

    A command that finds every connection busy waits up to the pool's ``timeout`` for one,
    then raises ``ConnectionError("No connection available.")``. Only ``address`` hosts
    (the URL form deployment.channel_layers writes) are supported.
    """

    def create_pool(self, index):
        host = dict(self.hosts[index])
        return BlockingConnectionPool.from_url(host.pop("address"), **host)

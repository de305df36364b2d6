"""The Redis channel layer: channels_redis' own, on a pool that waits for a free connection.

channels_redis builds a plain ``redis.asyncio.ConnectionPool`` per host, which raises
"Too many connections" past its ``max_connections`` (100): 100 dashboards closing at once
took them all for their group discards, and the sockets opening meanwhile got HTTP 500.
Kept apart from channel_layer.py so the embedded default never imports redis.
"""
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

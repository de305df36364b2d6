"""Replaces channels_redis' connection pool, which raises "Too many connections" past its limit, with
one that waits for a free connection, so a burst of sockets joining or leaving queues instead of
failing; and lets a console take a dead one's channels out of every group. Kept apart from
channel_layer.py so the embedded default never imports redis."""

from channels_redis.core import RedisChannelLayer
from redis.asyncio import BlockingConnectionPool


class WaitingPoolRedisChannelLayer(RedisChannelLayer):
    """channels_redis' layer, its ``hosts`` dicts given to redis-py's ``BlockingConnectionPool``.

    A command that finds every connection busy waits up to the pool's ``timeout`` for one,
    then raises ``ConnectionError("No connection available.")``. Only ``address`` hosts
    (the URL form deployment.channel_layers writes) are supported.

    Every channel this process makes is named ``specific.<client_prefix>!<random>``. A console
    process records its prefix under its process id (``register_process``); when another declares
    it dead, ``discard_process`` takes each of its channels out of every group, so no event is sent
    to a channel nobody reads until channels_redis' ``group_expiry`` (a day) drops it.
    """

    def create_pool(self, index: int) -> BlockingConnectionPool:
        host = dict(self.hosts[index])
        return BlockingConnectionPool.from_url(host.pop("address"), **host)

    def _processes_key(self) -> str:
        return f"{self.prefix}:console-processes"

    async def register_process(self, process_id: str) -> None:
        """Record that ``process_id``'s channels are this layer's (once per join: Redis may have restarted)."""
        await self.connection(0).hset(self._processes_key(), process_id, self.client_prefix)

    async def discard_process(self, process_id: str) -> int:
        """Take every channel of the dead ``process_id`` out of every group; returns how many memberships went."""
        client_prefix = await self.connection(0).hget(self._processes_key(), process_id)
        if client_prefix is None:
            return 0
        pattern = f"specific.{client_prefix.decode()}!*"
        removed = 0
        for index in range(self.ring_size):
            connection = self.connection(index)
            async for group_key in connection.scan_iter(match=f"{self.prefix}:group:*", _type="zset"):
                members = [member async for member, _score in connection.zscan_iter(group_key, match=pattern)]
                if members:
                    removed += await connection.zrem(group_key, *members)
        await self.connection(0).hdel(self._processes_key(), process_id)
        return removed

"""Replaces the garbage collector's full collections walking what start-up built (modules, settings, views,
tools): they live as long as the process, and each walk stops the event loop, so once the supervisor runs
they are frozen out of its reach. Measurements: docs/performance.md."""

import gc

from django.urls import get_resolver


def freeze_start_up_objects() -> int:
    """Put what start-up built (modules, settings, views, tools) out of the garbage collector's reach.

    Frozen after a collection, so no garbage is frozen with them. Returns how many objects are frozen.
    """
    get_resolver().url_patterns  # noqa: B018 (imports every view now, so their modules are frozen too)
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()

"""The one cache policy of gamma's modules.

A module-level cache maps the text of an input (a name, a timestamp, a derivation) to what a
pure function makes of it, so a value repeated across a log is worked out once. Every such
cache is a plain dict read inline on the hot path (one lookup, no call) and filled through
``remember``, which empties it whole once it holds ``CACHE_SIZE`` entries: memory stays
bounded whatever the log, no entry outlives its usefulness by more than one fill, and what a
cache returns never depends on what it held before (same input, same output). Caches kept
on an object (a policy's ranks, a resolution's views) live and die with that object.
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["CACHE_SIZE", "remember"]

CACHE_SIZE = 65536
"""Entries a module-level cache holds before it is emptied."""

_CacheKey = TypeVar("_CacheKey")
_CachedValue = TypeVar("_CachedValue")


def remember(cache: dict[_CacheKey, _CachedValue], key: _CacheKey, value: _CachedValue) -> _CachedValue:
    """Put ``value`` in ``cache`` under ``key`` (emptying a full cache first) and return it."""
    if len(cache) >= CACHE_SIZE:
        cache.clear()
    cache[key] = value
    return value

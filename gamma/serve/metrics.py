"""Prometheus metrics of one worker: requests, latency, decisions by outcome, log position.

Each worker keeps its own registry (no shared multiprocess directory): a scrape of
``/metrics`` reads the worker that answered it, and every series carries no
worker label, so a scraper that wants totals over ``--workers N`` sums the
workers' scrapes (or runs one worker per port). Route labels are the route's
template (``/v1/resolve``), never the raw path, so a probe cannot grow the series.
"""

from __future__ import annotations

import attrs
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

__all__ = ["Metrics", "CONTENT_TYPE"]

CONTENT_TYPE = CONTENT_TYPE_LATEST

#: Latency buckets in seconds: fine below 10 ms, where the decision endpoints live.
_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@attrs.frozen
class Metrics:
    """The series of one worker, in their own registry."""

    registry: CollectorRegistry
    requests: Counter
    latency: Histogram
    decisions: Counter
    position: Gauge
    #: the children of each (route, status) and (endpoint, outcome) seen: routes and outcomes
    #: are a fixed few (route labels are templates), so these stay small
    children: dict[tuple[str, int], tuple[Counter, Histogram]] = attrs.field(factory=dict)
    counted: dict[tuple[str, str], Counter] = attrs.field(factory=dict)

    @classmethod
    def new(cls) -> Metrics:
        registry = CollectorRegistry(auto_describe=True)
        return cls(
            registry=registry,
            requests=Counter("gamma_serve_requests", "HTTP requests answered, by route and status",
                             ("route", "status"), registry=registry),
            latency=Histogram("gamma_serve_request_seconds", "Time to answer a request, by route",
                              ("route",), buckets=_BUCKETS, registry=registry),
            decisions=Counter("gamma_serve_decisions", "Decisions and writes logged, by endpoint"
                              " and outcome", ("endpoint", "outcome"), registry=registry),
            position=Gauge("gamma_serve_log_position", "Events this worker has read from the store",
                           registry=registry),
        )

    def observe(self, route: str, status: int, seconds: float) -> None:
        key = (route, status)
        children = self.children.get(key)
        if children is None:  # a series' children looked up once (labels() costs a lock each)
            children = self.children[key] = (self.requests.labels(route=route, status=str(status)),
                                             self.latency.labels(route=route))
        counter, histogram = children
        counter.inc()
        histogram.observe(seconds)

    def decided(self, endpoint: str, outcome: str) -> None:
        key = (endpoint, outcome)
        counter = self.counted.get(key)
        if counter is None:
            counter = self.counted[key] = self.decisions.labels(endpoint=endpoint, outcome=outcome)
        counter.inc()

    def render(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)

"""Hypothesis settings profiles, chosen by the HYPOTHESIS_PROFILE environment variable.

- ``dev`` (the default when unset): a quick local run, well under a minute for the
  property, differential and stateful suites together.
- ``ci``: what ``.ci/run`` uses. At least 200 examples per property, derandomized (the same
  examples on every run and machine, so a red build is reproducible and a green one is not
  luck), no example database (a fresh clone has none anyway) and no deadline: a deadline
  measures wall time, which on a shared two-core runner is noise, not signal. (500 took the
  whole run to 27 minutes on two cores, past its 30-minute budget's margin; the nightly
  ``thorough`` profile is where the search goes wide.)
- ``thorough``: a nightly run of 10,000 examples per property, randomized, so every night
  explores new logs; failures land in the local example database and replay first.

``too_slow`` is suppressed in ``ci`` and ``thorough`` only: one generated example is a whole
governed log (tens of draws, then parsing and validation), and a loaded runner must not turn
that into a failure. ``dev`` keeps every health check, so a strategy that becomes slow is
noticed where it is written.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
import structlog
from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=30, deadline=None)
settings.register_profile(
    "ci",
    max_examples=200,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=10_000,
    deadline=None,
    stateful_step_count=100,
    suppress_health_check=[HealthCheck.too_slow],
)

_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
if _PROFILE not in ("dev", "ci", "thorough"):
    raise RuntimeError(
        f"HYPOTHESIS_PROFILE={_PROFILE!r} is not a profile of this suite (dev, ci, thorough)"
    )
settings.load_profile(_PROFILE)


@pytest.fixture(autouse=True)
def _structlog_forgets_the_streams() -> Iterator[None]:
    """``gamma.cli.main`` run in-process configures structlog with the stderr of that moment
    (a capture that is closed when the test ends): a later test's command would write there."""
    yield
    structlog.reset_defaults()

"""One root exception so hosts can catch everything the suite raises in one place.

Library code raises these; only the CLI turns them into messages and exit codes. An
argument of the wrong type raises ``TypeError``, as Python's own functions do: that is a
bug in the caller, not a condition to handle.
"""

from __future__ import annotations


class CorevoObsError(Exception):
    """Root of every error the suite raises on purpose."""

    exit_code: int = 2


class ConfigError(CorevoObsError, ValueError):
    """A configuration value is missing or wrong; ``source`` says where it came from.

    A ``ValueError`` too: a bad argument to a constructor is one, and callers catch it so.
    """

    def __init__(self, message: str, *, source: str | None = None) -> None:
        self.source = source
        super().__init__(f"{source}: {message}" if source else message)


class MetricsDirError(ConfigError):
    """The multiprocess metrics directory cannot be used (missing, not a dir, unwritable)."""

    def __init__(self, message: str, *, path: str) -> None:
        self.path = path
        super().__init__(message, source="PROMETHEUS_MULTIPROC_DIR")


class MetricsPortBusy(ConfigError, RuntimeError):
    """The metrics endpoint's port is taken (another app's endpoint on this host, most
    often: two apps on the default 9430). Serving elsewhere instead would let Prometheus
    scrape the other app's series under this target, so the start ends here, with one
    line naming the port and the setting to change. Also a ``RuntimeError``: gunicorn
    prints one raised from its start (``when_ready``) as a single ``Error:`` line and
    exits 1, no traceback.
    """

    def __init__(self, host: str, port: int, setting: str) -> None:
        self.host, self.port, self.setting = host, port, setting
        super().__init__(f"port {port} on {host} is already in use (another app's metrics "
                         f"endpoint?); choose another port with {setting}",
                         source="metrics endpoint")


class CatalogError(CorevoObsError, ValueError):
    """A metric name, kind or label set does not match the catalog."""


class LeaseLost(CorevoObsError):
    """A lease ended while its work ran: renewal said lost, or could not be confirmed
    before the lease would expire (``reason``: ``"lost"`` or ``"unconfirmed"``).
    """

    def __init__(self, quota: str, holder: str, reason: str) -> None:
        self.quota, self.holder, self.reason = quota, holder, reason
        super().__init__(f"lease {quota} {holder}: {reason}")


class LeaseRejected(CorevoObsError):
    """No lease within the wait: the quota was full, fenced after a restart, or the
    backend failed (``outcome``: the last acquire's outcome).
    """

    def __init__(self, quota: str, outcome: str, waited: float) -> None:
        self.quota, self.outcome, self.waited = quota, outcome, waited
        super().__init__(f"no lease on {quota} within {waited:.1f}s (last: {outcome})")


class BackendUnavailable(CorevoObsError):
    """A store's server did not answer within its configured bound: down, stopped, cut off.

    Raised instead of a hang. ``waited`` is the time spent, ``bound`` the configured limit
    that ended the wait (None when it failed at once). ``maybe_committed`` means the
    statement reached the server before the connection died, so it may have been applied:
    only reading the row back decides (the job store does that for its own writes).
    """

    def __init__(self, message: str, *, backend: str, waited: float,
                 bound: float | None = None, maybe_committed: bool = False) -> None:
        self.backend, self.waited, self.bound = backend, waited, bound
        self.maybe_committed = maybe_committed
        super().__init__(f"{backend} unavailable after {waited:.2f}s: {message}")

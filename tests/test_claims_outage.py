"""A finish the database never took is counted (``corevo_job_finish_errors_total``) and
its job stays ``running`` (CorevoJobsStuckRunning reads the jobs table): a private
PostgreSQL behind a proxy that loses the finish's reply and then refuses every
connection."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from corevo_obs.claims import PostgresJobStore
from corevo_obs.core.errors import BackendUnavailable
from tests.helpers.pg_cluster import PgCluster, running_cluster
from tests.helpers.pg_proxy import PgProxy

pytestmark = pytest.mark.system

FAST: dict[str, Any] = {"statement_timeout": 1.0, "pool_timeout": 1.0, "connect_timeout": 2,
                         "reconnect_timeout": 1.0}


@pytest.fixture(scope="module")
def cluster() -> Iterator[PgCluster]:
    with running_cluster() as c:
        yield c


def test_a_finish_the_database_never_took_is_counted(cluster: PgCluster) -> None:
    reg = CollectorRegistry()
    proxy = PgProxy(cluster.port)
    table = f"jobs_{uuid.uuid4().hex[:8]}"
    store = PostgresJobStore(proxy.dsn(), table=table, worker="w3", registry=reg, **FAST)
    direct = PostgresJobStore(f"postgresql://postgres@127.0.0.1:{cluster.port}/postgres",
                              table=table, worker="w9", registry=CollectorRegistry(), **FAST)
    try:
        errors = {"worker": "w3"}
        assert reg.get_sample_value("corevo_job_finish_errors_total", errors) == 0.0
        claim = store.claim(store.create_job()).claim
        assert claim is not None and store.start(claim, "e1").started
        # the finish's UPDATE is sent, its reply lost, and the read-back refused
        proxy.cut_reply_to(b"finished_at", then_refuse=True)
        with pytest.raises(BackendUnavailable):
            store.finish(claim, "e1", "completed")
        assert reg.get_sample_value("corevo_job_finish_errors_total", errors) == 1.0
        db_errors = reg.get_sample_value("corevo_instrumentation_errors_total",
                                         {"worker": "w3", "component": "claims-db"})
        assert db_errors is not None and db_errors >= 1.0
        assert reg.get_sample_value("corevo_job_terminal_total",
                                    {"worker": "w3", "state": "completed"}) == 0.0
        row = direct.get(claim.job_id)  # the store cannot tell; the database can
        assert row is not None
    finally:
        store.close()
        direct.close()
        proxy.close()

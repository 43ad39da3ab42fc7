from __future__ import annotations

import pytest

from corevo_obs.core.catalog import CATALOG, MetricSpec, sample_name_index, spec
from corevo_obs.core.errors import CatalogError
from corevo_obs.core.metrics import child, metric


def test_every_spec_builds_in_a_fresh_registry(registry):
    for name, s in CATALOG.items():
        m = metric(name, registry)
        assert metric(name, registry) is m  # built once per registry
        assert m._type == ("histogram" if s.kind == "histogram" else s.kind)


def test_per_process_metrics_carry_worker_label():
    for s in CATALOG.values():
        if s.group in {"loop", "stages", "offload", "claims", "events", "cancel"}:
            assert "worker" in s.labels, s.name
        for forbidden in ("job_id", "task_id", "user_id", "execution_id"):
            assert forbidden not in s.labels


def test_design_lag_buckets():
    assert spec("corevo_event_loop_lag_seconds").buckets == (
        0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    )


def test_unknown_metric_is_an_error(registry):
    with pytest.raises(CatalogError, match="not in the catalog"):
        metric("corevo_nope_total", registry)


def test_child_checks_labels_and_enumerations(registry):
    with pytest.raises(CatalogError, match="takes labels"):
        child("corevo_lease_acquire_total", registry, worker="w0")
    with pytest.raises(CatalogError, match="not one of"):
        child("corevo_lease_acquire_total", registry, worker="w0", quota="q", outcome="maybe")
    child("corevo_lease_acquire_total", registry, worker="w0", quota="q", outcome="granted").inc()
    assert registry.get_sample_value(
        "corevo_lease_acquire_total", {"worker": "w0", "quota": "q", "outcome": "granted"}
    ) == 1.0


def test_spec_validation():
    with pytest.raises(ValueError, match="_total"):
        MetricSpec("corevo_x", "counter", "h", "g")
    with pytest.raises(ValueError, match="buckets"):
        MetricSpec("corevo_x_seconds", "histogram", "h", "g")
    with pytest.raises(ValueError, match="start with"):
        MetricSpec("x_total", "counter", "h", "g")


def test_sample_name_index_covers_histogram_suffixes():
    idx = sample_name_index()
    assert idx["corevo_event_loop_lag_seconds_bucket"].name == "corevo_event_loop_lag_seconds"
    assert "corevo_event_loop_stalls_total" in idx


def test_docs_metric_page_is_generated_from_the_catalog():
    from pathlib import Path

    from corevo_obs.cli.catalog_cmd import render_page

    page = (Path(__file__).parent.parent / "docs" / "metrics.md").read_text()
    assert page == render_page(), "stale: corevo-obs catalog --output docs/metrics.md"

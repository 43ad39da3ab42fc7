"""Grafana dashboards generated from the metric catalog.

``promql`` builds queries (no dependencies); ``panels`` turns them into grafanalib panels
(the ``dashboards`` extra); ``build`` renders ``dashboards/*.dashboard.py`` to JSON.
"""

from .build import Rendered, load_json, panel_queries, render_all, sources

__all__ = ["Rendered", "load_json", "panel_queries", "render_all", "sources"]

"""An OTLP/HTTP metrics receiver for tests: decodes each ``ExportMetricsServiceRequest``
(opentelemetry-proto) and keeps, per exporting process (``service.instance.id``), the
latest cumulative value of every point, and every exemplar seen."""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)

Key = tuple[str, str, frozenset[tuple[str, str]]]  # instance, metric, attributes


def _value(v: Any) -> Any:
    return getattr(v, v.WhichOneof("value")) if v.WhichOneof("value") else None


@dataclass
class Exemplar:
    instance: str
    metric: str
    attributes: dict[str, str]
    value: float
    trace_id: str
    span_id: str


@dataclass
class OtlpState:
    points: dict[Key, float] = field(default_factory=dict)
    resources: dict[str, dict[str, Any]] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    exemplars: list[Exemplar] = field(default_factory=list)
    requests: int = 0

    def total(self, metric: str, **attrs: str) -> float:
        """Sum over processes and attribute sets (those including ``attrs``)."""
        want = set(attrs.items())
        return sum(v for (_, m, a), v in self.points.items() if m == metric and want <= a)

    def by_instance(self, metric: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for (inst, m, _), v in self.points.items():
            if m == metric:
                out[inst] = out.get(inst, 0.0) + v
        return out


class OtlpReceiver:
    """``with OtlpReceiver() as r``: ``r.endpoint`` takes exports; ``r.snapshot()``."""

    def __init__(self) -> None:
        self._state = OtlpState()
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportMetricsServiceRequest()
                request.ParseFromString(body)
                receiver._take(request)
                reply = ExportMetricsServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_port}/v1/metrics"

    def _take(self, request: ExportMetricsServiceRequest) -> None:
        with self._lock:
            self._state.requests += 1
            for rm in request.resource_metrics:
                res = {a.key: _value(a.value) for a in rm.resource.attributes}
                inst = str(res["service.instance.id"])
                self._state.resources[inst] = res
                for sm in rm.scope_metrics:
                    for m in sm.metrics:
                        self._state.units[m.name] = m.unit
                        kind = m.WhichOneof("data")
                        for p in getattr(m, kind).data_points:
                            attrs = {a.key: str(_value(a.value)) for a in p.attributes}
                            key = (inst, m.name, frozenset(attrs.items()))
                            self._state.points[key] = float(
                                p.count if kind == "histogram" else
                                (p.as_double if p.WhichOneof("value") == "as_double"
                                 else p.as_int))
                            for e in getattr(p, "exemplars", ()):
                                self._state.exemplars.append(Exemplar(
                                    inst, m.name, attrs, e.as_double, e.trace_id.hex(),
                                    e.span_id.hex()))

    def snapshot(self) -> OtlpState:
        with self._lock:
            s = self._state
            return OtlpState(dict(s.points), dict(s.resources), dict(s.units),
                             list(s.exemplars), s.requests)

    def __enter__(self) -> OtlpReceiver:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

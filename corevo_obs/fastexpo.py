"""The ``/metrics`` response, with each series' text before its value made once per format.

prometheus_client's encoders sort, escape and format every label set of every sample
on every scrape; for a host aggregate of a few thousand series that was most of a
scrape's time. Here the line prefix of a series (``name{labels} ``, as the chosen format
writes it) is kept per format and per family; a scrape joins prefixes and formatted
values. The prefixes are made by prometheus_client's own encoder (its escaping, its
OpenMetrics names), so the text is its text: ``LineCache.render`` returns what the encoder
returns for the same registry, byte for byte (tested). Families that are not the merged
``Family`` rows (a health gauge, the master's kill counter) go through the encoder as
they are.

Requests are handled as ``prometheus_client.make_wsgi_app`` does (content negotiation,
gzip, ``OPTIONS``, ``name[]`` filtering, which takes its slow path).
"""

from __future__ import annotations

import gzip
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qs

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.metrics_core import Metric

from .mpdir.aggregate import Family, Labels, go_float

Encoder = Callable[[Any], bytes]
_EOF: Final = "# EOF\n"
#: prefixes kept for series no longer served, beyond those served, before a fresh start
_SPARE: Final = 1024
#: gzip level: 1 compresses this text about as well as 9 (repeated prefixes), in a
#: fraction of the time; prometheus_client's default is 9
GZIP_LEVEL: Final = 1


class _Values(dict[float, str]):
    """Formatted values, each formatted once: counts repeat (0.0, 1.0, ...) a lot."""

    def __missing__(self, value: float) -> str:
        if len(self) > _MAX_VALUES:
            self.clear()
        text = self[value] = go_float(value)
        return text


#: only sums of counts go through ``_Values``: a gauge may be -0.0, which as a key is 0.0
_MEMO_TYPES: Final = frozenset({"counter", "histogram", "summary"})
_MAX_VALUES: Final = 1 << 16


class _One:
    """A registry of one metric, for an encoder."""

    def __init__(self, metric: Metric) -> None:
        self._metric = metric

    def collect(self) -> Iterator[Metric]:
        yield self._metric


@dataclass(frozen=True)
class _Lines:
    header: str
    prefixes: dict[tuple[str, Labels], str]


def _encode(encoder: Encoder, metric: Metric) -> str:
    text = encoder(_One(metric)).decode("utf-8")
    return text[:-len(_EOF)] if text.endswith(_EOF) else text


class LineCache:
    """Line prefixes per (format, family), for one endpoint.

    Example::

        encoder, content_type = choose_encoder(accept_header)
        body = cache.render(registry.collect(), encoder, content_type)
    """

    def __init__(self) -> None:
        self._by_format: dict[str, dict[tuple[str, str, str], _Lines]] = {}
        self._values = _Values()

    def render(self, metrics: Iterable[Metric], encoder: Encoder, fmt: str) -> bytes:
        """What ``encoder`` makes of ``metrics`` (``fmt`` names the format: its cache)."""
        cache = self._by_format.setdefault(fmt, {})
        out: list[str] = []
        for metric in metrics:
            if isinstance(metric, Family):
                out += self._family(cache, metric, encoder)
            else:
                out.append(_encode(encoder, metric))
        if fmt.startswith("application/openmetrics-text"):
            out.append(_EOF)
        return "".join(out).encode("utf-8")

    def _family(self, cache: dict[tuple[str, str, str], _Lines], family: Family,
                encoder: Encoder) -> list[str]:
        ident = (family.name, family.documentation, family.type)
        lines = cache.get(ident)
        for _ in range(2):
            if lines is not None:
                prefixes = lines.prefixes
                try:
                    if family.type in _MEMO_TYPES:
                        values = self._values
                        body = [f"{prefixes[n, labels]}{values[v]}\n"
                                for n, labels, v in family.rows]
                    else:
                        body = [f"{prefixes[n, labels]}{go_float(v)}\n"
                                for n, labels, v in family.rows]
                except KeyError:  # a series not seen before in this format
                    pass
                else:
                    return [lines.header, *body]
            lines = self._prefixes(family, lines, encoder)
            if lines is None:
                break
            cache[ident] = lines
        return [_encode(encoder, family)]

    @staticmethod
    def _prefixes(family: Family, known: _Lines | None, encoder: Encoder) -> _Lines | None:
        """Prefixes of ``family``'s series (and of those ``known`` had, unless too many
        are gone), from one run of the encoder; None when its lines cannot be matched
        to the series one by one (then the family is encoded as it is)."""
        keys = [(n, labels) for n, labels, _ in family.rows]
        if known is not None and len(known.prefixes) < 2 * len(keys) + _SPARE:
            keys = list(dict.fromkeys([*known.prefixes, *keys]))
        probe = Metric(family.name, family.documentation, family.type)
        for n, labels in keys:
            probe.add_sample(n, dict(labels), 0.0)
        lines = _encode(encoder, probe).splitlines(keepends=True)
        header = [line for line in lines if line.startswith("#")]
        body = lines[len(header):]
        if len(body) != len(keys) or any(line.startswith("#") for line in body) \
                or "".join(header) != "".join(lines[:len(header)]):
            return None  # e.g. ``_created`` lines moved to a family of their own
        return _Lines("".join(header), {
            key: line[:line.rindex(" ") + 1] for key, line in zip(keys, body, strict=True)
        })


def make_app(registry: CollectorRegistry) -> Callable[..., list[bytes]]:
    """``prometheus_client.make_wsgi_app(registry)``, formatting through a ``LineCache``."""
    cache = LineCache()
    slow = make_wsgi_app(registry)

    def metrics_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        params = parse_qs(environ.get("QUERY_STRING", ""))
        if environ["REQUEST_METHOD"] != "GET" or environ.get("PATH_INFO") == "/favicon.ico" \
                or "name[]" in params:
            return list(slow(environ, start_response))
        encoder, content_type = choose_encoder(environ.get("HTTP_ACCEPT") or "")
        output = cache.render(registry.collect(), encoder, content_type)
        headers = [("Content-Type", content_type)]
        if gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING") or ""):
            output = gzip.compress(output, compresslevel=GZIP_LEVEL)
            headers.append(("Content-Encoding", "gzip"))
        start_response("200 OK", headers)
        return [output]

    return metrics_app

"""The user documentation as a site (mkdocs.yml, the ``docs`` extra).

``mkdocs build --strict`` must finish with no warning: a broken link or anchor, a page
left out of the nav and a docstring mkdocstrings cannot render all fail it. The reference
pages are generated from the docstrings, of exactly the public names (``__all__``, as
docs/api.md lists them). get-started is then served on loopback and rendered by headless
Chromium: the screenshot is a PNG of the window's size, styled (the theme's header colour
is drawn) and not blank. ``COREVO_DOCS_SCREENSHOT=docs/img/get-started.png`` keeps it
(README.md shows it). Without mkdocs or Chromium the tests skip, and fail in CI
(``COREVO_REQUIRE_SERVERS=1``), as a missing server does.
"""

from __future__ import annotations

import html
import importlib
import importlib.util
import inspect
import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import _need
from tests.helpers.screenshots import rgb_pixels, shoot
from tests.test_api_reference import PUBLIC

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "docs" / "reference"
SIZE = (1280, 900)
HEADER = bytes.fromhex("4051b5")  # Material's default primary colour: the page is styled


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The site built from this checkout; its directory and mkdocs' log."""
    for module in ("mkdocs", "material", "mkdocstrings_handlers.python"):
        if importlib.util.find_spec(module) is None:
            _need(f"{module} not installed (pip install -e '.[docs]')")
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
         str(ROOT / "mkdocs.yml"), "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})  # material's notice, not the docs'
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    return out, log


def _text(page: Path) -> str:
    """The visible text of a built page's article, with no whitespace (markup splits it)."""
    body = page.read_text(encoding="utf-8")
    body = body[body.find("<article"):]
    return "".join(html.unescape(re.sub(r"<[^>]+>", " ", body)).split())


def test_site_builds_with_no_warning(site: tuple[Path, str]) -> None:
    _, log = site
    warnings = [line for line in log.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert warnings == [], "\n".join(warnings)


def test_get_started_comes_first_with_its_title(site: tuple[Path, str]) -> None:
    out, _ = site
    page = (out / "get-started" / "index.html").read_text(encoding="utf-8")
    assert "<title>Get started - corevo-obs</title>" in page
    assert re.search(r"<h1[^>]*>Get started", page), "no Get started heading"
    from mkdocs.config import load_config

    nav = load_config(str(ROOT / "mkdocs.yml")).nav
    assert nav is not None, "mkdocs.yml has no nav"
    assert [next(iter(entry)) for entry in nav] == [
        "Get started", "How-to", "Reference", "Operations"]
    assert nav[0] == {"Get started": "get-started.md"}
    # nothing fetched from elsewhere: the site works offline (theme font: false)
    external = re.findall(r'(?:src|href)="(https?://[^"]+\.(?:css|js)[^"]*)"', page)
    assert external == []


def _reference_pages() -> dict[str, Path]:
    """Public namespace -> the docs/reference page whose ``:::`` directive renders it."""
    found = {}
    for page in sorted(REFERENCE.glob("*.md")):
        for module in re.findall(r"^::: (\S+)$", page.read_text(encoding="utf-8"), re.M):
            found[module] = page
    return found


def test_every_public_namespace_has_a_generated_reference_page() -> None:
    assert set(_reference_pages()) == set(PUBLIC), set(_reference_pages()) ^ set(PUBLIC)


@pytest.mark.parametrize("module", PUBLIC)
def test_reference_shows_exactly_the_public_names(site: tuple[Path, str], module: str) -> None:
    out, _ = site
    page = out / "reference" / _reference_pages()[module].stem / "index.html"
    text = page.read_text(encoding="utf-8")
    public = set(importlib.import_module(module).__all__)
    shown = set(re.findall(rf'id="{re.escape(module)}\.(\w+)"', text))
    assert shown == public, (f"{module}: missing {sorted(public - shown)}, "
                             f"not public {sorted(shown - public)}")


def test_reference_is_generated_from_the_docstrings(site: tuple[Path, str]) -> None:
    """The first line of each root name's docstring is on the root page, as prose."""
    import corevo_obs

    out, _ = site
    text = _text(out / "reference" / "root" / "index.html")
    checked = []
    for name in corevo_obs.__all__:
        first = (inspect.getdoc(getattr(corevo_obs, name)) or "").splitlines()[0]
        plain = first.replace("``", "").replace("`", "")
        if plain and not re.search(r"[*_\[\]<>|\\]", plain):  # no markup to render
            assert "".join(plain.split()) in text, f"{name}: {plain!r} not in the reference"
            checked.append(name)
    assert "Rootofeveryerrorthesuiteraisesonpurpose." in text  # CorevoObsError's
    assert len(checked) >= len(corevo_obs.__all__) // 2, checked


# --- get-started in a real browser --------------------------------------------------
@pytest.fixture
def served(site: tuple[Path, str]) -> Iterator[tuple[str, list[str]]]:
    """The built site over HTTP on a free loopback port; its URL and the paths requested."""
    requested: list[str] = []

    class Handler(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            requested.append(self.path)

    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(site[0])))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", requested
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.mark.timeout(240)
def test_get_started_renders_in_chromium(served: tuple[str, list[str]],
                                         tmp_path: Path) -> None:
    url, requested = served
    png = tmp_path / "get-started.png"
    console = shoot(f"{url}/get-started/", png, tmp_path / "profile", SIZE, timeout=120)
    errors = [line for line in console if "Uncaught" in line]
    assert errors == [], errors
    assert "/get-started/" in requested, requested
    assert any(p.startswith("/assets/stylesheets/main") for p in requested), requested
    w, h, pixels = rgb_pixels(png.read_bytes())
    assert (w, h) == SIZE
    counts: dict[bytes, int] = {}
    for p in pixels:
        counts[p] = counts.get(p, 0) + 1
    assert len(counts) > 50, f"blank screenshot? {len(counts)} colours"
    assert max(counts.values()) < 0.95 * len(pixels), "one colour fills the page"
    assert counts.get(HEADER, 0) > 1280 * 40, "the theme's header is not drawn"
    if os.environ.get("COREVO_DOCS_SCREENSHOT"):
        shutil.copy(png, os.environ["COREVO_DOCS_SCREENSHOT"])

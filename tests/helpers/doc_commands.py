"""Run the shell commands of a docs page as a reader types them, one at a time.

Each command runs in bash in the page's directory with ``set -o pipefail``. A command that
starts a server (``uvicorn``, ``gunicorn``, ``corevo-obs metrics serve``, or one ending in
``&``) is started in the background; the commands after it in the block are retried until
they succeed or 40 s pass (the server starting), and the server is stopped at the end of
the block. ``# exit N`` in a command's comment is the exit code it must end with.

What is not run, and why, is decided here in one table (``_not_run``) and reported: package
installs are checked against pyproject's extras instead (they would reach the network),
and commands that another test already runs in full say which.

The only rewrites: state paths under ``/run/`` and ``/var/lib/`` go under the page's
directory, and ``redis://127.0.0.1:6379/0`` is the test's private redis-server.
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import signal
import subprocess
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.doc_pages import ROOT

_COMMENT = re.compile(r"\s+#\s.*$")
_EXIT = re.compile(r"#\s*exit\s+(\d+)\s*$")
_ENV = re.compile(r"^[A-Z_][A-Z0-9_]*=\S*$")
SERVERS = ("uvicorn", "gunicorn")


@dataclass
class Tally:
    """What a page's commands did: run, checked without running (with the reason)."""

    run: list[str] = field(default_factory=list)
    checked: list[tuple[str, str]] = field(default_factory=list)


def commands(source: str) -> list[tuple[str, int]]:
    """The block's commands, continuation lines joined, with each one's expected exit."""
    out: list[tuple[str, int]] = []
    pending = ""
    for raw in source.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        if not line.strip():
            continue
        expected = _EXIT.search(line)
        out.append((_COMMENT.sub("", line).strip(), int(expected.group(1)) if expected else 0))
    return out


def _words(command: str) -> list[str]:
    """The program and its arguments, leading ``VAR=value`` assignments dropped."""
    words = shlex.split(command.rstrip("&").split("|")[0].split("&&")[0])
    while words and _ENV.match(words[0]):
        words.pop(0)
    return words


def extras() -> set[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return set(data["project"]["optional-dependencies"])


def check_install(command: str) -> str:
    """A ``pip install`` line names only extras that exist; returns what it installs."""
    for spec in re.findall(r"corevo-obs\[([^\]]*)\]", command):
        unknown = {e.strip() for e in spec.split(",")} - extras()
        assert not unknown, f"{command!r}: unknown extras {sorted(unknown)}"
    return command


def _not_run(words: list[str]) -> str | None:
    """Why a command is checked rather than run, or None to run it."""
    head = " ".join(words[:3])
    if words[:2] == [".", ".ci/services.sh"]:
        return "starts PostgreSQL for a test run: the test run has one (.ci/run)"
    if words[:2] == ["pip", "install"]:
        return "install: extras checked against pyproject.toml"
    if head.startswith("mkdocs serve"):
        return "tests/test_docs_site.py builds the site (mkdocs build --strict)"
    if words[:1] == ["pdoc"]:
        return "tests/test_api_reference.py builds the reference with pdoc"
    if words[:2] == ["corevo-obs", "demo"]:
        return "tests/test_demo.py runs the demo"
    if words[:2] == ["corevo-obs", "loadtest"]:
        return "tests/test_loadtest.py runs the loadtest command on the example app"
    if words[:3] == ["python", "-m", "pytest"]:
        return "collected (--collect-only): the test run itself runs them"
    if words[:1] == ["python"] and len(words) > 1 and words[1].startswith("bench/"):
        return "a benchmark (minutes): its --help runs"
    return None


def _map_paths(command: str, home: Path, redis_url: str | None) -> str:
    command = re.sub(r"(?<![\w./])/(run|var/lib)/", lambda m: f"{home}/{m.group(1)}/", command)
    if redis_url:
        command = command.replace("redis://127.0.0.1:6379/0", redis_url)
    return command


def _is_server(words: list[str], command: str) -> bool:
    return (command.rstrip().endswith("&") or (words[:1] and words[0] in SERVERS)
            or words[:3] == ["corevo-obs", "metrics", "serve"])


def _bash(command: str, cwd: Path, env: dict[str, str],
          timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", f"set -o pipefail\n{command}"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _stop(server: subprocess.Popen[str]) -> str:
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(5)
    return server.stdout.read() if server.stdout else ""


def run_block(source: str, where: str, cwd: Path, env: dict[str, str], tally: Tally,
              redis_url: str | None = None) -> None:
    servers: list[subprocess.Popen[str]] = []
    try:
        for command, expected in commands(source):
            words = _words(command)
            reason = _not_run(words)
            if reason == "install: extras checked against pyproject.toml":
                check_install(command)
            if reason is not None:
                _check_instead(command, cwd, env)
                tally.checked.append((command, reason))
                continue
            mapped = _map_paths(command, cwd, redis_url)
            tally.run.append(command)
            if _is_server(words, command):
                servers.append(subprocess.Popen(
                    ["bash", "-c", mapped.rstrip().rstrip("&")], cwd=cwd, env=env,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                    start_new_session=True))
                continue
            deadline = time.monotonic() + (40 if servers else 0)
            while True:
                done = _bash(mapped, cwd, env, timeout=120)
                if done.returncode == expected or time.monotonic() > deadline:
                    break
                if any(s.poll() is not None for s in servers):
                    break
                time.sleep(0.5)
            said = (f"{where}: `{command}` exited {done.returncode}, expected {expected}\n"
                    f"--- stdout:\n{done.stdout[-3000:]}\n--- stderr:\n{done.stderr[-3000:]}")
            if done.returncode != expected:
                said += "".join(f"\n--- server:\n{_stop(s)[-3000:]}" for s in servers)
            assert done.returncode == expected, said
            if "| grep" in command:
                assert done.stdout.strip(), f"{where}: `{command}` printed nothing"
        for server in servers:  # a server the block only starts must come up and stay up
            if server.poll() is not None:
                raise AssertionError(f"{where}: server exited {server.returncode}\n"
                                     f"{_stop(server)[-3000:]}")
    finally:
        for server in servers:
            _stop(server)


def _check_instead(command: str, cwd: Path, env: dict[str, str]) -> None:
    """The cheap check standing in for a command that is not run."""
    words = _words(command)
    assignments = shlex.join(itertools.takewhile(_ENV.match, shlex.split(command)))
    if words[:3] == ["python", "-m", "pytest"]:
        args = [w for w in words[3:] if not w.startswith("-")]
        done = _bash(shlex.join(["python", "-m", "pytest", "--collect-only", "-q",
                                 "-p", "no:cacheprovider", *args]), cwd, env, 120)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    elif words[:1] == ["python"] and len(words) > 1 and words[1].startswith("bench/"):
        done = _bash(f"{assignments} python {shlex.quote(words[1])} --help", cwd, env, 60)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

"""Write verdicts.json (one verdict per sampled finding, in sample order) from the judgements below.

Judgements are keyed by (tool, relative path, line, col); written before any total was computed.
"""

import json

T, F, CM = "true", "false", "chain-mismatch"
ADEV_CFG = ("Config.__init__ -> Path('.').resolve() (getcwd + realpath lstat walk) and _find_app_path's "
            "resolve/exists/is_file, in an async test run on the test's event loop")
J = {
    # aiohttp-devtools
    ("cob", "aiohttp_devtools/runserver/watch.py", 160, 21): (T, None, "self._process.join(5) after the shutdown URL answered: waits up to 5 s for the dev-server multiprocessing.Process (the message says Thread.join; the object is a Process) inside the coroutine"),
    ("cob", "aiohttp_devtools/runserver/watch.py", 169, 13): (T, None, "Process.join(5) after os.kill(SIGINT): waits up to 5 s for the child process on the loop"),
    ("cob", "aiohttp_devtools/runserver/watch.py", 173, 17): (T, None, "Process.join(1) after kill(): waits for the killed child on the loop"),
    ("cob", "aiohttp_devtools/runserver/serve.py", 405, 23): (T, None, "raw_path.is_dir() (stat) in the static handler's 404 branch, run per request"),
    ("cob", "aiohttp_devtools/runserver/serve.py", 408, 71): (T, None, "p.is_dir() (stat) for each directory entry, in the generator consumed by join() in the coroutine"),
    ("cob", "aiohttp_devtools/runserver/serve.py", 222, 19): (F, "loader already loaded at start-up (mimetypes db, by aiohttp's import)", "mimetypes.guess_type(): the module db is already initialised when this runs: serve.py imports aiohttp.web at start-up and aiohttp >= 3.10 builds web_fileresponse.CONTENT_TYPES = MimeTypes() at import, which runs mimetypes.init() (checked: mimetypes.inited False -> True on `from aiohttp import web`, aiohttp 3.14.5); so no file is read here. Borderline: with aiohttp 3.9.x (allowed by aiohttp>=3.9) the first call could read mime.types"),
    ("cob", "tests/test_runserver_config.py", 13, 5): (T, None, ADEV_CFG),
    ("cob", "tests/test_runserver_config.py", 67, 14): (T, None, ADEV_CFG),
    ("cob", "tests/test_runserver_main.py", 118, 14): (T, None, ADEV_CFG),
    ("cob", "tests/test_runserver_main.py", 164, 14): (T, None, ADEV_CFG),
    ("cob", "tests/test_runserver_main.py", 188, 14): (T, None, ADEV_CFG),
    ("cob", "tests/test_runserver_serve.py", 167, 14): (T, None, ADEV_CFG),
    ("cob", "tests/test_runserver_main.py", 148, 11): (T, None, "create_auxiliary_app -> Path(__file__).resolve() (realpath lstat walk) and add_static's directory check, in the async test"),
    ("cob", "tests/test_serve.py", 43, 12): (T, None, "serve_static -> create_auxiliary_app -> Path(__file__).resolve() (realpath lstat walk) in the async test"),
    ("cob", "tests/test_serve.py", 53, 12): (T, None, "serve_static -> create_auxiliary_app -> Path(__file__).resolve() (realpath lstat walk) in the async test"),
    # aiosonic
    ("cob", "aiosonic/client.py", 577, 29): (T, None, "os.path.getsize(file_obj.name) (stat) for an IOBase multipart value, in the coroutine"),
    ("cob", "aiosonic/connection.py", 256, 46): (T, None, "get_default_ssl_context() -> ssl.create_default_context(SERVER_AUTH) loads the default CA file into a new context on every new https connection (not cached)"),
    ("cob", "aiosonic/connection.py", 345, 38): (T, None, "Connection.upgrade without a context -> get_default_ssl_context -> create_default_context loads the CA file"),
    ("cob", "aiosonic/client.py", 571, 25): (T, None, "MultipartFile.size property with a file path -> os.path.getsize(self.file_path) (stat), first access in the coroutine"),
    ("cob", "aiosonic/client.py", 741, 72): (T, None, "https through a proxy without spec.ssl -> get_default_ssl_context -> create_default_context loads the CA file"),
    ("cob", "aiosonic/client.py", 611, 28): (T, None, "MultipartFile.file_obj property with a file path -> open(self.file_path, 'rb') in the async generator _gen"),
    ("cob", "aiosonic/resolver.py", 77, 31): (F, "numeric-only call (no lookup)", "socket.getnameinfo(address, NI_NUMERICHOST | NI_NUMERICSERV): both flags force numeric output, so no DNS/service lookup happens; it formats the already-resolved link-local IPv6 address (same code as aiohttp's ThreadedResolver)"),
    ("ruff", "aiosonic/client.py", 577, 29): (T, None, "os.path.getsize(file_obj.name) stats the file in the coroutine"),
    ("f8", "aiosonic/client.py", 574, 24): (F, "pure path computation (no file-system access)", "os.path.basename(val.name): string operation, no file-system access"),
    ("f8", "aiosonic/client.py", 608, 28): (F, "pure path computation (no file-system access)", "os.path.basename(getattr(file_obj, 'name', 'file')): string operation, no file-system access"),
    ("f8", "aiosonic/client.py", 577, 29): (T, None, "os.path.getsize(file_obj.name) stats the file in the coroutine"),
    # disnake
    ("cob", "disnake/asset.py", 109, 24): (T, None, "f.write(data) to a file just opened 'wb' (the open on line 108 carries `# noqa: ASYNC230`); the data reaches the disk inside the with block, in the coroutine"),
    ("cob", "disnake/message.py", 431, 24): (T, None, "f.write(data) to a file just opened 'wb' (open on line 430 carries `# noqa: ASYNC230`), in the coroutine"),
    ("cob", "disnake/ext/commands/common_bot_base.py", 530, 29): (T, None, "os.stat(module.__file__) for every loaded extension, each watchdog iteration, in the coroutine (reload=True)"),
    ("f8", "disnake/asset.py", 109, 24): (T, None, "f.write(data) to a file opened 'wb' in the coroutine"),
    ("f8", "disnake/message.py", 431, 24): (T, None, "f.write(data) to a file opened 'wb' in the coroutine"),
    # fakeredis
    ("cob", "test/test_async/test_asyncredis.py", 154, 9): (T, None, "timer.join() on the loop: the Timer thread may still be inside publisher.publish (with the real-server client it waits for the PUBLISH reply after the subscriber already got the message); short, but a real wait on another thread (borderline, like a join of a finished thread)"),
    # faust
    ("cob", "faust/cli/clean_versions.py", 21, 9): (T, None, "remove_old_versiondirs -> find_old_versiondirs + shutil.rmtree(dir), called from async run(), which the command executes on the worker's loop (as_service -> execute -> run)"),
    ("cob", "tests/consistency/test_consistency.py", 86, 14): (T, None, "open(f'worker_{worker}.logs', 'a') in the coroutine"),
    ("cob", "examples/tabletest.py", 37, 17): (T, None, "time.sleep(3600) in the agent coroutine when a count gap is seen"),
    ("cob", "faust/stores/rocksdb.py", 624, 24): (T, None, "_db_for_partition on a cache miss -> _open_for_partition: os.path.isfile(path) and rocksdb open, in the coroutine"),
    ("cob", "faust/stores/rocksdb.py", 428, 13): (T, None, "need_active_standby_for -> _db_for_partition -> _open_for_partition: os.path.isfile + rocksdb open on a cache miss"),
    ("cob", "tests/consistency/test_consistency.py", 142, 18): (T, None, "open(f'producer_{producer}.logs', 'a') in the coroutine"),
    ("ruff", "examples/tabletest.py", 37, 17): (T, None, "time.sleep(3600) in the agent coroutine"),
    ("ruff", "tests/consistency/test_consistency.py", 142, 18): (T, None, "open() of a log file in the coroutine"),
    ("ruff", "tests/consistency/test_consistency.py", 86, 14): (T, None, "open() of a log file in the coroutine"),
    ("f8", "examples/tabletest.py", 37, 17): (T, None, "time.sleep(3600) in the agent coroutine"),
    ("f8", "tests/consistency/test_consistency.py", 142, 18): (T, None, "open() of a log file in the coroutine"),
    ("f8", "tests/consistency/test_consistency.py", 86, 14): (T, None, "open() of a log file in the coroutine"),
    # ib_async
    ("cob", "ib_async/ibcontroller.py", 179, 13): (T, None, "subprocess.call(['taskkill', ...]) waits for the child, on Windows (self._isWindows), in the coroutine"),
    ("ruff", "ib_async/ibcontroller.py", 179, 13): (T, None, "subprocess.call waits for taskkill on Windows, in the coroutine"),
    ("f8", "ib_async/ibcontroller.py", 179, 13): (T, None, "subprocess.call waits for taskkill on Windows, in the coroutine"),
    # irc3
    ("cob", "irc3/dcc/client.py", 122, 5): (T, None, "DCCGet.connection_made (protocol callback, on the loop) does open(self.filepath, 'ab')"),
    ("cob", "examples/benches.py", 49, 33): (T, None, "loop.call_later(.., factory, i): factory runs on the loop -> IrcBot.from_argv -> utils.parse_config -> ConfigParser.read() of ~/.irc3/passwd.ini and the config files"),
    ("cob", "irc3/dcc/client.py", 171, 38): (T, None, "add_writer(socket, next_chunk): next_chunk runs on the loop -> send_chunk -> os.sendfile from a disk file to a socket that connection_made set blocking (setblocking(1))"),
    ("cob", "irc3/dcc/client.py", 152, 5): (T, None, "DCCSend.connection_made (protocol callback, on the loop) does open(self.filepath, 'rb') (and sets the socket blocking)"),
    ("cob", "irc3/plugins/fifo.py", 143, 34): (F, "non-blocking descriptor (FIFO opened O_NONBLOCK)", "add_reader(fd, watch_fd): fd is a FIFO opened os.O_RDWR | os.O_NONBLOCK on line 142, so read_fd's os.read returns at once (BlockingIOError -> b''); watch_fd only runs when readable. (create_fifo's own stat/mkfifo/open on lines 131-142 are other lines, not this chain)"),
}


def main() -> None:
    """Emit the verdicts in each list's sample order."""
    with open("samples.json") as fh:
        d = json.load(fh)
    out = {}
    for key, v in d.items():
        p, tool = key.split("|")
        rows = []
        for f in v["sample"]:
            rel = f["path"].replace(f"/tmp/2026-12-07d_src/{p}/", "")
            verdict, cause, reason = J.pop((tool, rel, f["line"], f["col"]))
            rows.append({"verdict": verdict, "cause": cause, "reason": reason})
        if rows:
            out[key] = rows
    assert not J, J
    with open("verdicts.json", "w") as fh:
        json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()

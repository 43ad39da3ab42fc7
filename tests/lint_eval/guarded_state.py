"""Guards on an object's state and on types, the shapes real projects write (uvicorn's
Config, hikari's data URIs, discord.py's File): ``self.x`` set in ``__init__`` from a
parameter and tested in a method ``__init__`` calls, or in a method of an object built
with known arguments; ``isinstance``, ``startswith``, ``bool(a or b)``, simple
properties, ``**kwargs`` handed on whole. Unknown state keeps every path."""
import io
import json
import os
import urllib.request
from pathlib import Path

DEFAULT_LOGGING = {"version": 1}


class Config:
    def __init__(self, app: object, log_config: object = DEFAULT_LOGGING,
                 certfile: str | None = None, keyfile: str | None = None,
                 reload: bool = False) -> None:
        self.app = app
        self.log_config = log_config
        self.certfile = certfile
        self.keyfile = keyfile
        self.reload = reload
        self.configure_logging()
        if self.should_reload:
            os.listdir(".")

    @property
    def should_reload(self) -> bool:
        return isinstance(self.app, str) and self.reload

    @property
    def is_ssl(self) -> bool:
        return bool(self.certfile or self.keyfile)

    def configure_logging(self) -> None:
        if self.log_config is not None:
            if isinstance(self.log_config, os.PathLike):
                self.log_config = os.fspath(self.log_config)
            if isinstance(self.log_config, dict):
                return
            elif isinstance(self.log_config, str) and self.log_config.endswith(".json"):
                with open(self.log_config) as fh:
                    json.load(fh)

    def load(self) -> None:
        if self.is_ssl:
            Path(str(self.certfile)).read_bytes()


def connected(app: object, **kwargs: object) -> Config:
    config = Config(app=app, **kwargs)
    config.load()
    return config


def mutated(app: object, **kwargs: object) -> Config:
    kwargs["log_config"] = "logging.json"
    return Config(app, **kwargs)


def from_data_uri(data_uri: str) -> bytes:
    if not data_uri.startswith("data:"):
        raise ValueError(data_uri)
    with urllib.request.urlopen(data_uri) as response:
        return response.read()


def opened(fp: object) -> object:
    if isinstance(fp, io.IOBase):
        return fp
    return open(str(fp), "rb")


def normalised(path: str | None = None, strict: bool = False) -> None:
    if strict:
        path = "/etc/strict.conf"
    if path is not None:
        open(path).close()


class Probe:
    def __init__(self, target: str | None = None) -> None:
        self.target = target

    def run(self) -> None:
        if self.target is not None:
            open(self.target).close()


class Rebound:
    def __init__(self, path: object) -> None:
        self.path = path
        self.check()

    def check(self) -> None:
        if self.path is None:
            self.path = "x.json"
        if self.path is not None:
            Path(str(self.path)).read_text()


async def defaults_rule_out_every_path(app: object) -> None:
    Config(app)                                 # dict config, no ssl, no reload
    connected(None, reload=True)                # None is no "module:app" string
    Config(app, log_config={"version": 1}).load()
    from_data_uri("data:text/plain,hi")
    opened(io.BytesIO(b"x"))
    normalised()                                # the rebinding runs only when strict


async def arguments_that_take_a_path(app: object, path: str) -> None:
    Config(app, log_config="logging.json")  # error: COB110
    Config("pkg:app", reload=True)  # error: COB110
    connected(app, certfile="cert.pem")  # error: COB110
    connected(app, log_config=path)  # error: COB110
    mutated(None)  # error: COB110
    Rebound(None)  # error: COB110
    opened(path)  # error: COB110
    normalised(strict=True)  # error: COB110


async def unknown_state_keeps_every_path(app: object, config: Config, uri: str) -> None:
    config.load()  # error: COB110
    connected(app, reload=True)  # error: COB110
    from_data_uri(uri)
    Config(app, log_config=config.log_config)  # error: COB110
    probe = Probe()
    probe.target = "/etc/probe"  # written outside the class: no state is assumed
    probe.run()  # error: COB110


class Session:
    def __init__(self) -> None:
        self.open = True


class Bot:
    def __init__(self, token: str, session: Session | None = None) -> None:
        if session is None:
            Path("/etc/ssl/certs/ca.pem").read_bytes()
        self.session = session


async def a_built_object_is_not_none(token: str, session: Session | None) -> None:
    mine = Session()
    Bot(token, session=mine)
    Bot(token, session=Session())
    Bot(token)  # error: COB110
    Bot(token, session=session)  # error: COB110


async def asgi_app(scope: object) -> None:
    return None


async def a_function_is_no_import_string() -> None:
    Config(asgi_app, reload=True)
    Config("pkg.main:app", reload=True)  # error: COB110

"""``self.m()`` runs the override of the object's own class: a base's ``__init__`` (or
template method) calling a hook that a subclass overrides with a blocking one is a chain
for the subclass, not for the base or for another subclass."""

import time


class Options:
    def __init__(self, **kwargs: object) -> None:
        self.prepare(**kwargs)

    def prepare(self, **kwargs: object) -> None:
        self.values = kwargs

    def run(self) -> None:
        self.step()

    def step(self) -> None:
        pass


class FileOptions(Options):
    def prepare(self, **kwargs: object) -> None:
        with open("/etc/app.conf") as fh:
            self.values = {"text": fh.read(), **kwargs}


class QuickOptions(Options):
    def step(self) -> None:
        self.pause()

    def pause(self) -> None:
        time.sleep(0.5)


class Plain(Options):
    pass


async def connect() -> Options:
    return FileOptions(port=22)  # error: COB110


async def defaults() -> Options:
    return Options(port=22)  # the base's own prepare reads nothing


async def plain() -> Options:
    return Plain(port=22)


async def quick(options: QuickOptions) -> None:
    options.run()  # error: COB110


async def base_run(options: Plain) -> None:
    options.run()


class Service:
    def start(self) -> None:
        self.configure()

    def configure(self) -> None:
        pass


class FileService(Service):
    def start(self) -> None:
        super().start()  # the base's start, still on a FileService

    def configure(self) -> None:
        open("/etc/service.conf").close()


async def boot(service: FileService) -> None:
    service.start()  # error: COB110


async def boot_base(service: Service) -> None:
    service.start()


class Config:
    def parse(self, path: str) -> None:
        with open(path) as fh:
            self.text = fh.read()

    @classmethod
    def load(cls, path: str) -> "Config":
        config = cls()  # an instance of the class
        config.parse(path)
        return config


async def configure() -> Config:
    return Config.load("/etc/app.conf")  # error: COB110

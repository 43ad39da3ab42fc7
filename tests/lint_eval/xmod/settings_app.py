"""Methods decorated by xmod/executors.py: one runs in the executor, one in place."""

from tests.lint_eval.xmod import executors


class SettingsApp:
    @executors.executor_decorator
    def load(self, path: str) -> str:
        with open(path) as fh:
            return fh.read()

    @executors.in_place
    def reload(self, path: str) -> str:
        with open(path) as fh:
            return fh.read()

    async def start(self, path: str) -> None:
        await self.load(path)
        await self.reload(path)  # error: COB110 [medium]

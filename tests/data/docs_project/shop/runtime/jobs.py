from shop.platform.api import submit


def run() -> None:
    submit()

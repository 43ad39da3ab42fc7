import getpass


async def positives() -> None:
    input("name? ")  # error: COB107
    getpass.getpass()  # error: COB107


async def negatives(input) -> None:  # noqa: A002
    input("not the builtin")

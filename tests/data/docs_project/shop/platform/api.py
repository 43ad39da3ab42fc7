def submit() -> None:
    pass

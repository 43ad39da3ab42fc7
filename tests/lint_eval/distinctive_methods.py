"""Methods whose names only a catalogued blocking type has (``ssl.SSLContext``'s
certificate loaders): called on a receiver the lint cannot type, they are that type's."""

from botocore.httpsession import create_urllib3_context  # a dependency's ssl factory


async def client_context(ca_bundle: str):
    ctx = create_urllib3_context()
    ctx.load_verify_locations(ca_bundle)  # error: COB100
    return ctx


def _with_cert(ctx, cert: str, key: str):
    ctx.load_cert_chain(cert, key)
    return ctx


async def server_context(ctx, cert: str, key: str):
    return _with_cert(ctx, cert, key)  # error: COB110


async def offloaded(loop, ctx, ca: str) -> None:
    await loop.run_in_executor(None, ctx.load_verify_locations, ca)  # a callable, not called


async def awaited(ctx, ca: str) -> None:
    await ctx.load_verify_locations(ca)  # an async namesake


async def export(exporter, nb: object) -> object:
    import asyncio

    # the export runs here, on the loop: only its result is handed to the thread
    return await asyncio.to_thread(lambda x: x, exporter.from_notebook_node(nb))  # error: COB100

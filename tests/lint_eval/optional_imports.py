"""An optional dependency's fallback (``except ImportError: name = None``) or a module
default of None does not make the name unknown: where it is used, it is the import."""

try:
    import ssl
except ImportError:  # a Python built without OpenSSL
    ssl = None

requests = None
try:
    import requests
except ImportError:
    pass

missing = None


async def context():
    return ssl.create_default_context()  # error: COB100


async def fetch(url):
    if requests is not None:
        return requests.get(url)  # error: ASYNC210


async def nothing():
    return missing.read()  # bound to None only: nothing is known of it

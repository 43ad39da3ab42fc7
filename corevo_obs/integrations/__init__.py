"""Framework integrations: the four stages recorded with no per-handler code.

- ``asgi.StagesMiddleware``: pure ASGI (Starlette, FastAPI, Quart, any ASGI app).
- ``aiohttp_web.install_stages``: an aiohttp.web application.
- ``http_clients``: httpx event hooks and an aiohttp ``TraceConfig`` that time outgoing
  calls as the external stage of the current task.

Each module imports its framework only when used; none is a dependency of the core.
"""

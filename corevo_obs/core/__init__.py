"""The shared core: definitions every layer may use and that import no layer above.

Errors, process identity, the metric catalog and its helpers, settings, the SQLite
helper and the ``@blocking`` marker. Nothing here imports the runtime, the
integrations, the tooling or the applications (.importlinter states it).
"""

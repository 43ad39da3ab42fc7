"""The demo runtime: a small multi-worker service reproducing the three failure classes.

docs/demo.md describes the drills.

Its modules are a *host application* that uses the suite; its workers pass this directory
as ``project_roots``, so stall reports treat its frames as project code.
"""

"""The ``corevo-obs`` command: one subcommand module per capability."""

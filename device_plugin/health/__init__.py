"""health: see each module's docstring."""

"""observability: see each module's docstring."""

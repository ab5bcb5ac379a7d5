"""config: see each module's docstring."""

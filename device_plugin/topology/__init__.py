"""topology: see each module's docstring."""

"""kubelet: see each module's docstring."""

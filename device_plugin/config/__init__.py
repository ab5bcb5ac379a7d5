"""config: the daemon's configuration, NVIDIA's `version: v1` file plus env variables and CLI flags.

Each field is declared once (declare, flags, model: file key, env var, CLI flag, check, reload class);
reading opens the file with limits; merge applies CLI > env > file; schema and sections check values;
sharing and sharing_model type the `sharing` section at load; reload and file_reload decide what a
hot reload applies; watch sees the file change; safe_write guards the files we write. No I/O beyond
the config and labels files, no knowledge of GPUs (checks that need them wait for composition).
"""

"""config: the daemon's configuration, NVIDIA's `version: v1` file plus env variables and CLI flags.

Each field is declared once (declare, flags, model: file key, env var, CLI flag, check, reload
class, values without effect); loader is the one loader (CLI > env > file, at start-up and every
reload), with arguments deriving the command-line flags; reading opens the file with limits; merge
puts the sources together; schema and sections check values, hints word what is refused (did you
mean, Helm values); sharing and sharing_model type the `sharing` section at load; not_applied names
NVIDIA's fields that have no effect; reload and file_reload decide what a hot reload applies; watch
sees the file change; safe_write guards the files we write. No I/O beyond the config and labels
files, no knowledge of GPUs (checks that need them wait for composition).
"""

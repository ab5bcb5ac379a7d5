"""ConfigFileReload: has the config file changed since the last look, and is its new content valid?

Boundary: change detection (a digest of the content, read bounded and non-blocking) and loading. A
broken content is reported once and the running config is kept. A valid content the daemon could not
serve on the GPUs it found (a `sharing` entry naming a GPU that is gone) is handed back (unserved)
and offered again at the next look, so it applies once the GPUs allow. What a change means for the
running daemon (re-serve, apply now, or wait for a restart) is device_plugin/node/reloads.py's
decision, carried out by the node runtime (device_plugin/node/runtime.py).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from pathlib import Path

from device_plugin.config.loader import check_labels_file
from device_plugin.config.model import Config
from device_plugin.config.not_applied import warn_not_applied
from device_plugin.config.reading import read_regular_file
from device_plugin.core.errors import ConfigError, PluginError

log = logging.getLogger(__name__)

ConfigLoader = Callable[[], Config]


class ConfigFileReload:
    def __init__(self, load_config: ConfigLoader | None, config_file: Path | None) -> None:
        self._load_config = load_config
        self._config_file = config_file
        self._digest = _digest(config_file)
        self._unserved: Config | None = None

    def reloaded(self, running: Config) -> Config:
        """The config file's new content if it changed and is valid, or the one handed back
        unserved; else `running`."""
        digest = _digest(self._config_file)
        if self._load_config is None:
            return running
        if digest == self._digest:
            pending, self._unserved = self._unserved, None
            return running if pending is None else pending
        self._digest = digest  # a broken content is reported once, not at every rescan
        self._unserved = None
        try:
            config = self._load_config()
            if config.daemon.device_plugin_dir != running.daemon.device_plugin_dir:
                # The loader checked labelsFile against the new devicePluginDir, which waits for a
                # restart: the running one is what the labels are written beside until then.
                check_labels_file(config.daemon.labels_file, running.daemon.device_plugin_dir)
        except PluginError as error:
            log.error("config file changed but is invalid, keeping the running config: %s", error)
            return running
        log.info("config file changed; effective config now: %s", config.describe())
        warn_not_applied(config)
        return config

    def unserved(self, config: Config) -> None:
        """The daemon could not serve `config` (from reloaded()) on the GPUs it found: offer it at
        the next look."""
        self._unserved = config


def _digest(path: Path | None) -> str | None:
    if path is None:
        return None
    try:  # bounded and non-blocking: a FIFO or /dev/zero swapped in must not hang the rescan
        return hashlib.sha256(read_regular_file(path)).hexdigest()
    except ConfigError:
        return None

"""What a claim's MPS shares need on the node, set up with its Prepare and taken down with its
Unprepare.

Boundary: the per-claim side of per-process isolation, over dra/mps/gpu_daemons.py (one daemon per
GPU) and dra/mps/cdi_spec.py (the claim's CDI spec); the helper calls it through the Driver protocol
(dra_helper/driver.py: apply, release, adopt) under the claim's lock, after the checkpoint has the
claim (apply) or no longer has it (release). So the checkpoint is the truth after any crash:
`adopt`, at start and whenever the checkpoint was read again, makes the daemons and specs match it
(each claim's spec rewritten, a spec no claim owns removed, the daemons counted afresh). A share
here is a device of the claim with a share that gets isolation (memory_shares.isolated); its key is
"<claim UID>/<index>".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from device_plugin.config.model import Config
from device_plugin.config.share_settings import DEFAULT_MPS_ROOT, ISOLATION_PER_PROCESS
from device_plugin.core.names import CDI_KIND
from device_plugin.dra.memory_shares import isolated
from device_plugin.dra.mps import cdi_spec
from device_plugin.dra.mps.control_daemon import MpsError
from device_plugin.dra.mps.gpu_daemons import GpuDaemons
from device_plugin.dra_helper.checkpoint.values import PreparedDevice

log = logging.getLogger(__name__)


def gpu_uuid(device: PreparedDevice) -> str:
    """The GPU's UUID, from the toolkit's CDI name the Prepare answered
    (`nvidia.com/gpu=<UUID>`)."""
    prefix = f"{CDI_KIND}="
    return next((i[len(prefix) :] for i in device.cdi_device_ids if i.startswith(prefix)), "")


def mps_shares(devices: Sequence[PreparedDevice]) -> list[tuple[int, PreparedDevice]]:
    """(index in the claim, device) of each share that gets MPS."""
    return [(i, d) for i, d in enumerate(devices) if isolated(d.share)]


def share_setup_for(config: Config) -> MpsShareSetup | None:
    """The node's MPS set-up when its shares get per-process isolation (memoryShares on); else
    None."""
    shares = config.daemon.shares
    if not config.daemon.memory_shares or shares.isolation != ISOLATION_PER_PROCESS:
        return None
    daemons = GpuDaemons(shares.mps_control, Path(config.flags.mps_root or DEFAULT_MPS_ROOT))
    return MpsShareSetup(daemons, Path(shares.cdi_spec_dir), config.daemon.own_domain)


class MpsShareSetup:
    def __init__(self, daemons: GpuDaemons, spec_dir: Path, own_domain: str) -> None:
        self.daemons = daemons
        self._spec_dir = spec_dir
        self._own_domain = own_domain

    def cdi_device_id(self, claim_uid: str, index: int) -> str:
        """The CDI device a share's Prepare answers beside the GPU's. SpecError: the UID cannot name
        one."""
        return f"{cdi_spec.kind(self._own_domain)}={cdi_spec.device_name(claim_uid, index)}"

    def apply(self, claim_uid: str, devices: Sequence[PreparedDevice]) -> str:
        """Each share's GPU daemon running and the claim's spec written; "" or why not (nothing left
        started for this claim then)."""
        shares = mps_shares(devices)
        if not shares:
            return ""
        acquired: list[tuple[str, str]] = []
        try:
            for index, device in shares:
                uuid, key = gpu_uuid(device), f"{claim_uid}/{index}"
                self.daemons.acquire(uuid, key)
                acquired.append((uuid, key))
            self._write(claim_uid, shares)
        except (MpsError, cdi_spec.SpecError) as error:
            for uuid, key in acquired:
                self.daemons.release(uuid, key)
            return str(error)
        return ""

    def release(self, claim_uid: str, devices: Sequence[PreparedDevice]) -> None:
        """The claim's spec removed and its shares let go (each GPU's daemon stops after its
        last)."""
        shares = mps_shares(devices)
        if not shares:
            return
        try:
            cdi_spec.remove(cdi_spec.spec_file(self._spec_dir, self._own_domain, claim_uid))
        except cdi_spec.SpecError as error:
            log.error("%s (the next start removes it)", error)
        for index, device in shares:
            self.daemons.release(gpu_uuid(device), f"{claim_uid}/{index}")

    def adopt(self, claims: Mapping[str, Sequence[PreparedDevice]]) -> None:
        """Daemons and specs made to match the checkpoint's claims (see the module docstring)."""
        wanted: dict[str, set[str]] = {}
        owned = {}
        for uid, devices in claims.items():
            shares = mps_shares(devices)
            if shares:
                owned[uid] = shares
                for index, device in shares:
                    wanted.setdefault(gpu_uuid(device), set()).add(f"{uid}/{index}")
        for uuid, why in self.daemons.adopt(wanted).items():
            log.error(
                "GPU %s: its MPS control daemon cannot be started after a restart: %s", uuid, why
            )
        for uid, shares in sorted(owned.items()):
            try:
                self._write(uid, shares)
            except (cdi_spec.SpecError, MpsError) as error:
                log.error("%s", error)
        for uid, path in cdi_spec.written(self._spec_dir, self._own_domain).items():
            if uid not in owned:
                try:
                    cdi_spec.remove(path)
                    log.info("removed the CDI spec %s: no prepared claim owns it", path)
                except cdi_spec.SpecError as error:
                    log.error("%s", error)

    def _write(self, claim_uid: str, shares: Sequence[tuple[int, PreparedDevice]]) -> None:
        devices = []
        for index, device in shares:
            share = device.share
            assert share is not None
            pipe = self.daemons.folders(gpu_uuid(device)).pipe_dir
            edits = cdi_spec.share_edits(pipe, share.memory_mib, share.compute_percent)
            devices.append((cdi_spec.device_name(claim_uid, index), edits))
        path = cdi_spec.spec_file(self._spec_dir, self._own_domain, claim_uid)
        cdi_spec.write(path, cdi_spec.spec(self._own_domain, devices))

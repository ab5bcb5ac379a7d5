"""On a GPU machine: does a share's MPS memory limit hold? One real MPS control daemon, started the way the
driver starts it, and two CUDA clients with a share's environment: one allocating under the limit (must
succeed), one over it (must fail).

Usage: .venv/bin/python tools/mps_limit_check.py [--share-mib 2048] [--gpu-index 0]
Prints one line per step and `mps limit check: PASS` or `FAIL` (exit 0 or 1; 2: could not run here).
It changes no GPU setting (compute mode, MIG mode, clocks): it starts one nvidia-cuda-mps-control for one
GPU in a folder of its own under /tmp and stops it at the end, whatever happened. The clients call the CUDA
driver API (libcuda.so.1) through ctypes, as a share's container would through the CDI spec's environment
(device_plugin/dra/mps/cdi_spec.py): CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=<MiB>M.
Not yet run: no GPU machine was lent to the session that wrote it (docs/sharing-dra.md says what it is for).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from device_plugin.dra.mps.control_daemon import MpsControlDaemon, MpsError  # noqa: E402

# A CUDA client in a few lines: create a context on device 0 and allocate N MiB; exit 0 when it got them,
# 3 when cuMemAlloc refused (the limit), 4 on any other failure (printed).
CLIENT = r"""
import ctypes, sys
cuda = ctypes.CDLL("libcuda.so.1")
def check(what, code):
    if code != 0:
        print(f"{what}: CUresult {code}"); sys.exit(3 if what == "cuMemAlloc" else 4)
check("cuInit", cuda.cuInit(0))
device = ctypes.c_int()
check("cuDeviceGet", cuda.cuDeviceGet(ctypes.byref(device), 0))
context = ctypes.c_void_p()
check("cuCtxCreate", cuda.cuCtxCreate_v2(ctypes.byref(context), 0, device))
pointer = ctypes.c_uint64()
check("cuMemAlloc", cuda.cuMemAlloc_v2(ctypes.byref(pointer), ctypes.c_size_t(int(sys.argv[1]) << 20)))
print(f"allocated {sys.argv[1]} MiB"); sys.exit(0)
"""


def gpu_uuid(index: int) -> str:
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=uuid", "--format=csv,noheader", f"--id={index}"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return out.stdout.strip()


def client(daemon: MpsControlDaemon, share_mib: int, alloc_mib: int) -> tuple[int, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUDA_")}
    env.update(
        CUDA_VISIBLE_DEVICES=daemon.uuid,
        CUDA_MPS_PIPE_DIRECTORY=str(daemon.folders.pipe_dir),
        CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=f"0={share_mib}M",
    )
    done = subprocess.run(
        [sys.executable, "-c", CLIENT, str(alloc_mib)], env=env, capture_output=True, text=True, timeout=120
    )
    return done.returncode, (done.stdout + done.stderr).strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--share-mib", type=int, default=2048)
    parser.add_argument("--gpu-index", type=int, default=0)
    args = parser.parse_args()
    if shutil.which("nvidia-cuda-mps-control") is None or shutil.which("nvidia-smi") is None:
        print("mps limit check: cannot run here (no nvidia-cuda-mps-control or nvidia-smi on PATH)")
        return 2
    root = Path(tempfile.mkdtemp(prefix="mps-check-", dir="/tmp"))
    daemon = MpsControlDaemon("nvidia-cuda-mps-control", root, gpu_uuid(args.gpu_index), timeout_s=30.0)
    passed = False
    try:
        print(f"daemon for {daemon.uuid}: pid {daemon.start()}, pipe folder {daemon.folders.pipe_dir}")
        under, over = args.share_mib // 2, args.share_mib * 2
        code_under, said_under = client(daemon, args.share_mib, under)
        print(f"client allocating {under} MiB of a {args.share_mib} MiB share: exit {code_under}: {said_under}")
        code_over, said_over = client(daemon, args.share_mib, over)
        print(f"client allocating {over} MiB of a {args.share_mib} MiB share: exit {code_over}: {said_over}")
        print(f"daemon's server list: {daemon.command('get_server_list').strip() or '(none)'}")
        passed = code_under == 0 and code_over == 3
    except (MpsError, subprocess.SubprocessError, OSError) as error:
        print(f"error: {error}")
    finally:
        try:
            daemon.stop()
            print(f"daemon stopped: {daemon.pid() is None}")
        except MpsError as error:
            print(f"error: {error}")
            passed = False
        log = daemon.folders.log_dir / "control.log"
        if log.exists():
            print("control.log:\n" + log.read_text()[-2000:])
        shutil.rmtree(root, ignore_errors=True)
    print(f"mps limit check: {'PASS' if passed else 'FAIL'}")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())

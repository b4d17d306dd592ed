#!/usr/bin/env python3
"""Build the container images the guest needs, from this host's binaries.

No image registry is reachable, so the images are assembled here: a root
filesystem from files of the host (the static busybox, sysbench and the
shared libraries it links), packed as one layer into a `docker save` archive
that `nerdctl load` imports. The archives are reproducible: fixed owners,
modes and timestamps, so an unchanged input gives a byte-identical archive.

Images:
  cfsb/busybox:latest   busybox userland (sh, yes, lsmod, dd, echo, ...)
  cfsb/sysbench:latest  sysbench 1.0 and busybox
  cfsb/pause:latest     busybox sleeping: the sandbox of containerd's CRI pods
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

BUSYBOX = Path("/bin/busybox")
SYSBENCH = Path("/usr/bin/sysbench")
PATH_ENV = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# A root filesystem: path in the image -> host file to copy, or None for a
# directory, or "->target" for a symbolic link.
Rootfs = dict[str, "Path | str | None"]


def busybox_rootfs() -> Rootfs:
    applets = subprocess.run(
        [str(BUSYBOX), "--list"], check=True, capture_output=True, text=True
    ).stdout.split()
    fs: Rootfs = {d: None for d in ("bin", "dev", "etc", "proc", "sys", "tmp", "root")}
    fs["bin/busybox"] = BUSYBOX
    for applet in applets:
        if applet != "busybox":
            fs[f"bin/{applet}"] = "->busybox"
    return fs


def shared_libraries(binary: Path) -> list[Path]:
    """The libraries the dynamic loader maps for binary, loader included."""
    out = subprocess.run(["ldd", str(binary)], check=True, capture_output=True, text=True).stdout
    libs = []
    for line in out.splitlines():
        words = line.split()
        if "=>" in words and len(words) > words.index("=>") + 1:
            libs.append(Path(words[words.index("=>") + 1]))
        elif words and words[0].startswith("/"):
            libs.append(Path(words[0]))
    return libs


def sysbench_rootfs() -> Rootfs:
    fs = busybox_rootfs()
    fs["usr"] = None
    fs["usr/bin"] = None
    fs["usr/bin/sysbench"] = SYSBENCH
    for lib in shared_libraries(SYSBENCH):
        # Keep the host's path (e.g. /lib/x86_64-linux-gnu/...), where the
        # loader looks; follow symlinks to copy the real file.
        parts = lib.parts[1:]
        for i in range(1, len(parts)):
            fs.setdefault("/".join(parts[:i]), None)
        fs["/".join(parts)] = lib.resolve()
    return fs


def layer_tar(fs: Rootfs) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(fs):
            src = fs[name]
            info = tarfile.TarInfo(name)
            info.mtime = 0
            info.uid = info.gid = 0
            if src is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755
                tar.addfile(info)
            elif isinstance(src, str):
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, src[2:], 0o777
                tar.addfile(info)
            else:
                data = src.read_bytes()
                info.size, info.mode = len(data), 0o755
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 0
    tar.addfile(info, io.BytesIO(data))


def docker_archive(tag: str, fs: Rootfs, cmd: list[str]) -> bytes:
    """A `docker save` archive of one single-layer image."""
    layer = layer_tar(fs)
    diff_id = hashlib.sha256(layer).hexdigest()
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "created": "1970-01-01T00:00:00Z",
            "config": {"Env": [PATH_ENV], "Cmd": cmd, "WorkingDir": "/"},
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
            "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "scripts/build_images.py"}],
        },
        sort_keys=True,
    ).encode()
    config_id = hashlib.sha256(config).hexdigest()
    manifest = json.dumps(
        [{"Config": f"{config_id}.json", "RepoTags": [tag], "Layers": [f"{diff_id}/layer.tar"]}]
    ).encode()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        add_bytes(tar, f"{diff_id}/layer.tar", layer)
        add_bytes(tar, f"{config_id}.json", config)
        add_bytes(tar, "manifest.json", manifest)
    return buf.getvalue()


IMAGES = {
    "busybox": ("cfsb/busybox:latest", busybox_rootfs, ["sh"]),
    "sysbench": ("cfsb/sysbench:latest", sysbench_rootfs, ["sysbench", "--help"]),
    # The longest sleep busybox takes; CRI stops a sandbox with SIGKILL.
    "pause": ("cfsb/pause:latest", busybox_rootfs, ["sleep", "2147483647"]),
}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("outdir", type=Path, help="where to write <name>.tar")
    parser.add_argument("names", nargs="*", default=sorted(IMAGES), help="images (default: all)")
    args = parser.parse_args()
    for host_file in (BUSYBOX, SYSBENCH):
        if not host_file.exists():
            print(
                f"build_images: {host_file} is missing (Debian packages busybox-static, sysbench)",
                file=sys.stderr,
            )
            return 1
    args.outdir.mkdir(parents=True, exist_ok=True)
    for name in args.names:
        if name not in IMAGES:
            print(
                f"build_images: unknown image '{name}' (known: {', '.join(sorted(IMAGES))})", file=sys.stderr
            )
            return 2
        tag, rootfs, cmd = IMAGES[name]
        data = docker_archive(tag, rootfs(), cmd)
        out = args.outdir / f"{name}.tar"
        if not out.exists() or out.read_bytes() != data:
            tmp = out.with_suffix(".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, out)
        print(f"{out} {tag} {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())

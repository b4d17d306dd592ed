#!/usr/bin/env python3
"""containerd's CRI plugin as borrowd sees it, for overhead-in-guest.sh.

One process copies every container's output: it holds each container's
FIFOs (RUN/containerd/io.containerd.grpc.v1.cri/containers/ID/io/1/ID-stdout
and -stderr) open, and on a line from one spends WORK_US of CPU (formatting
it) and appends it to the container's log file, which kubelet names by a
link in /var/log/containers (POD_NS_NAME-ID.log, to
/var/log/pods/NS_POD_UID/NAME/0.log). One thread waits on all of them, as
the Go runtime's poller does.

    cri_daemon.py RUN WORK_US < commands

A command "make N" adds containers up to N (ids as userdata() in the
harness: c and 63 digits), then prints "made N". The FIFOs are opened
read-write, so that a writer that goes away is no end of file.
"""

import os
import resource
import selectors
import sys
import time

PODS = "/var/log/pods"
LINKS = "/var/log/containers"


def container_id(i: int) -> str:
    return f"c{i:063d}"


def make(run: str, i: int, sel: selectors.DefaultSelector) -> None:
    cid = container_id(i)
    io_dir = f"{run}/containerd/io.containerd.grpc.v1.cri/containers/{cid}/io/1"
    os.makedirs(io_dir, exist_ok=True)
    log_dir = f"{PODS}/k8s_pod{i}_uid{i}/c{i}"
    os.makedirs(log_dir, exist_ok=True)
    log = os.open(f"{log_dir}/0.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o640)
    link = f"{LINKS}/pod{i}_k8s_c{i}-{cid}.log"
    if not os.path.lexists(link):
        os.symlink(f"{log_dir}/0.log", link)
    for stream in ("stdout", "stderr"):
        path = f"{io_dir}/{cid}-{stream}"
        if not os.path.exists(path):
            os.mkfifo(path)
        sel.register(os.open(path, os.O_RDWR | os.O_NONBLOCK), selectors.EVENT_READ, log)


def main() -> None:
    if sys.argv[1:] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return
    if len(sys.argv) != 3:
        print(__doc__.strip(), file=sys.stderr)
        sys.exit(2)
    run, work = sys.argv[1], int(sys.argv[2]) / 1e6
    # Three descriptors a container: as containerd (LimitNOFILE=infinity
    # in its unit), more than the default 1024.
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    os.makedirs(LINKS, exist_ok=True)
    sel = selectors.DefaultSelector()
    made = 0
    os.set_blocking(0, False)
    sel.register(0, selectors.EVENT_READ, None)
    pending = b""
    while True:
        for key, _ in sel.select():
            if key.data is None:
                chunk = os.read(0, 4096)
                if not chunk:
                    return
                pending += chunk
                while b"\n" in pending:
                    line, pending = pending.split(b"\n", 1)
                    words = line.split()
                    if len(words) == 2 and words[0] == b"make":
                        for i in range(made, int(words[1])):
                            make(run, i, sel)
                        made = max(made, int(words[1]))
                        print(f"made {made}", flush=True)
                continue
            try:
                data = os.read(key.fd, 65536)
            except BlockingIOError:
                continue
            # Wall time, not thread_time(): each clock_gettime() of a
            # thread's CPU time has the kernel account the running task's
            # time, which runs borrowd's sched_stat_runtime program (a
            # daemon formats lines, it does not read its clock so).
            end = time.perf_counter() + work
            while time.perf_counter() < end:
                pass
            os.write(key.data, data)


if __name__ == "__main__":
    main()

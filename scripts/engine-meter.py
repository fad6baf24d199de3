#!/usr/bin/env python3
"""What a batch costs the engine, independent of the machine's load: the Engine API calls made
(counted by a proxy on a unix socket in front of the engine's, used through DOCKER_HOST) and the
CPU time of the engine's own processes (dockerd, containerd, every containerd-shim and the runc
it runs) over the batch.

Usage: engine-meter.py SOCKET OUT.json [UPSTREAM]   (UPSTREAM: /var/run/docker.sock)
Runs until SIGTERM or SIGINT, then writes OUT.json:
  {"calls": {"POST /containers/{id}/start": n, ...}, "calls_total": n,
   "cpu_s": {"dockerd": s, "containerd": s, "shims": s}, "cpu_total_s": s}

The CPU is utime + stime + the reaped children's cutime + cstime from /proc/<pid>/stat: for
dockerd and containerd the change over the run, for the shims (one per container, each exiting
after its container's removal, reparented away from containerd) the last value read of each,
polled every POLL seconds, so the shims' figure is a lower bound (what a shim spent after its
last poll is missed; the same for every client measured). Counts are per request line sent to
the engine, so a stream (events, stats, attach, wait) counts once, however long it runs.
"""
import collections
import json
import os
import re
import signal
import socket
import sys
import threading
import time

POLL = 0.02
TICK = os.sysconf("SC_CLK_TCK")
REQUEST = re.compile(rb"(GET|POST|DELETE|PUT|HEAD) (/[^ ?\r\n]*)[^ \r\n]* HTTP/1\.[01]\r\n")


def shape(path):
    """The call without its object: the API version, container and image names dropped."""
    path = re.sub(r"^/v[0-9.]+", "", path)
    path = re.sub(r"^/containers/(?!json$|create$|prune$)[^/]+", "/containers/{id}", path)
    path = re.sub(r"^/images/(?!json$|create$|prune$|load$|search$).+?/(json|history|push|tag)$", r"/images/{ref}/\1", path)
    return path


calls = collections.Counter()
calls_lock = threading.Lock()


def pump(src, dst, count):
    tail = b""
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            if count:
                seen = tail + data
                with calls_lock:
                    for m in REQUEST.finditer(seen):
                        # A match wholly inside the kept tail was counted last time.
                        if m.end() > len(tail):
                            calls[f"{m.group(1).decode()} {shape(m.group(2).decode())}"] += 1
                tail = seen[-200:]
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (dst, src):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(listener, upstream):
    while True:
        client, _ = listener.accept()
        engine = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            engine.connect(upstream)
        except OSError:
            client.close()
            continue
        threading.Thread(target=pump, args=(client, engine, True), daemon=True).start()
        threading.Thread(target=pump, args=(engine, client, False), daemon=True).start()


def ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # utime stime cutime cstime are fields 14-17; after the ")" they start at index 11.
    return sum(int(v) for v in fields[11:15])


def comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""


def engine_pids():
    daemons, shims = {}, set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        name = comm(entry)
        if name in ("dockerd", "containerd"):
            daemons[name] = entry
        elif name.startswith("containerd-shim"):
            shims.add(entry)
    return daemons, shims


def main():
    sock, out = sys.argv[1], sys.argv[2]
    upstream = sys.argv[3] if len(sys.argv) > 3 else "/var/run/docker.sock"
    if os.path.exists(sock):
        os.unlink(sock)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(sock)
    os.chmod(sock, 0o660)
    listener.listen(256)
    daemons, shims = engine_pids()
    start = {name: ticks(pid) or 0 for name, pid in daemons.items()}
    # Shims already running belong to other containers: only their growth counts.
    shim_base = {pid: ticks(pid) or 0 for pid in shims}
    shim_last = dict(shim_base)
    threading.Thread(target=serve, args=(listener, upstream), daemon=True).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    scan = 0
    while not stop.wait(POLL):
        scan += 1
        for pid in list(shim_last):
            t = ticks(pid)
            if t is not None:
                shim_last[pid] = t
        # New shims are found by a full scan, less often than the known ones are read.
        if scan % 5 == 0:
            for pid in engine_pids()[1] - shim_last.keys():
                shim_base.setdefault(pid, 0)
                shim_last[pid] = ticks(pid) or 0
    cpu = {name: ((ticks(pid) or 0) - start[name]) / TICK for name, pid in daemons.items()}
    for pid in shim_last:
        t = ticks(pid)
        if t is not None:
            shim_last[pid] = t
    cpu["shims"] = sum(shim_last[p] - shim_base[p] for p in shim_last) / TICK
    with calls_lock:
        counted = dict(sorted(calls.items()))
    with open(out, "w") as f:
        json.dump(
            {
                "calls": counted,
                "calls_total": sum(counted.values()),
                "cpu_s": cpu,
                "cpu_total_s": round(sum(cpu.values()), 3),
            },
            f,
            indent=1,
        )
    os.unlink(sock)


if __name__ == "__main__":
    main()

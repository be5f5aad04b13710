"""How busy the machine is, for the benchmarks' "other load" column: the machine's busy
CPU time and this process tree's own, so the difference is what other processes used."""

from __future__ import annotations

import os


def machine_busy_seconds() -> float | None:
    """CPU seconds the whole machine has spent busy since boot (Linux), else None."""
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [int(x) for x in fh.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds() -> float:
    """CPU seconds of this process and its live descendants (a cluster's processes)."""
    import psutil

    me = psutil.Process()
    total = sum(me.cpu_times()[:2])
    for child in me.children(recursive=True):
        try:
            total += sum(child.cpu_times()[:2])
        except psutil.Error:
            pass
    return total

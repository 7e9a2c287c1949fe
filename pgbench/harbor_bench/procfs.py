"""CPU time, liveness and memory from /proc, as the benchmark's fairness
rules want them: the pooler's CPU is utime+stime from /proc/PID/stat (on 2
cores CPU per transaction is the honest figure), and "other processes" is
the machine's busy time minus PostgreSQL, the poolers and pgbench.

The parsers take the files' text, so they are tested on fixtures; the
readers around them return 0 / None when a process is gone.
"""

import os


def stat_fields(text):
    """/proc/PID/stat from field 3 on (the state): the command name, in
    parentheses, may hold spaces and parentheses, so split after the last ')'.
    fields[n - 3] is field n of proc(5)."""
    return text[text.rindex(")") + 2:].split()


def stat_ticks(text, children=False):
    """utime + stime (fields 14, 15), and with CHILDREN those of the reaped
    children too (cutime, cstime: fields 16, 17), in clock ticks."""
    f = stat_fields(text)
    ticks = int(f[11]) + int(f[12])
    return ticks + int(f[13]) + int(f[14]) if children else ticks


def stat_state(text):
    return stat_fields(text)[0]


def busy_ticks(proc_stat_text):
    """Ticks the machine spent busy, all CPUs: user + nice + system + irq + softirq.

    With tick-based CPU accounting (no CONFIG_IRQ_TIME_ACCOUNTING, as on these
    machines) a tick that lands in an interrupt or softirq is counted there in
    /proc/stat but also charged to the interrupted task's stime, so leaving irq
    and softirq out made "other processes' CPU" come out negative under loopback
    traffic. Steal time (the hypervisor's) is not counted."""
    cpu = proc_stat_text.splitlines()[0].split()
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in cpu[1:8])
    return user + nice + system + irq + softirq


def rss_kib(status_text):
    """VmRSS of /proc/PID/status, in KiB, or None."""
    for line in status_text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


def open_files_limit(limits_text):
    """The soft "Max open files" of /proc/PID/limits, as text."""
    for line in limits_text.splitlines():
        if line.startswith("Max open files"):
            return line.split()[3]
    return "?"


def cpu_model(cpuinfo_text):
    for line in cpuinfo_text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "?"


def _read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def alive(pid):
    """True while process PID exists and is not a zombie."""
    text = _read(f"/proc/{pid}/stat") if pid else None
    return bool(text) and stat_state(text) != "Z"


def ticks(pid, children=False):
    """CPU ticks of PID (0 when unknown or gone)."""
    text = _read(f"/proc/{pid}/stat") if pid else None
    return stat_ticks(text, children) if text else 0


def children(pid):
    text = _read(f"/proc/{pid}/task/{pid}/children") or ""
    return [int(x) for x in text.split()]


def tree_ticks(pid):
    """Ticks of a server and its whole tree: PID with its reaped children, and
    its live children with theirs (PostgreSQL's backends); 0 when unknown."""
    if not pid:
        return 0
    return ticks(pid, True) + sum(ticks(c, True) for c in children(pid))


def self_children_ticks():
    """Ticks of pgbench, psql and everything else this process ran and reaped."""
    return stat_ticks(_read("/proc/self/stat"), children=True) - stat_ticks(_read("/proc/self/stat"))


def machine_busy():
    return busy_ticks(_read("/proc/stat"))


def loadavg():
    """/proc/loadavg as text, and its 1-minute figure."""
    text = _read("/proc/loadavg").strip()
    return text, float(text.split()[0])


def comm(pid):
    return (_read(f"/proc/{pid}/comm") or "?").strip()


def limits_open_files(pid):
    return open_files_limit(_read(f"/proc/{pid}/limits") or "")


def clock_ticks():
    return os.sysconf("SC_CLK_TCK")

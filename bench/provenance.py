"""Where a benchmark's figures came from: the machine and the commit, written beside them in its results."""

import os
import platform
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def machine() -> dict[str, object]:
    """The CPU model, its cores, Python, the kernel and the load average when the run began."""
    model = next(
        (line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?"
    )
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "kernel": platform.release(),
        "load": os.getloadavg(),
    }


def commit() -> str:
    """HEAD's short hash, with ``-dirty`` when tracked files differ from it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True)
    return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")

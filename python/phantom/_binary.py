"""Finding and running the ``phantom`` binary this package wraps (no second engine: everything goes through it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Sequence


class PhantomError(RuntimeError):
    """phantom stopped with exit code 2 (bad model or input, missing runtime...): ``str(e)`` is its message."""

    def __init__(self, message: str, returncode: int = 2, command: Sequence[str] = ()):
        super().__init__(message)
        self.returncode = returncode
        self.command = list(command)


def binary() -> str:
    """The phantom executable: ``$PHANTOM_BIN``, the one this package installed, else the first on ``PATH``."""
    explicit = os.environ.get("PHANTOM_BIN")
    if explicit:
        return explicit
    exe = "phantom.exe" if sys.platform == "win32" else "phantom"
    for scheme_dir in (sysconfig.get_path("scripts"), os.path.dirname(sys.executable)):
        candidate = Path(scheme_dir or "") / exe
        if candidate.is_file():
            return str(candidate)
    found = shutil.which(exe)
    if found:
        return found
    raise PhantomError(
        "no phantom executable found (looked at $PHANTOM_BIN, this Python's scripts folder and PATH).\n"
        "  hint: `pip install .` in phantom's checkout, or set PHANTOM_BIN=/path/to/phantom"
    )


def run(args: Sequence[str], *, check_usage: bool = True) -> subprocess.CompletedProcess:
    """Runs ``phantom ARGS``; exit 2 raises :class:`PhantomError`, exits 0 and 1 (a verdict) return."""
    cmd = [binary(), *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if check_usage and proc.returncode not in (0, 1):
        message = proc.stderr.strip() or proc.stdout.strip() or f"phantom exited with {proc.returncode}"
        raise PhantomError(message, proc.returncode, cmd)
    return proc

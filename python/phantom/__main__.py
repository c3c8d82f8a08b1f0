"""``python -m phantom ARGS`` runs the phantom binary with ARGS, exit code included."""

import os
import subprocess
import sys

from phantom._binary import PhantomError, binary


def main() -> int:
    try:
        exe = binary()
    except PhantomError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if os.name == "posix":
        os.execv(exe, [exe, *sys.argv[1:]])
    return subprocess.call([exe, *sys.argv[1:]])


if __name__ == "__main__":
    sys.exit(main())

"""A process that holds a model's lock and writes under it, fenced, until it loses the lease.

``python -m tests.flows.orchestration.lock_holder URL MODEL LEASE_SECONDS WRITES_FILE [PAUSE_AFTER]`` takes the
lock, prints ``held`` on stdout, then loops every 20 ms: ``lease.check()``, then append to
``WRITES_FILE`` (the "write" the fence guards) the wall-clock times at which the check passed and
the line was written. When the check refuses, it prints ``lost: <message>`` and exits 3. With
``PAUSE_AFTER``, it stops itself (SIGSTOP: every thread stops, as in a long GC pause or a frozen
VM) after that many writes, and once resumed (SIGCONT) goes straight on to its next check.
The tests pause it, kill it, or cut its connection.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

LOST = 3


def main() -> int:
    from flows.orchestration.locks import LockLostError, model_lock

    url, model, lease_seconds, writes = sys.argv[1], sys.argv[2], float(sys.argv[3]), Path(sys.argv[4])
    pause_after = int(sys.argv[5]) if len(sys.argv) > 5 else None
    written = 0
    with model_lock(model, url=url, timeout_seconds=30, lease_seconds=lease_seconds, description="lock_holder") as lease:
        print("held", flush=True)
        with writes.open("a") as out:
            while True:
                try:
                    lease.check()
                except LockLostError as error:
                    print(f"lost: {error}", flush=True)
                    return LOST
                checked = time.time()
                out.write(f"{checked:.6f} {time.time():.6f}\n")
                out.flush()
                written += 1
                if written == pause_after:
                    os.kill(os.getpid(), signal.SIGSTOP)
                else:
                    time.sleep(0.02)


if __name__ == "__main__":
    sys.exit(main())

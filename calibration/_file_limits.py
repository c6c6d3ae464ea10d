"""What a scored-set file may cost before any of its data is read.

Two rules keep a file from hurting the machine that reads it:

* **Regular files only.** A FIFO passes ``Path.exists()`` and blocks ``open()`` until a
  writer appears; a device (``/dev/zero``, or a ``.csv`` linked to it) never ends. Paths are
  resolved (symbolic links followed) and refused unless they name a regular file, before
  anything opens them.
* **Declared sizes first.** The memory a file declares (the ``.npy`` headers of an ``.npz``,
  rows × columns in a Parquet footer) is checked before a byte is allocated: against the
  memory this process may use (:func:`memory_limit`), and against the file's own size. Real
  scored data does not compress a hundredfold — logits are noise to a compressor — so a file
  that declares more than :data:`MAX_EXPANSION` times the bytes it stores, beyond
  :data:`EXPANSION_FLOOR`, is a compression bomb or corrupt (a 467 kB ``.npz`` of zeros
  inflates to 480 MB; a 600 kB Parquet file of one repeated row declares 40 million rows).

The functions return the refusal's wording (or None); the readers raise it, naming the file.
"""

from __future__ import annotations

import os
import resource
import stat
from pathlib import Path

__all__ = ["EXPANSION_FLOOR", "MAX_EXPANSION", "expansion_refusal", "memory_limit", "memory_refusal", "not_a_regular_file"]

#: How many times the bytes a file stores its data may declare in memory (beyond
#: :data:`EXPANSION_FLOOR`). Float logits compress by a few percent, ids and labels by a few
#: times; only a crafted or corrupt file gets near a hundred.
MAX_EXPANSION = 100
#: Below this many declared bytes (64 MiB) the expansion is not checked: small files of
#: zeros (tests, examples) stay readable, and a bomb costs at most this much.
EXPANSION_FLOOR = 64 * 2**20

_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def not_a_regular_file(path: Path) -> str | None:
    """Why ``path`` (symbolic links followed) is not a regular file, or None when it is.

    Only ``stat`` is called: nothing is opened, so a FIFO cannot block the caller.

    >>> not_a_regular_file(Path("/dev/null"))
    'is a character device, not a regular file'
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:  # a link to nothing, a folder that may not be searched
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    target = os.path.realpath(path)
    linked = f" (a link to {target})" if target != os.path.abspath(path) else ""
    return f"is {kind}{linked}, not a regular file"


def memory_limit() -> int | None:
    """The most memory this process may use, in bytes: the machine's physical memory, lowered
    by the process's address-space and data limits (``ulimit -v``, ``ulimit -d``) when set;
    None where the system does not say."""
    limits = []
    try:
        limits.append(int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES")))
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
        pass
    for which in (resource.RLIMIT_AS, resource.RLIMIT_DATA):
        soft, _ = resource.getrlimit(which)
        if soft != resource.RLIM_INFINITY and soft > 0:
            limits.append(int(soft))
    return min(limits) if limits else None


def memory_refusal(declared: int, what: str) -> str | None:
    """Why ``what``, declaring ``declared`` bytes in memory, cannot be read by this process;
    None when it fits (:func:`memory_limit`).

    >>> memory_refusal(2**70, "its arrays").startswith("its arrays need at least")
    True
    """
    memory = memory_limit()
    if memory is None or declared <= memory:
        return None
    return (
        f"{what} need at least {declared:,} bytes in memory, more than this process may use ({memory:,} bytes); "
        "split the set into smaller files"
    )


def expansion_refusal(declared: int, stored: int, what: str) -> str | None:
    """Why ``what``, declaring ``declared`` bytes in memory from ``stored`` bytes in the file,
    is refused as a compression bomb; None when it may be read.

    >>> expansion_refusal(10**9, 10**6, "its arrays") is not None
    True
    >>> expansion_refusal(10**6, 10**3, "its arrays") is None  # below the floor
    True
    """
    if declared <= EXPANSION_FLOOR or declared <= MAX_EXPANSION * max(stored, 1):
        return None
    return (
        f"{what} need at least {declared:,} bytes in memory from {stored:,} bytes in the file ("
        f"{declared / max(stored, 1):,.0f} times as many); scored data does not compress more than "
        f"{MAX_EXPANSION} times, so the file is refused as a compression bomb or corrupt (write real data "
        "again without compression)"
    )

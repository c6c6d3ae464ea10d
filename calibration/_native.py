"""The kernels compiled ahead of time: built when the package is installed, loaded without numba.

The numba kernels of :mod:`calibration._kernels_numba` compile on demand (1-4 minutes of one
core, once per installation) and cost every process that uses them 0.5-0.65 s of CPU to
start numba: a process's first large fit on them cost 6-8 times a compiled fit. So the
installation also compiles the same functions once, ahead of time, into the extension module
``calibration._kernels_native`` (numba's ``pycc``, a few seconds; ``setup.py`` calls
:func:`build`): it imports in a fraction of a millisecond, needs neither numba nor a cache,
and runs the kernels at the compiled kernels' speed from a process's first call.

- **In parallel, on threads of its own.** Code compiled ahead of time has no parallel region,
  but its functions release the GIL: the fit's and the evaluation's parallel passes run shares
  of their blocks on a pool of threads (one per CPU this process may use, or
  ``NUMBA_NUM_THREADS``), each share's blocks into their own rows, then add the blocks in order:
  the same blocks, the same order, the same sums as numba's parallel kernels, bit for bit. The
  scans for refused rows (a plain read) run on the calling thread.
- **This machine's instructions, this source.** It is compiled for the CPU that builds it
  (LLVM's host target, AVX2 or AVX-512 where present: a generic x86-64 target ran the fit's
  pass 7 times slower). Beside it, ``_kernels_native.json`` holds the CPU flags it was built
  on and the hash of the source it was built from (the kernels and this file's exports); a
  machine whose CPU lacks any of those flags (a wheel built elsewhere), or a source changed
  since (an editable installation not rebuilt), does not load it and keeps the other paths.
- **Optional.** Linux only (the CPU flags come from ``/proc/cpuinfo``); an installation
  that could not build it (no C compiler or Python headers, no numba at build time) runs as
  before: NumPy, then the numba kernels.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["MODULE", "NATIVE_KERNELS_VARIABLE", "NativeKernels", "build", "native_kernels", "native_kernels_loaded",
           "cpu_flags"]

#: The extension module's name (a sibling of this module).
MODULE = "_kernels_native"
#: Set to ``0`` in the environment, a process does not load the native kernels (NumPy, then numba).
NATIVE_KERNELS_VARIABLE = "THERMOSTAT_NATIVE_KERNELS"
_STAMP = MODULE + ".json"
# Flags of /proc/cpuinfo that do not name instructions: a module built in a virtual machine runs
# on the same CPU without one (x86: the hypervisor, hyper-threading, self-snoop; kernel
# mitigations and timers).
_NOT_INSTRUCTIONS = frozenset({"hypervisor", "ht", "ss", "tm", "tm2", "acpi", "nonstop_tsc", "constant_tsc",
                               "tsc_known_freq", "tsc_deadline_timer", "tsc_adjust", "arat", "rep_good", "nopl",
                               "xtopology", "cpuid", "pti", "ibrs", "ibpb", "stibp", "ssbd", "md_clear", "flush_l1d",
                               "arch_capabilities"})
_DTYPES = {"float32": "f4", "float64": "f8"}
# Shares of the blocks per thread: small shares, so that a thread slowed by other work takes
# fewer of them instead of holding the others up (the sums do not depend on it).
_SHARES_PER_THREAD = 8


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str]:
    """The instruction-set flags of this machine's CPU (``/proc/cpuinfo``'s first ``flags`` line,
    ``Features`` on ARM), without those that say how the machine runs rather than what it can
    execute (``hypervisor`` …); empty when unknown.

    >>> sorted(cpu_flags("processor : 0\\nflags : sse2 avx2 fma hypervisor\\n"))
    ['avx2', 'fma', 'sse2']
    >>> sorted(cpu_flags("processor : 0\\nFeatures : fp asimd sve\\n"))
    ['asimd', 'fp', 'sve']
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return frozenset()
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() in ("flags", "Features"):
            return frozenset(value.split()) - _NOT_INSTRUCTIONS
    return frozenset()


class NativeKernels:
    """The extension module behind the names of :mod:`calibration._kernels_numba`.

    Each kernel is exported once per dtype (``expansion_blocks_f4`` …); this picks it by the
    logits' dtype. The parallel kernels' names run their blocks in shares on threads.
    """

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        (self.NLL_AT_ONE_SKIP, self.NLL_AT_ONE_SAME, self.NLL_AT_ONE_RATIO,
         self.NLL_AT_ONE_EXP) = module.nll_at_one_modes()

    def _kernel(self, name: str, logits: NDArray[np.floating[Any]]) -> Any:
        # The compiled functions check an array's item size only: what they are given is checked
        # here (the dispatch hands them C-contiguous float32/float64 pieces).
        if logits.ndim != 2 or not logits.flags.c_contiguous or logits.dtype.name not in _DTYPES:
            raise TypeError(f"the native kernels take C-contiguous 2-D float32/float64 logits, not {logits.dtype} "
                            f"of shape {logits.shape}")
        return getattr(self.module, f"{name}_{_DTYPES[logits.dtype.name]}")

    def expansion_sums(self, logits: NDArray[np.floating[Any]], labels: NDArray[np.intp], beta: float, mode: int,
                       p: int, q: int, max_spread: float, block_rows: int, *, serial: bool = False) -> NDArray[np.float64]:
        """numba's parallel ``expansion_sums``: shares of the blocks on the pool's threads (``serial``:
        every block on the calling thread, numba's ``expansion_sums_serial``; the same sums)."""
        partial = np.zeros((_blocks(logits, block_rows), 10))
        blocks = self._kernel("expansion_blocks", logits)

        def share(first: int, stop: int) -> None:
            blocks(logits, labels, beta, mode, p, q, max_spread, block_rows, first, partial[first:stop])

        if serial:
            share(0, partial.shape[0])
        else:
            _in_shares(partial.shape[0], share)
        return self.module.add_blocks(partial)  # type: ignore[no-any-return]

    def expansion_sums_serial(self, logits: NDArray[np.floating[Any]], *args: Any) -> NDArray[np.float64]:
        return self.expansion_sums(logits, *args, serial=True)

    def calibration_bin_sums(self, logits: NDArray[np.floating[Any]], labels: NDArray[np.intp],
                             beta: float, interior: NDArray[np.float64], block_rows: int) -> Any:
        """numba's parallel ``calibration_bin_sums``: shares of the blocks on the pool's threads."""
        n_blocks, n_bins = _blocks(logits, block_rows), interior.shape[0] + 1
        counts, corrects = np.zeros((n_blocks, n_bins), dtype=np.int64), np.zeros((n_blocks, n_bins), dtype=np.int64)
        confidences, variances, scalars = np.zeros((n_blocks, n_bins)), np.zeros((n_blocks, n_bins)), np.zeros((n_blocks, 2))
        blocks = self._kernel("calibration_bin_blocks", logits)
        _in_shares(n_blocks, lambda first, stop: blocks(
            logits, labels, beta, interior, block_rows, first, counts[first:stop], corrects[first:stop],
            confidences[first:stop], variances[first:stop], scalars[first:stop]))
        return self.module.add_bin_blocks(counts, corrects, confidences, variances, scalars)

    def first_refused_row(self, logits: NDArray[np.floating[Any]], *args: Any) -> int:
        return int(self._kernel("first_refused_row", logits)(logits, *args))

    def first_nonfinite_row(self, logits: NDArray[np.floating[Any]], *args: Any) -> int:
        return int(self._kernel("first_nonfinite_row", logits)(logits, *args))


def _blocks(logits: NDArray[np.floating[Any]], block_rows: int) -> int:
    return -(-int(logits.shape[0]) // block_rows)


def _in_shares(n_blocks: int, run: Any) -> None:
    """``run(first, stop)`` over consecutive shares of ``n_blocks`` blocks, on the pool's threads."""
    edges = np.linspace(0, n_blocks, min(n_blocks, _threads() * _SHARES_PER_THREAD) + 1).astype(np.int64)
    for done in [_pool().submit(run, int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]:
        done.result()


def _threads() -> int:
    configured = os.environ.get("NUMBA_NUM_THREADS", "")
    return int(configured) if configured.isdigit() and int(configured) > 0 else len(os.sched_getaffinity(0))


_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """The threads the parallel passes run on, started at the first one."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(_threads(), thread_name_prefix="thermostat-kernels")
        return _POOL


def _forget_the_pool() -> None:
    """In a forked child: the parent's threads are not there, so its pool would take work and
    never run it. The child starts its own at its first parallel pass."""
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_forget_the_pool)


@cache
def native_kernels() -> NativeKernels | None:
    """The kernels compiled ahead of time, or None: not built on this installation, or built
    on a CPU with instructions this one lacks, or switched off (:data:`NATIVE_KERNELS_VARIABLE`)."""
    if os.environ.get(NATIVE_KERNELS_VARIABLE) == "0":
        return None
    here = Path(__file__).parent
    try:
        stamp = json.loads((here / _STAMP).read_text())
        source = _source_hash(here / "_kernels_numba.py", Path(__file__))
    except (OSError, ValueError):
        return None
    built_on = frozenset(stamp.get("cpu_flags", ()))
    if not built_on or not built_on <= cpu_flags() or stamp.get("source") != source:
        return None
    try:
        module = importlib.import_module(f"{__package__}.{MODULE}")
    except ImportError:
        return None
    return NativeKernels(module)


def native_kernels_loaded() -> bool:
    """Whether this process runs large inputs on the kernels compiled at installation.

    False where they could not be built (not Linux, no C compiler), on a CPU without the
    instructions they were built for, when the kernels' source changed since (reinstall), or
    with ``THERMOSTAT_NATIVE_KERNELS=0``: large inputs then run on NumPy, then on numba's
    kernels compiled on demand.

    >>> native_kernels_loaded() in (True, False)
    True
    """
    return native_kernels() is not None


def _source_hash(*sources: Path) -> str:
    """The hash of what the module is compiled from: the kernels and this file's exports."""
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.read_bytes())
    return digest.hexdigest()


def build(kernels: ModuleType, output_dir: Path) -> Path:
    """Compile ``kernels`` (the module :mod:`calibration._kernels_numba`, however loaded) into
    ``output_dir``: the extension module and its stamp (the CPU flags it needs, the hash of the
    source it was compiled from). Returns the module's path.

    Needs numba and a C compiler; raises whatever numba's ``pycc`` raises without them.
    """
    import warnings

    types: Any = importlib.import_module("numba.core.types")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", importlib.import_module("numba.core.errors").NumbaPendingDeprecationWarning)
        pycc: Any = importlib.import_module("numba.pycc")

    compiler = pycc.CC(MODULE)
    compiler.output_dir = str(output_dir)
    compiler.target_cpu = "host"
    compiler.verbose = False
    i8, f8 = types.int64, types.float64
    labels, bins = types.Array(types.intp, 1, "C"), types.Array(f8, 1, "C")
    compiler.export("nll_at_one_modes", types.UniTuple(i8, 4)())(_nll_at_one_modes(kernels))
    partial = types.Array(f8, 2, "C")
    compiler.export("add_blocks", bins(partial))(kernels.add_blocks.py_func)
    per_block = (types.Array(i8, 2, "C"), types.Array(i8, 2, "C"), partial, partial, partial)
    bin_sums = types.Tuple((types.Array(i8, 1, "C"), bins, types.Array(i8, 1, "C"), bins, f8, f8))
    compiler.export("add_bin_blocks", bin_sums(*per_block))(kernels.add_bin_blocks.py_func)
    for dtype, code in _DTYPES.items():
        logits = types.Array(getattr(types, dtype), 2, "C")
        exports = {
            "expansion_blocks": types.none(logits, labels, f8, i8, i8, i8, f8, i8, i8, partial),
            "calibration_bin_blocks": types.none(logits, labels, f8, bins, i8, i8, *per_block),
            "first_refused_row": i8(logits, f8, i8),
            "first_nonfinite_row": i8(logits, i8),
        }
        for name, signature in exports.items():
            compiler.export(f"{name}_{code}", signature)(getattr(kernels, name).py_func)
    flags = cpu_flags()
    if not flags:
        raise RuntimeError("this machine's CPU flags are unknown (no /proc/cpuinfo): the module could not be checked")
    with _as_numbas_jit_would():
        compiler.compile()
    stamp = {"source": _source_hash(Path(str(kernels.__file__)), Path(__file__)), "cpu_flags": sorted(flags)}
    (output_dir / _STAMP).write_text(json.dumps(stamp) + "\n")
    return Path(str(compiler.output_dir)) / str(compiler.output_file)


@contextmanager
def _as_numbas_jit_would() -> Iterator[None]:
    """Two settings of numba's own compiler that ``pycc`` offers no way to set, for what it
    compiles meanwhile: every exported function releases the GIL while it runs (the flag of
    ``@njit(nogil=True)``), so threads run them at once; and the code is generated for this
    CPU's features as LLVM reads them (as numba's JIT does), not for every feature of its model
    name (a virtual machine may hide some, e.g. AVX-512, whose instructions would then fault)."""
    compiler: Any = importlib.import_module("numba.pycc.compiler")
    codegen: Any = importlib.import_module("numba.core.codegen").AOTCPUCodegen
    flags: Any = importlib.import_module("numba.core.compiler").Flags

    class ReleasingTheGil(flags):  # type: ignore[misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.release_gil = True

    original_flags, original_features = compiler.Flags, codegen._customize_tm_features
    compiler.Flags = ReleasingTheGil
    codegen._customize_tm_features = lambda self: self._get_host_cpu_features()
    try:
        yield
    finally:
        compiler.Flags, codegen._customize_tm_features = original_flags, original_features


def _nll_at_one_modes(kernels: ModuleType) -> Any:
    skip, same, ratio, exp = (kernels.NLL_AT_ONE_SKIP, kernels.NLL_AT_ONE_SAME, kernels.NLL_AT_ONE_RATIO,
                              kernels.NLL_AT_ONE_EXP)

    def nll_at_one_modes():  # type: ignore[no-untyped-def]  # pragma: no cover - compiled
        return skip, same, ratio, exp

    return nll_at_one_modes

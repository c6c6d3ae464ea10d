"""The build's one step beyond pyproject.toml: the numeric kernels compiled ahead of time.

``calibration._kernels_native`` is compiled from ``calibration/_kernels_numba.py`` by numba's
``pycc`` for the CPU that installs the package (``calibration/_native.py`` says why). It is
optional: where it cannot be built (not Linux, no C compiler or Python headers, no numba in the
build), the installation goes on without it and the kernels compile on demand, as before.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

NATIVE = "calibration._kernels_native"
STAMP = NATIVE.rpartition(".")[2] + ".json"  # beside the module: what it was built from and for (calibration/_native.py)
HERE = Path(__file__).resolve().parent


def _load(name: str, path: Path):
    """A module of the package by its path (the package's __init__ needs what the build lacks)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class BuildNative(build_ext):
    def build_extension(self, ext: Extension) -> None:
        if ext.name != NATIVE:
            super().build_extension(ext)
            return
        from setuptools.errors import CompileError

        if not sys.platform.startswith("linux"):
            raise CompileError("the kernels are compiled ahead of time on Linux only")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="thermostat-build-") as cache:
            os.environ.setdefault("NUMBA_CACHE_DIR", cache)  # numba's cache of the build, not beside the sources
            try:
                native = _load("_thermostat_build_native", HERE / "calibration" / "_native.py")
                kernels = _load("_thermostat_build_kernels", HERE / "calibration" / "_kernels_numba.py")
                built = native.build(kernels, target.parent)
            except Exception as error:  # noqa: BLE001 - any failure leaves the kernels to compile on demand
                raise CompileError(f"{NATIVE} not built ({type(error).__name__}: {error})") from error
        if built.resolve() != target.resolve():
            built.replace(target)

    def get_outputs(self) -> list[str]:
        """The module's stamp is an output too (what an editable installation maps)."""
        outputs = super().get_outputs()
        stamp = Path(self.get_ext_fullpath(NATIVE)).parent / STAMP
        return [*outputs, str(stamp)] if stamp.exists() else outputs

    def copy_extensions_to_source(self) -> None:
        """An editable installation's module is copied into the source tree: its stamp with it."""
        super().copy_extensions_to_source()
        native = next(ext for ext in self.extensions if ext.name == NATIVE)
        inplace, regular = self._get_inplace_equivalent(self.get_finalized_command("build_py"), native)
        stamp = Path(regular).parent / STAMP
        if stamp.exists():
            self.copy_file(str(stamp), str(Path(inplace).parent / stamp.name), level=self.verbose)


setup(
    ext_modules=[Extension(NATIVE, sources=[], optional=True)],
    cmdclass={"build_ext": BuildNative},
)

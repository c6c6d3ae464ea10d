"""The wheel is the product: built from the sources and installed outside the checkout with only
what it declares, it runs the demo (with both cores busy), the dashboard and the analysis
commands, and ``prefect.yaml``'s entry points resolve in it.

How the environment is made, and what that proves. A new virtual environment in a temporary
folder (no ``PYTHONPATH``, no editable install, the checkout nowhere on its path). The wheel is
installed into it by pip (``--no-deps``); its dependencies are the closure of the wheel's own
``Requires-Dist`` (no extras) and of theirs, resolved against the distributions this test
environment installed from ``constraints.txt`` and linked into the new ``site-packages`` file by
file from their ``RECORD``s. So the new environment holds exactly the wheel and what it declares
(transitively), at the pinned versions — what ``pip install -c constraints.txt thermostat-*.whl``
installs — without downloading and unpacking a gigabyte on every run; ``pip check`` there
confirms every declared requirement is met, and the extras (Dask, psycopg) and the test tools
(playwright) are absent, so nothing can import them at start-up. It proves that the wheel's own
files are enough and that its declared dependencies suffice at run time; it does not prove that
a package index serves those versions (the Makefile's install from ``constraints.txt`` does).
That every directly imported module is declared (not only present through MLflow or Prefect)
is tests/test_packaging.py's check.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
import zipfile
from dataclasses import dataclass
from email.parser import Parser
from importlib import metadata
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from benchmarks.startup import every_core_busy
from tests.support.ports import free_port
from tests.support.servers import running

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("calibration", "monitoring", "flows", "thermostat")
# Not copied into the build: they are not part of the wheel, and their caches are not sources.
NOT_SOURCES = (".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".thermostat", ".hypothesis", ".*cache",
               "tests", "benchmarks", "docs", "docsite", "site", "_kernels_native*")
# A base install goes without these (the `distributed` and `postgresql` extras, the test tools).
ABSENT = ("dask", "distributed", "prefect_dask", "psycopg", "playwright", "pytest")
EXAMPLE = ROOT / "tests" / "data" / "real-logits" / "cifar10_lenet5_netcal.npz"  # 10,000 x 10
OTHER_EXAMPLE = ROOT / "tests" / "data" / "real-logits" / "cifar10_wrn16-4_netcal.npz"


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    site: Path
    env: dict[str, str]
    work: Path  # an empty folder outside the checkout
    numba_cache: Path

    def run(self, *argv: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        command = [str(self.venv / "bin" / argv[0]), *argv[1:]]
        return subprocess.run(command, cwd=cwd or self.work, env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)


def _build_wheel(folder: Path) -> Path:
    source = folder / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*NOT_SOURCES))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                    "--wheel-dir", str(folder / "dist"), str(source)], check=True, capture_output=True, timeout=300)
    (wheel,) = (folder / "dist").glob("thermostat-*.whl")
    return wheel


def _declared_closure(requirements: list[str]) -> dict[str, metadata.Distribution]:
    """The installed distributions that ``requirements`` (no extras) need, transitively, each at a
    version its requirement accepts."""
    found: dict[str, metadata.Distribution] = {}
    extras_of: dict[str, set[str]] = {}
    todo = [(Requirement(text), "") for text in requirements]
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        distribution = metadata.distribution(requirement.name)
        name = distribution.metadata["Name"].lower()
        assert requirement.specifier.contains(distribution.version, prereleases=True), (requirement, distribution.version)
        new_extras = set(requirement.extras) - extras_of.get(name, set())
        if name in found and not new_extras:
            continue
        extras = ([""] if name not in found else []) + sorted(new_extras)
        found[name] = distribution
        extras_of.setdefault(name, set()).update(new_extras)
        todo += [(Requirement(text), each) for text in distribution.requires or [] for each in extras]
    return found


def _link(distribution: metadata.Distribution, site: Path) -> None:
    """The distribution's files (its RECORD, inside site-packages) linked into ``site``."""
    base = Path(str(distribution.locate_file("")))
    for file in distribution.files or []:
        if file.parts[0] == "..":  # a console script in bin/: not needed, not the product's
            continue
        source, target = base / file, site / file
        if source.exists() and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    folder = tmp_path_factory.mktemp("wheel")
    assert not folder.resolve().is_relative_to(ROOT)
    wheel = _build_wheel(folder)
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    with zipfile.ZipFile(wheel) as archive:
        info = next(name for name in archive.namelist() if name.endswith(".dist-info/METADATA"))
        wheel_metadata = Parser().parsestr(archive.read(info).decode())
    declared = [text for text in wheel_metadata.get_all("Requires-Dist") or [] if "extra ==" not in text]
    for distribution in _declared_closure(declared).values():
        _link(distribution, site)
    pip = [sys.executable, "-m", "pip", "--python", str(python)]
    subprocess.run([*pip, "install", "--quiet", "--no-deps", "--no-index", str(wheel)], check=True,
                   capture_output=True, timeout=300)
    check = subprocess.run([*pip, "check"], capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, f"pip check in the new environment:\n{check.stdout}{check.stderr}"
    work = folder / "work"
    work.mkdir()
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not key.startswith(("THERMOSTAT_", "MLFLOW_", "PREFECT_"))}
    env |= {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(venv),
            "PREFECT_HOME": str(folder / "prefect-home"), "NUMBA_CACHE_DIR": str(folder / "numba-cache")}
    return Installed(wheel=wheel, venv=venv, site=site, env=env, work=work, numba_cache=folder / "numba-cache")


@dataclass(frozen=True)
class DemoRun:
    done: subprocess.CompletedProcess[str]
    state_dir: Path
    seconds: float
    busy_loops: int


@pytest.fixture(scope="module")
def demo(installed: Installed) -> DemoRun:
    """``thermostat demo`` from the installed wheel, in a fresh folder, while every core runs a busy loop."""
    folder = installed.work / "demo"
    folder.mkdir()
    with every_core_busy() as loops:
        started = time.monotonic()
        done = installed.run("thermostat", "demo", cwd=folder, timeout=1500)
        seconds = time.monotonic() - started
    return DemoRun(done, folder / ".thermostat", seconds, loops)


# ----------------------------------------------------------------------------- the wheel itself


def test_the_wheel_holds_every_package_and_its_data_files(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as archive:
        names = set(archive.namelist())
    sources = {str(path.relative_to(ROOT)) for package in PACKAGES for path in (ROOT / package).rglob("*")
               if path.is_file() and "__pycache__" not in path.parts}
    assert sources - names == set(), "in the checkout, missing from the wheel"
    assert {name.split("/")[0] for name in names} == {*PACKAGES, "thermostat-0.1.0.dist-info"}
    assert {f"{package}/py.typed" for package in PACKAGES} <= names and "flows/dashboard/server.py" in names
    # The kernels compiled ahead of time by the build (setup.py), for this machine's CPU.
    assert "calibration/_kernels_native.json" in names
    assert [name for name in names if name.startswith("calibration/_kernels_native.") and name.endswith(".so")]
    assert installed.wheel.name.startswith("thermostat-0.1.0-cp3") and "linux" in installed.wheel.name


def test_the_installed_wheel_fits_on_its_native_kernels_without_numba(installed: Installed) -> None:
    code = ("import sys, numpy as np; from calibration import fit_temperature, _kernels; "
            "from calibration._native import native_kernels; rng = np.random.default_rng(0); "
            "labels = rng.integers(0, 10, 200_000); logits = rng.normal(size=(200_000, 10)) + 3 * np.eye(10)[labels]; "
            "fit_temperature(logits, labels); "
            "print(native_kernels() is not None, 'numba' in sys.modules, _kernels._background_started)")
    done = installed.run("python", "-c", code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "False"]


def test_the_environment_is_the_wheel_and_what_it_declares(installed: Installed) -> None:
    code = ("import importlib.util, json, sys, calibration, monitoring, flows, flows.dashboard; "
            "print(json.dumps({'files': [m.__file__ for m in (calibration, monitoring, flows, flows.dashboard)], "
            f"'absent': [n for n in {list(ABSENT)!r} if importlib.util.find_spec(n) is None], 'path': sys.path}}))")
    done = installed.run("python", "-c", code)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert all(Path(file).is_relative_to(installed.site) for file in found["files"]), found["files"]
    assert not any(Path(entry).resolve().is_relative_to(ROOT) for entry in found["path"] if entry), found["path"]
    assert found["absent"] == list(ABSENT), "a base install must not hold the extras or the test tools"
    version = installed.run("thermostat", "--version")
    assert (version.returncode, version.stdout.strip()) == (0, "thermostat 0.1.0")


def test_prefect_yaml_entry_points_resolve_in_the_installed_package(installed: Installed) -> None:
    deployments = yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]
    entry_points = sorted({deployment["entrypoint"] for deployment in deployments})
    assert entry_points
    code = """
import importlib, json, sys
from prefect import Flow
found = {}
for entry in sys.argv[1:]:
    path, name = entry.split(":")
    module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
    found[entry] = [isinstance(getattr(module, name), Flow), module.__file__]
print(json.dumps(found))
"""
    done = installed.run("python", "-c", code, *entry_points)
    assert done.returncode == 0, done.stderr
    for entry, (is_flow, file) in json.loads(done.stdout).items():
        assert is_flow and Path(file).is_relative_to(installed.site), (entry, file)


# ------------------------------------------------------------------------------- the commands


def test_the_analysis_commands_run_on_a_shipped_example(installed: Installed) -> None:
    data = installed.work / "analysis"
    data.mkdir()
    shutil.copy(EXAMPLE, data / "reference.npz")
    shutil.copy(OTHER_EXAMPLE, data / "window.npz")
    fit = installed.run("thermostat", "fit", "reference.npz", "--json", cwd=data)
    assert fit.returncode == 0, fit.stderr
    temperature = json.loads(fit.stdout)["temperature"]
    assert 1.0 < temperature < 2.0  # LeNet-5 on CIFAR-10: over-confident
    evaluate = installed.run("thermostat", "evaluate", "reference.npz", "--temperature", str(temperature), "--json",
                             cwd=data)
    assert evaluate.returncode == 0, evaluate.stderr
    assert json.loads(evaluate.stdout)["n"] == 10_000
    drift = installed.run("thermostat", "drift", "reference.npz", "window.npz", "--temperature", str(temperature),
                          "--json", cwd=data)
    assert drift.returncode in (0, 1), drift.stderr  # 1: drift found (another model's logits)
    assert json.loads(drift.stdout)["verdict"] in ("calibrated", "undetermined", "drift")


def test_a_command_that_needs_an_extra_says_which(installed: Installed) -> None:
    work = installed.work / "extras"
    work.mkdir()
    to_parquet = ("import sys; from calibration import read_scored_set, write_scored_set; "
                  "write_scored_set(read_scored_set(sys.argv[1]), sys.argv[2])")
    assert installed.run("python", "-c", to_parquet, str(EXAMPLE), str(work / "set.parquet")).returncode == 0
    dask = installed.run("thermostat", "fit", "set.parquet", "--engine", "dask", cwd=work)
    assert dask.returncode != 0 and "'distributed' extra" in dask.stderr and "Traceback" not in dask.stderr, dask.stderr
    setup = installed.run("thermostat", "setup-db", "--admin-url", "postgresql://postgres@127.0.0.1:1/postgres",
                          "--mlflow-password", "m-secret", "--thermostat-password", "t-secret", cwd=work)
    assert setup.returncode == 2 and "'postgresql' extra" in setup.stderr, setup.stderr


@pytest.mark.timeout(2400)  # the demo with every core busy, and other work on the machine
def test_the_demo_passes_with_every_core_busy(installed: Installed, demo: DemoRun) -> None:
    output = demo.done.stdout + demo.done.stderr
    assert demo.busy_loops >= 2
    assert demo.done.returncode == 0, f"after {demo.seconds:.0f} s:\n{output}"
    assert "Traceback" not in output, output
    for phrase in ("digits@champion", "NEW version, alias moved", "DRIFT", "REGISTERED -> version", "Demo finished"):
        assert phrase in output, f"{phrase!r} missing\n{output}"
    # The demo's sets are small: it compiles none of the numeric kernels (nothing to wait for).
    assert not list(installed.numba_cache.rglob("*.nbi"))


def _read(url: str) -> str:
    with urllib.request.urlopen(url, timeout=120) as answer:
        return str(answer.read().decode())


@pytest.mark.timeout(2400)  # the demo with every core busy, and other work on the machine
def test_the_dashboard_serves_the_page_and_metrics(installed: Installed, demo: DemoRun) -> None:
    assert demo.done.returncode == 0, "needs the demo's state"
    port = free_port()
    env = installed.env | {"THERMOSTAT_STATE_DIR": str(demo.state_dir)}
    url = f"http://127.0.0.1:{port}"
    with running([installed.venv / "bin" / "thermostat", "dashboard", "--port", str(port)],
                 log=installed.work / "dashboard.log", what="the installed thermostat dashboard",
                 ready=f"{url}/healthz", timeout=300, cwd=installed.work, env=env):
        page, metrics = (_read(f"{url}{path}") for path in ("/", "/metrics"))
    assert "<svg" in page and "digits" in page
    assert 'thermostat_ece{' in metrics and 'model="digits"' in metrics

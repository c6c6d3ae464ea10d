"""The options the analysis commands share with the settings: one default each, ``THERMOSTAT_*`` honoured.

An option such as ``--bins`` or ``--level`` is declared here with the setting it stands for
(``n_bins``, ``drift_p_threshold``) and that setting's default, read from where it is declared
once: the drift policy's knobs (:func:`monitoring.policy_knobs`, which also names their flags)
and the core's and the flows' defaults (``calibration.DEFAULT_*``, ``flows.defaults``), which the
settings read too. On the command
line the option (:meth:`SettingOption.option`) defaults to "not given"; once the arguments are
parsed, :func:`resolve` fills each option not given from the settings, so
``THERMOSTAT_N_BINS=20 thermostat evaluate ...`` bins in 20 as the pipeline does, and with no
variable set the default is the declared one. The help text shows both (``default 15;
THERMOSTAT_N_BINS``). Stdlib, click, ``calibration``'s constants and the policy's declarations
(a pydantic model) only: parsing loads neither the numeric core nor pydantic-settings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Final

import click

import calibration
from flows.defaults import DEFAULT_MIN_ACCURACY
from monitoring import policy_knobs

__all__ = ["COMMAND_OPTIONS", "SettingOption", "resolve"]


@dataclass(frozen=True, slots=True)
class SettingOption:
    """A command-line option that stands for the setting ``setting`` (``THERMOSTAT_<SETTING>``)."""

    flag: str
    setting: str
    default: Any
    help: str
    kind: Callable[[str], Any]
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return self.flag.removeprefix("--").replace("-", "_")

    @property
    def variable(self) -> str:
        return f"THERMOSTAT_{self.setting.upper()}"

    def option(self) -> click.Option:
        """The click option, defaulting to "not given" (None): :func:`resolve` fills it."""
        shown = f"{self.default:,}" if isinstance(self.default, int) else f"{self.default:g}"
        return click.Option([self.flag], type=self.kind, default=None, metavar=self.metavar,
                            help=f"{self.help} (default {shown}; {self.variable} sets it)")


def _policy_option(name: str, flag: str | None = None, help: str | None = None) -> SettingOption:
    """The drift policy's knob ``name`` as an option: its setting and default are the policy's, and
    its flag and help unless given."""
    knob, default = next((knob, default) for field, knob, default in policy_knobs() if field == name)
    return SettingOption(flag or str(knob.flag), knob.setting, default, help or knob.help,
                         int if knob.kind == "count" else float)


_BINS: Final = SettingOption("--bins", "n_bins", calibration.DEFAULT_N_BINS, "number of ECE bins", int, "M")
_LOWER: Final = SettingOption("--lower", "bounds_lower", calibration.DEFAULT_BOUNDS[0], "lowest T searched", float)
_UPPER: Final = SettingOption("--upper", "bounds_upper", calibration.DEFAULT_BOUNDS[1], "highest T searched", float)
_MIN_COUNT: Final = _policy_option("min_bin_count", "--min-count", "bins with fewer examples are sparse")

# Where the drift command's meaning differs from the monitor's words in the policy.
_DRIFT_HELP: Final = {
    "min_window": "fewer labelled rows in WINDOW are refused (exit 2): too few to decide",
    "n_resamples": "bootstrap resamples of the reported estimators' intervals and of the consistency test",
}
# The drift decision's options (the ECE's binning, the policy's knobs): drift's and diagnose's.
_DRIFT: Final = (
    _BINS,
    *(_policy_option(name, help=_DRIFT_HELP.get(name)) for name, knob, _ in policy_knobs() if knob.flag is not None),
)

#: Each analysis command's options that stand for a setting.
COMMAND_OPTIONS: Final[dict[str, tuple[SettingOption, ...]]] = {
    "fit": (_LOWER, _UPPER, _BINS),
    "evaluate": (_BINS, _MIN_COUNT),
    "sweep": (SettingOption("--confidence-level", "gate_confidence_level", calibration.DEFAULT_CONFIDENCE_LEVEL,
                            "Wilson interval level", float),),
    "qualify": (
        SettingOption("--min-total", "min_total", calibration.DEFAULT_MIN_TOTAL, "minimum examples", int),
        SettingOption("--min-per-class", "min_per_class", calibration.DEFAULT_MIN_PER_CLASS,
                      "minimum examples per class", int),
        SettingOption("--max-tv", "max_tv_distance", calibration.DEFAULT_MAX_TV_DISTANCE,
                      "maximum total-variation distance of class proportions to --reference", float),
    ),
    "compare": (
        _LOWER, _UPPER, _BINS,
        SettingOption("--resamples", "bootstrap_resamples", calibration.DEFAULT_BOOTSTRAP_RESAMPLES,
                      "bootstrap resamples", int),
        SettingOption("--confidence-level", "bootstrap_confidence_level", calibration.DEFAULT_CONFIDENCE_LEVEL,
                      "interval level", float),
        _policy_option("seed", help="bootstrap seed"),
    ),
    "drift": _DRIFT,
    "diagnose": (
        *_DRIFT,
        SettingOption("--accuracy-floor", "min_accuracy", DEFAULT_MIN_ACCURACY,
                      "labelled accuracy of WINDOW below this is an accuracy collapse (the acceptance floor)", float),
    ),
}


def resolve(args: SimpleNamespace, command: str, read_settings: Callable[[], Any] | None = None) -> None:
    """Fill each of ``command``'s setting options not given on the command line from the settings
    (``THERMOSTAT_*``, else the declared default), and keep the settings as ``args.settings`` (the
    drift command's policy starts from their drift section). ``read_settings`` makes them
    (default: the environment's ``ThermostatSettings``); a setting the environment gets wrong is
    refused there, naming its variable."""
    if read_settings is None:
        from flows.settings import ThermostatSettings  # pydantic-settings: only once parsed

        read_settings = ThermostatSettings
    args.settings = settings = read_settings()
    missing: Sequence[SettingOption] = [o for o in COMMAND_OPTIONS.get(command, ()) if getattr(args, o.dest) is None]
    for option in missing:
        setattr(args, option.dest, getattr(settings, option.setting))

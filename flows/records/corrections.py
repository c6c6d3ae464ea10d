"""Where a prior-corrected version comes from: tags written with it, read back by the monitor.

The correction itself is part of the version's record (:attr:`flows.records.versions.VersionRecord.prior_correction`,
never changed after registration). :class:`CorrectionProvenance` says how it was made: the parent
version, whether labelled traffic verified it (``thermostat.prior_correction.confirmed``:
``false`` when it was made from unlabelled traffic, and then the next labelled check must
confirm it or undo it), and on how many rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

__all__ = ["CONFIRMED_TAG", "CorrectionProvenance"]

_PREFIX = "thermostat.prior_correction."
CONFIRMED_TAG = _PREFIX + "confirmed"

Source = Literal["labelled traffic", "unlabelled traffic", "undo"]


@dataclass(frozen=True, slots=True)
class CorrectionProvenance:
    """How a prior-corrected (or un-corrected) version was made.

    ``parent_version`` the version it derives from (same checkpoint and T); ``source`` what
    judged it; ``confirmed`` whether labelled rows verified it (paired bootstrap of the NLL);
    ``verify_n`` the labelled rows that did (0: none); ``shift_event_id`` the label-shift event
    that started it (None: by hand).

    Examples
    --------
    >>> made = CorrectionProvenance("3", "unlabelled traffic", confirmed=False, verify_n=0)
    >>> made.to_tags()[CONFIRMED_TAG]
    'false'
    >>> CorrectionProvenance.from_tags(made.to_tags()) == made, CorrectionProvenance.from_tags({})
    (True, None)
    """

    parent_version: str
    source: Source
    confirmed: bool
    verify_n: int
    shift_event_id: str | None = None

    def to_tags(self) -> dict[str, str]:
        return {_PREFIX + "parent_version": self.parent_version, _PREFIX + "source": self.source,
                CONFIRMED_TAG: "true" if self.confirmed else "false", _PREFIX + "verify_n": str(self.verify_n),
                _PREFIX + "shift_event_id": self.shift_event_id or "none"}

    @classmethod
    def from_tags(cls, tags: Mapping[str, str]) -> CorrectionProvenance | None:
        """The provenance a version's tags hold; None for a version that is no prior correction's."""
        if CONFIRMED_TAG not in tags:
            return None
        source = tags.get(_PREFIX + "source", "")
        if source not in ("labelled traffic", "unlabelled traffic", "undo"):
            raise ValueError(f"tag {_PREFIX + 'source'!r} is {source!r}; expected 'labelled traffic', "
                             "'unlabelled traffic' or 'undo'")
        event = tags.get(_PREFIX + "shift_event_id", "none")
        return cls(parent_version=tags.get(_PREFIX + "parent_version", ""), source=source,  # type: ignore[arg-type]
                   confirmed=tags[CONFIRMED_TAG] == "true", verify_n=int(tags.get(_PREFIX + "verify_n", "0")),
                   shift_event_id=None if event == "none" else event)

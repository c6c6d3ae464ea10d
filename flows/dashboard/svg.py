"""Server-side SVG charts for the dashboard: no JavaScript, no fonts or files from elsewhere.

Every chart is a pure function of plain records and returns one ``<svg>`` element as text.
Elements carry their meaning as attributes (``<g class="series" data-version="3">``,
``<path class="point drift-point">``), so a test or a script can read a chart without
pixels, and the charts stay readable without colour: each series has its own dash pattern and
an end label, each verdict its own marker shape (calibrated ●, undetermined ○, drift ▲, insufficient data □), and each
annotation a text label. Hovering a point shows its numbers (the SVG ``<title>``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import count
from typing import Any, Final, Literal

from flows.dashboard.text import html_text

__all__ = [
    "COLOURS",
    "DASHES",
    "Annotation",
    "Band",
    "Point",
    "Reference",
    "Series",
    "marker_path",
    "reliability_chart",
    "swatch",
    "time_chart",
]

# Okabe–Ito: distinguishable with the common colour-vision deficiencies; never the only cue.
COLOURS: Final = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#999933")
DASHES: Final = ("", "7 4", "2 3", "9 3 2 3", "14 4", "4 2 4 6", "1 2", "10 2 2 2 2 2")
Marker = Literal["ok", "calibrated", "undetermined", "drift", "insufficient_data", "registration", "other"]

_ids = count(1)


def _attrs(values: Mapping[str, str | None]) -> str:
    return "".join(f' {key}="{html_text(value)}"' for key, value in values.items() if value is not None)


def _colour(style: int) -> str:
    return COLOURS[style % len(COLOURS)]


def _dash(style: int) -> str:
    return DASHES[style % len(DASHES)]


@dataclass(frozen=True, slots=True)
class Point:
    """One value at one time; ``title`` is its tooltip, ``href`` where clicking it goes."""

    at: datetime
    value: float
    marker: Marker = "ok"
    title: str = ""
    href: str | None = None
    attrs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Series:
    """A line through points in time order (``style`` picks its colour and dash pattern)."""

    label: str
    style: int
    points: tuple[Point, ...]
    attrs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Stretch:
    """What a reference line and a band share: a style and a stretch [start, end] of the time axis.

    ``start``/``end`` None: the chart's edge. Keyword-only, after the fields of each kind.
    """

    style: int = 6
    start: datetime | None = None
    end: datetime | None = None
    attrs: Mapping[str, str] = field(default_factory=dict)

    def x_span(self, frame: _Frame) -> tuple[float, float]:
        """Where the stretch starts and ends on ``frame``'s x axis."""
        return (frame.left if self.start is None else frame.x(self.start),
                frame.x_end if self.end is None else frame.x(self.end))


@dataclass(frozen=True, slots=True)
class Reference(_Stretch):
    """A horizontal line at ``value`` over [start, end] (None: the chart's edge)."""

    value: float
    label: str
    kind: Literal["baseline", "threshold"]


@dataclass(frozen=True, slots=True)
class Band(_Stretch):
    """A shaded band [low, high] over [start, end] (None: the chart's edge)."""

    low: float
    high: float
    label: str
    kind: Literal["tolerance", "interval"]


@dataclass(frozen=True, slots=True)
class Annotation:
    """A vertical line at ``at`` with a text label (a refit, an alias move, a refusal)."""

    at: datetime
    label: str
    kind: Literal["refit", "refit-refused", "alias-move"]
    title: str = ""
    attrs: Mapping[str, str] = field(default_factory=dict)


def marker_path(marker: Marker, x: float, y: float, size: float = 4.5) -> str:
    """The SVG path of a marker shape centred on (x, y): circle, triangle, square, diamond."""
    if marker == "drift":
        s = size * 1.45
        return f"M{x:.1f},{y - s:.1f} L{x + s:.1f},{y + s * 0.8:.1f} L{x - s:.1f},{y + s * 0.8:.1f} Z"
    if marker == "insufficient_data":
        return f"M{x - size:.1f},{y - size:.1f} h{2 * size:.1f} v{2 * size:.1f} h{-2 * size:.1f} Z"
    if marker == "registration":
        s = size * 1.3
        return f"M{x:.1f},{y - s:.1f} L{x + s:.1f},{y:.1f} L{x:.1f},{y + s:.1f} L{x - s:.1f},{y:.1f} Z"
    r = size * 0.9
    return f"M{x - r:.1f},{y:.1f} a{r:.1f},{r:.1f} 0 1,0 {2 * r:.1f},0 a{r:.1f},{r:.1f} 0 1,0 {-2 * r:.1f},0"


def swatch(style: int, *, label: str, marker: Marker | None = None, width: int = 34) -> str:
    """A small inline SVG sample of a series' line (for an HTML legend)."""
    line = (f'<line x1="1" y1="7" x2="{width - 1}" y2="7" stroke="{_colour(style)}" stroke-width="2.5"'
            f'{_attrs({"stroke-dasharray": _dash(style) or None})}/>')
    shape = "" if marker is None else f'<path d="{marker_path(marker, width / 2, 7)}" {_marker_paint(marker, style)}/>'
    return (f'<svg class="swatch" width="{width}" height="14" viewBox="0 0 {width} 14" role="img" '
            f'aria-label="{html_text(label)}">{line}{shape}</svg>')


def _marker_paint(marker: Marker, style: int) -> str:
    colour = _colour(style)
    if marker in ("insufficient_data", "undetermined"):
        return f'fill="white" stroke="{colour}" stroke-width="1.8"'
    if marker == "drift":
        return f'fill="{colour}" stroke="black" stroke-width="1.2"'
    if marker == "registration":
        return f'fill="white" stroke="{colour}" stroke-width="2"'
    return f'fill="{colour}" stroke="white" stroke-width="0.8"'


# ------------------------------------------------------------------------------- scales


_TIME_STEPS: Final = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400,
                      172800, 604800, 1209600, 2592000, 7776000, 31536000)


def _nice_step(span: float, target: int) -> float:
    raw = span / max(target, 1)
    magnitude = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1.0
    for factor in (1, 2, 2.5, 5, 10):
        if factor * magnitude >= raw:
            return factor * magnitude
    return 10 * magnitude


def _value_ticks(low: float, high: float, target: int = 5) -> list[float]:
    step = _nice_step(high - low, target)
    first = math.ceil(low / step - 1e-9) * step
    ticks, value = [], first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 12))
        value += step
    return ticks


def _time_ticks(start: datetime, end: datetime, target: int = 6) -> tuple[list[datetime], str]:
    span = (end - start).total_seconds()
    step = next((s for s in _TIME_STEPS if span / s <= target), None)
    if step is None:  # a span of decades: whole numbers of years, at most ``target`` ticks still
        step = _TIME_STEPS[-1] * math.ceil(span / target / _TIME_STEPS[-1])
    epoch = math.ceil(start.timestamp() / step) * step
    ticks = []
    while epoch <= end.timestamp():
        ticks.append(datetime.fromtimestamp(epoch, tz=UTC))
        epoch += step
    form = "%H:%M:%S" if step < 60 else "%H:%M" if step < 86400 else "%Y-%m-%d"
    if span > 2 * 86400 and step < 86400:
        form = "%m-%d %H:%M"
    return ticks, form


def _format_value(value: float) -> str:
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 1:
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return f"{value:.3f}".rstrip("0").rstrip(".")


@dataclass(frozen=True, slots=True)
class _Frame:
    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    t0: float
    t1: float
    y0: float
    y1: float

    def x(self, at: datetime) -> float:
        return self.left + (at.timestamp() - self.t0) / (self.t1 - self.t0) * (self.width - self.left - self.right)

    def y(self, value: float) -> float:
        clipped = min(max(value, self.y0), self.y1)
        return self.top + (self.y1 - clipped) / (self.y1 - self.y0) * (self.height - self.top - self.bottom)

    @property
    def x_end(self) -> float:
        return float(self.width - self.right)

    @property
    def y_end(self) -> float:
        return float(self.height - self.bottom)


def _time_range(times: Sequence[datetime]) -> tuple[float, float]:
    if not times:
        now = datetime.now(UTC).timestamp()
        return now - 3600, now
    t0, t1 = min(times).timestamp(), max(times).timestamp()
    pad = max((t1 - t0) * 0.04, 5.0)
    return t0 - pad, t1 + pad * 2.5  # room on the right for the series' end labels


# ------------------------------------------------------------------------------- charts


def time_chart(
    *,
    title: str,
    y_label: str,
    series: Sequence[Series],
    references: Sequence[Reference] = (),
    bands: Sequence[Band] = (),
    annotations: Sequence[Annotation] = (),
    css_class: str = "",
    attrs: Mapping[str, str] | None = None,
    width: int = 600,
    height: int = 250,
    y_floor: float | None = 0.0,
    empty_text: str = "no checks yet",
) -> str:
    """A chart of values over time: one line per series, reference lines, bands, annotations.

    Points are drawn by verdict: ``calibrated`` (and ``ok``, a check recorded before verdicts said
    whether calibration was established) a filled circle, ``undetermined`` a hollow circle,
    ``drift`` a larger triangle with a
    black outline (``class="point drift-point"``), ``insufficient_data`` a hollow square,
    ``registration`` a hollow diamond. Each series ends in a text label.

    Examples
    --------
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> svg = time_chart(title="ECE", y_label="ECE", series=[Series("v1", 0, (
    ...     Point(t, 0.02), Point(t + timedelta(hours=1), 0.09, marker="drift")), {"data-version": "1"})])
    >>> svg.count('class="point drift-point"'), '<g class="series" data-version="1">' in svg
    (1, True)
    """
    number = next(_ids)
    head = (f'<svg class="chart {html_text(css_class)}"{_attrs(dict(attrs or {}))} role="img" '
            f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
            f'aria-labelledby="chart-{number}-title" xmlns="http://www.w3.org/2000/svg">'
            f'<title id="chart-{number}-title">{html_text(title)}</title>')
    if not any(s.points for s in series):
        return (head + f'<text class="empty" x="{width / 2}" y="{height / 2}" text-anchor="middle">'
                f'{html_text(empty_text)}</text></svg>')
    frame = _time_frame(series, references, bands, annotations, width=width, height=height, y_floor=y_floor)
    parts = [head, f'<text class="chart-title" x="{frame.left}" y="16">{html_text(title)}</text>',
             _axes(frame, y_label)]
    parts += [_band(frame, band) for band in bands]
    parts += [_reference(frame, reference, references) for reference in references]
    parts += [_annotation(frame, annotation, row=index % 3)
              for index, annotation in enumerate(sorted(annotations, key=lambda a: a.at))]
    parts += [_series(frame, one) for one in series]
    parts.append("</svg>")
    return "".join(parts)


def _time_frame(series: Sequence[Series], references: Sequence[Reference], bands: Sequence[Band],
                annotations: Sequence[Annotation], *, width: int, height: int, y_floor: float | None) -> _Frame:
    """The frame that holds every point, line, band and annotation (``y_floor``: the lowest value shown, if any)."""
    times = [p.at for s in series for p in s.points] + [a.at for a in annotations]
    spans: list[datetime | None] = [t for r in references for t in (r.start, r.end)]
    spans += [t for b in bands for t in (b.start, b.end)]
    times += [t for t in spans if t is not None]
    values = [p.value for s in series for p in s.points if math.isfinite(p.value)]
    values += [r.value for r in references] + [v for b in bands for v in (b.low, b.high)]
    low = min(values) if y_floor is None else min(y_floor, min(values))
    high = max(values)
    if high - low < 1e-12:
        spread = abs(low) * 0.05 or 1.0
        low, high = (low - spread if y_floor is None else low), high + spread
    high += (high - low) * 0.08
    if y_floor is None:
        low -= (high - low) * 0.05
    t0, t1 = _time_range(times)
    top = 24 + (12 * min(len(annotations), 3) if annotations else 0)  # annotation labels sit above the plot
    return _Frame(width=width, height=height, left=56, right=14, top=top, bottom=38, t0=t0, t1=t1, y0=low, y1=high)


def _band(frame: _Frame, band: Band) -> str:
    x0, x1 = band.x_span(frame)
    y_top, y_bottom = frame.y(band.high), frame.y(band.low)
    return (f'<rect class="band {band.kind}"{_attrs(dict(band.attrs))} x="{x0:.1f}" y="{y_top:.1f}" '
            f'width="{max(x1 - x0, 1):.1f}" height="{max(y_bottom - y_top, 1):.1f}" fill="{_colour(band.style)}" '
            f'fill-opacity="0.10" stroke="none"><title>{html_text(band.label)}</title></rect>')


def _reference(frame: _Frame, reference: Reference, references: Sequence[Reference]) -> str:
    """A reference line with its label, left to the tooltip where another reference's label sits."""
    x0, x1 = reference.x_span(frame)
    y = frame.y(reference.value)
    dash = "1 0" if reference.kind == "baseline" else "5 3"
    below = reference.kind == "baseline" and y + 14 < frame.y_end
    # A label that would sit on another reference's label is left to the tooltip and the key.
    crowded = not below and any(
        other is not reference and other.kind != reference.kind and other.start == reference.start
        and abs(frame.y(other.value) - y) < 12 for other in references)
    label = "" if crowded and reference.kind == "baseline" else (
        f'<text x="{x0 + (3 if reference.start is None else 14):.1f}" y="{y + (11 if below else -3):.1f}" '
        f'class="reference-label">{html_text(reference.label)}</text>')
    return (f'<g class="reference {reference.kind}"{_attrs(dict(reference.attrs))}>'
            f'<line x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}" stroke="{_colour(reference.style)}" '
            f'stroke-width="{1.0 if reference.kind == "baseline" else 1.4}" stroke-dasharray="{dash}" opacity="0.8"/>'
            f'{label}<title>{html_text(reference.label)}: {reference.value:.4g}</title></g>')


def _annotation(frame: _Frame, annotation: Annotation, *, row: int) -> str:
    """A vertical line with its label in one of three rows above the plot (so neighbours do not overlap)."""
    x = frame.x(annotation.at)
    y_text = 32 + row * 12
    anchor = "end" if x > frame.x_end - 120 else "start"
    shift = -3 if anchor == "end" else 3
    dash = {"refit": "2 2", "refit-refused": "6 2 1 2", "alias-move": "4 3"}[annotation.kind]
    return (f'<g class="annotation {annotation.kind}"{_attrs(dict(annotation.attrs))}>'
            f'<line x1="{x:.1f}" y1="{y_text - 9}" x2="{x:.1f}" y2="{frame.y_end:.1f}" stroke="#444" '
            f'stroke-dasharray="{dash}" stroke-width="1.1"/>'
            f'<text x="{x + shift:.1f}" y="{y_text}" text-anchor="{anchor}" class="annotation-label">'
            f'{html_text(annotation.label)}</text>'
            f'<title>{html_text(annotation.title or annotation.label)}</title></g>')


def _axes(frame: _Frame, y_label: str) -> str:
    parts = ['<g class="axes" font-size="10">']
    for value in _value_ticks(frame.y0, frame.y1):
        y = frame.y(value)
        parts.append(f'<line x1="{frame.left}" y1="{y:.1f}" x2="{frame.x_end:.1f}" y2="{y:.1f}" stroke="#e3e3e3"/>'
                     f'<text x="{frame.left - 4}" y="{y + 3:.1f}" text-anchor="end">{_format_value(value)}</text>')
    start = datetime.fromtimestamp(frame.t0, tz=UTC)
    ticks, form = _time_ticks(start, datetime.fromtimestamp(frame.t1, tz=UTC))
    for tick in ticks:
        x = frame.x(tick)
        parts.append(f'<line x1="{x:.1f}" y1="{frame.y_end:.1f}" x2="{x:.1f}" y2="{frame.y_end + 4:.1f}" stroke="#666"/>'
                     f'<text x="{x:.1f}" y="{frame.y_end + 15:.1f}" text-anchor="middle">{tick.strftime(form)}</text>')
    parts.append(
        f'<line x1="{frame.left}" y1="{frame.y_end:.1f}" x2="{frame.x_end:.1f}" y2="{frame.y_end:.1f}" stroke="#666"/>'
        f'<line x1="{frame.left}" y1="{frame.top}" x2="{frame.left}" y2="{frame.y_end:.1f}" stroke="#666"/>'
        f'<text x="{(frame.left + frame.x_end) / 2:.1f}" y="{frame.height - 4}" text-anchor="middle">'
        f'time (UTC{", " + start.strftime("%Y-%m-%d") if form.startswith("%H") else ""})</text>'
        f'<text transform="translate(12,{(frame.top + frame.y_end) / 2:.1f}) rotate(-90)" text-anchor="middle">'
        f'{html_text(y_label)}</text></g>'
    )
    return "".join(parts)


def _series(frame: _Frame, series: Series) -> str:
    points = sorted((p for p in series.points if math.isfinite(p.value)), key=lambda p: p.at)
    colour, dash = _colour(series.style), _dash(series.style)
    parts = [f'<g class="series"{_attrs(dict(series.attrs))}>']
    if len(points) > 1:
        path = " ".join(f"{'M' if i == 0 else 'L'}{frame.x(p.at):.1f},{frame.y(p.value):.1f}"
                        for i, p in enumerate(points))
        parts.append(f'<path class="line" d="{path}" fill="none" stroke="{colour}" stroke-width="2.2"'
                     f'{_attrs({"stroke-dasharray": dash or None})}/>')
    for point in points:
        x, y = frame.x(point.at), frame.y(point.value)
        css = "point drift-point" if point.marker == "drift" else f"point {point.marker.replace('_', '-')}-point"
        shape = (f'<path class="{css}"{_attrs(dict(point.attrs))} data-verdict="{point.marker}" '
                 f'data-value="{point.value!r}" data-at="{point.at.isoformat()}" '
                 f'd="{marker_path(point.marker, x, y)}" {_marker_paint(point.marker, series.style)}>'
                 f'<title>{html_text(point.title or f"{series.label}: {point.value:.4g}")}</title></path>')
        parts.append(shape if point.href is None else f'<a href="{html_text(point.href)}">{shape}</a>')
    if points:
        last = points[-1]
        parts.append(f'<text class="series-label" x="{frame.x(last.at) + 8:.1f}" y="{frame.y(last.value) + 4:.1f}" '
                     f'fill="{colour}">{html_text(series.label)}</text>')
    parts.append("</g>")
    return "".join(parts)


def reliability_chart(
    bins: Sequence[Mapping[str, Any]], *, title: str, size: int = 270, attrs: Mapping[str, str] | None = None
) -> str:
    """A reliability diagram: accuracy per confidence bin against the diagonal.

    Bars span their bin; a black tick marks the bin's mean confidence (the gap is the vertical
    distance to it); the count is written in each bar; sparse bins (``sparse``: too few rows
    to read) are hatched grey. ``bins`` are :meth:`calibration.ReliabilityTable.rows`.

    Examples
    --------
    >>> svg = reliability_chart([{"lower": 0.5, "upper": 1.0, "count": 12, "mean_confidence": 0.8,
    ...                           "accuracy": 0.6, "sparse": False}], title="v1")
    >>> svg.count('class="bin"')
    1
    """
    number = next(_ids)
    square = _UnitSquare(size)
    parts = [
        f'<svg class="chart reliability"{_attrs(dict(attrs or {}))} role="img" width="{size}" height="{size}" '
        f'viewBox="0 0 {size} {size}" aria-labelledby="rel-{number}-title" xmlns="http://www.w3.org/2000/svg">'
        f'<title id="rel-{number}-title">{html_text(title)}</title>'
        f'<defs><pattern id="hatch-{number}" width="5" height="5" patternUnits="userSpaceOnUse" '
        f'patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="5" stroke="#888" stroke-width="1.5"/>'
        f'</pattern></defs>',
        f'<text class="chart-title" x="4" y="14">{html_text(title)}</text>',
        _unit_axes(square),
        f'<line class="diagonal" x1="{square.x(0):.1f}" y1="{square.y(0):.1f}" x2="{square.x(1):.1f}" '
        f'y2="{square.y(1):.1f}" stroke="#333" stroke-dasharray="4 3"><title>perfect calibration</title></line>',
    ]
    parts += [_bin(square, row, hatch=f"url(#hatch-{number})") for row in bins
              if int(row.get("count") or 0) != 0 and row.get("accuracy") is not None]
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True, slots=True)
class _UnitSquare:
    """The reliability diagram's plot: [0, 1] on both axes, in a square of ``size`` pixels."""

    size: int
    left: int = 40
    bottom: int = 34
    top: int = 22
    right: int = 8

    @property
    def width(self) -> int:
        return self.size - self.left - self.right

    @property
    def height(self) -> int:
        return self.size - self.top - self.bottom

    def x(self, value: float) -> float:
        return self.left + value * self.width

    def y(self, value: float) -> float:
        return self.top + (1.0 - value) * self.height


def _unit_axes(square: _UnitSquare) -> str:
    """Grid lines and ticks at quarters on both axes, and the axes' names."""
    x, y, left = square.x, square.y, square.left
    parts = ['<g class="axes" font-size="10">']
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<line x1="{left}" y1="{y(tick):.1f}" x2="{x(1):.1f}" y2="{y(tick):.1f}" stroke="#eee"/>'
                     f'<text x="{left - 4}" y="{y(tick) + 3:.1f}" text-anchor="end">{_format_value(tick)}</text>'
                     f'<text x="{x(tick):.1f}" y="{y(0) + 13:.1f}" text-anchor="middle">{_format_value(tick)}</text>')
    parts.append(f'<text x="{left + square.width / 2:.1f}" y="{square.size - 4}" text-anchor="middle">'
                 f'confidence (top label)</text>'
                 f'<text transform="translate(11,{square.top + square.height / 2:.1f}) rotate(-90)" '
                 f'text-anchor="middle">accuracy</text></g>')
    return "".join(parts)


def _bin(square: _UnitSquare, row: Mapping[str, Any], *, hatch: str) -> str:
    """One bin's bar (``hatch`` filling a sparse one), its mean-confidence tick, its count and tooltip."""
    x, y = square.x, square.y
    n = int(row.get("count") or 0)
    lower, upper = float(row["lower"]), float(row["upper"])
    accuracy, confidence = float(row["accuracy"]), float(row.get("mean_confidence") or 0.0)
    sparse = bool(row.get("sparse"))
    fill = hatch if sparse else COLOURS[0]
    tip = (f"bin ({lower:.3f}, {upper:.3f}]: n = {n}, accuracy {accuracy:.3f}, mean confidence "
           f"{confidence:.3f}{' (sparse: noise)' if sparse else ''}")
    return (f'<g class="bin" data-count="{n}" data-accuracy="{accuracy!r}" data-sparse="{str(sparse).lower()}">'
            f'<rect x="{x(lower) + 0.5:.1f}" y="{y(accuracy):.1f}" width="{max(x(upper) - x(lower) - 1, 1):.1f}" '
            f'height="{max(y(0) - y(accuracy), 0.5):.1f}" fill="{fill}" fill-opacity="{0.55 if sparse else 0.8}" '
            f'stroke="{"#888" if sparse else "white"}"/>'
            f'<line x1="{x(lower) + 1:.1f}" y1="{y(confidence):.1f}" x2="{x(upper) - 1:.1f}" '
            f'y2="{y(confidence):.1f}" stroke="black" stroke-width="2.2" class="mean-confidence"/>'
            f'<text x="{(x(lower) + x(upper)) / 2:.1f}" y="{y(0) - 3:.1f}" text-anchor="middle" font-size="8" '
            f'transform="rotate(-90 {(x(lower) + x(upper)) / 2:.1f} {y(0) - 3:.1f})" dx="10" dy="3">{n}</text>'
            f'<title>{html_text(tip)}</title></g>')

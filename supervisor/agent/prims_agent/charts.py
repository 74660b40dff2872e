"""The data of a matplotlib figure, as `application/vnd.prims.chart+json`
(E2B's chart format; docs/tools.md, "Chart data"): what kind of chart each
of its axes draws, its titles, labels, ticks and scales, and its series,
bars, wedges or boxes.

It runs in the session's interpreter on the user's figure, so it imports
nothing (matplotlib's modules are looked up only where the figure already
loaded them), is bounded in points, elements, characters, bytes and time,
and never raises: a chart it cannot read is `unknown`, and one that fails
is left out."""

import datetime
import itertools
import math
import re
import sys
import time

from prims_agent.channel import ENCODER
from prims_agent.text import cap

MIME = "application/vnd.prims.chart+json"
# Points (of every series and every box's outliers) of one figure.
POINTS_MAX = 10000
# Series, bars, wedges or boxes of one chart.
ELEMENTS_MAX = 1000
# Charts of a superchart (axes of one figure).
AXES_MAX = 32
# Ticks of one axis.
TICKS_MAX = 100
# Characters of a title, label, tick label or category.
TEXT_MAX = 256
# The chart's JSON: past this it is extracted again with fewer points and
# elements (then left out).
CHART_BYTES_MAX = 512 * 1024
# Seconds one figure may take; past this the chart is left out.
TIME_MAX = 2.0

# A unit in a label: "Time (s)", "Price [USD]".
_UNIT = re.compile(r"\s\((.*?)\)|\[(.*?)\]")
# A tick label's mathtext wrapper: "$\mathdefault{10^{2}}$".
_MATHDEFAULT = re.compile(r"^\$\\mathdefault\{(.*)\}\$$")
# (points, elements) of each try, the next when the JSON is too big.
_TRIES = ((POINTS_MAX, ELEMENTS_MAX), (POINTS_MAX // 5, ELEMENTS_MAX // 5), (POINTS_MAX // 50, ELEMENTS_MAX // 50))


class _TooSlow(Exception):
    pass


class _Budget:
    """What one figure's extraction may still take."""

    def __init__(self, points, elements, deadline):
        self.points = points
        self.elements = elements
        self.deadline = deadline

    def check(self):
        if time.monotonic() > self.deadline:
            raise _TooSlow()


def chart(figure):
    """The chart data of the matplotlib Figure `figure` (a dict of JSON
    values), or None: nothing drawn, too big, too slow, or it failed. An
    interrupt (the cell's time limit) goes on to the cell."""
    try:
        deadline = time.monotonic() + TIME_MAX
        for points, elements in _TRIES:
            data = _figure(figure, _Budget(points, elements, deadline))
            if data is None or len(ENCODER.encode(data)) <= CHART_BYTES_MAX:
                return data
        return None
    except KeyboardInterrupt:
        raise
    except BaseException:
        return None


def _figure(figure, budget):
    axes = [ax for ax in figure.get_axes() if getattr(ax, "_colorbar", None) is None]
    if not axes or not any(ax.has_data() for ax in axes):
        return None
    if len(axes) == 1:
        return _axes(axes[0], budget)
    suptitle = getattr(figure, "_suptitle", None)
    title = _title(suptitle.get_text()) if suptitle is not None else None
    out = {"type": "superchart", "title": title, "elements": []}
    shown = axes[:AXES_MAX]
    left = budget.points
    for i, ax in enumerate(shown):
        # Each chart may take an equal share of the points still left.
        share = left // (len(shown) - i)
        part = _Budget(share, budget.elements, budget.deadline)
        out["elements"].append(_axes(ax, part))
        left -= share - part.points
    if len(axes) > len(shown) or any(c.get("truncated") for c in out["elements"]):
        out["truncated"] = True
    return out


def _axes(ax, budget):
    """One axes' chart."""
    budget.check()
    kind, parts = _kind(ax)
    title = None
    for loc in ("center", "left", "right"):
        title = _title(ax.get_title(loc))
        if title is not None:
            break
    if kind == "unknown":
        return {"type": "unknown", "title": title, "elements": []}
    if kind == "pie":
        return _pie(parts, title, budget)
    x, y = _Axis(ax.xaxis), _Axis(ax.yaxis)
    if kind == "line":
        elements, cut = _series(parts, budget, "Line", lambda line: line.get_xydata(), x, y)
        swap = False
    elif kind == "scatter":
        elements, cut = _series(parts, budget, "Series", lambda c: c.get_offsets(), x, y)
        swap = False
    elif kind == "bar":
        elements, cut, swap = _bars(parts, budget, x, y)
    else:
        elements, cut, swap = _boxes(parts, budget, x, y)
    out = {"type": kind, "title": title}
    # Bars and boxes: x_* is the axis of the categories, as E2B has it.
    first, second = (y, x) if swap else (x, y)
    out.update(first.fields("x"))
    out.update(second.fields("y"))
    out["elements"] = elements
    if cut:
        out["truncated"] = True
    return out


def _kind(ax):
    """(The kind of chart `ax` draws, the artists its data is in)."""
    import matplotlib.collections as mcollections
    import matplotlib.patches as mpatches
    from matplotlib.container import BarContainer

    if getattr(ax, "name", None) != "rectilinear":
        return "unknown", None
    if len(ax.images) or len(ax.tables) or len(ax.artists):
        return "unknown", None
    lines = [line for line in ax.lines if not _reference(ax, line)]
    collections = list(ax.collections)
    patches = list(ax.patches)
    if not lines and not collections and not patches:
        return "unknown", None
    boxes = _box_parts(lines, patches)
    if boxes is not None:
        return "box_and_whisker", boxes
    if lines and not collections and not patches:
        return "line", lines
    # As E2B: a two-point horizontal or vertical line (a threshold drawn
    # with plot) does not make scatter, bars or a pie something else.
    others = [line for line in lines if not _straight(line)]
    if others:
        return "unknown", None
    if collections and not patches and all(type(c) is mcollections.PathCollection for c in collections):
        return "scatter", collections
    if patches and not collections:
        if all(isinstance(p, mpatches.Wedge) for p in patches):
            return "pie", patches
        bars = [c for c in ax.containers if isinstance(c, BarContainer)]
        if bars and all(isinstance(p, mpatches.Rectangle) for p in patches):
            return "bar", bars
    return "unknown", None


def _reference(ax, line):
    """axhline, axvline, axline: not data."""
    return line.get_transform() is not ax.transData or type(line).__name__ == "_AxLine"


def _straight(line):
    xy = line.get_xydata()
    if len(xy) != 2:
        return False
    return xy[0][0] == xy[1][0] or xy[0][1] == xy[1][1]


class _Axis:
    """An axis: its scale, ticks and how its values read."""

    def __init__(self, axis):
        self.axis = axis
        converter = axis.get_converter() if hasattr(axis, "get_converter") else getattr(axis, "converter", None)
        self.dates = None
        self.categories = None
        dates = sys.modules.get("matplotlib.dates")
        category = sys.modules.get("matplotlib.category")
        date_types = tuple(
            getattr(dates, name)
            for name in ("DateConverter", "_SwitchableDateConverter", "ConciseDateConverter")
            if dates is not None and isinstance(getattr(dates, name, None), type)
        )
        if date_types and isinstance(converter, date_types):
            self.dates = dates
            self.scale = "datetime"
        elif category is not None and isinstance(converter, category.StrCategoryConverter):
            mapping = getattr(axis.get_units(), "_mapping", None) or {}
            self.categories = {}
            for name, value in itertools.islice(mapping.items(), ELEMENTS_MAX * 10):
                self.categories.setdefault(float(value), _text(name))
            self.scale = "categorical"
        else:
            self.scale = _text(axis.get_scale())
        lo, hi = sorted(float(v) for v in axis.get_view_interval())
        slack = (hi - lo) * 1e-9
        locs = list(axis.get_majorticklocs())
        texts = [t.get_text() for t in axis.get_majorticklabels()]
        if len(texts) != len(locs):
            texts = list(axis.get_major_formatter().format_ticks(locs))
        self.ticks, self.tick_labels = [], []
        for loc, text in zip(locs, texts):
            loc = _number(loc)
            if loc is None or not lo - slack <= loc <= hi + slack:
                continue
            if len(self.ticks) >= TICKS_MAX:
                break
            self.ticks.append(self.date(loc) if self.dates is not None else _rounded(loc))
            self.tick_labels.append(_tick_text(text))
        # Labels the code gave the ticks (xticks(positions, names)), which
        # name a bar or box there; not a number's own formatting.
        self.named = {}
        ticker = sys.modules.get("matplotlib.ticker")
        numeric = (ticker.ScalarFormatter, ticker.LogFormatter) if ticker is not None else ()
        if not isinstance(axis.get_major_formatter(), numeric):
            for loc, text in zip(locs[:ELEMENTS_MAX], texts):
                loc = _number(loc)
                if loc is not None and text:
                    self.named.setdefault(loc, _tick_text(text))

    def fields(self, name):
        label = _title(self.axis.get_label_text())
        unit = None
        if label is not None:
            m = _UNIT.search(label)
            if m:
                unit = m.group(1) or m.group(2)
        return {
            name + "_label": label,
            name + "_unit": unit,
            name + "_scale": self.scale,
            name + "_ticks": self.ticks,
            name + "_tick_labels": self.tick_labels,
        }

    def date(self, value):
        try:
            return self.dates.num2date(value).isoformat()
        except Exception:
            return None

    def value(self, value):
        """A point's coordinate: a date as ISO text, a category's name, a
        number; null for a missing or non-finite one."""
        value = _number(value)
        if value is None:
            return None
        if self.dates is not None:
            return self.date(value)
        if self.categories is not None:
            return self.categories.get(value, value)
        return value

    def name(self, value):
        """What a bar or box at `value` stands for, as text."""
        value = _number(value)
        if value is None:
            return ""
        if self.categories is not None and value in self.categories:
            return self.categories[value]
        if self.dates is not None:
            return self.date(value) or ""
        for loc, text in self.named.items():
            if abs(loc - value) <= 1e-9 * max(1.0, abs(value)):
                return text
        return _number_text(value)


def _series(artists, budget, kind, xy_of, x, y):
    """Lines' or scatters' elements, and whether any was cut."""
    cut = len(artists) > budget.elements
    artists = artists[: budget.elements]
    data = []
    for artist in artists:
        budget.check()
        data.append(xy_of(artist))
    # Short series whole, the long ones share what is left equally.
    shares = [0] * len(data)
    left = budget.points
    for n, i in enumerate(sorted(range(len(data)), key=lambda i: len(data[i]))):
        shares[i] = min(len(data[i]), left // (len(data) - n))
        left -= shares[i]
    budget.points = left
    elements = []
    for i, (artist, xy) in enumerate(zip(artists, data)):
        budget.check()
        rows = xy[: shares[i]]
        rows = rows.tolist() if hasattr(rows, "tolist") else list(rows)
        cut = cut or shares[i] < len(xy)
        points = []
        for row in rows:
            try:
                px, py = row
            except (TypeError, ValueError):
                px = py = None
            points.append([x.value(px), y.value(py)])
        elements.append({"label": _label(artist.get_label(), kind, i), "points": points})
    return elements, cut


def _bars(containers, budget, x, y):
    """Bars' elements, whether any was cut, and whether they are horizontal."""
    horizontal = getattr(containers[0], "orientation", None) == "horizontal"
    elements = []
    cut = False
    for i, container in enumerate(containers):
        budget.check()
        group = _label(container.get_label(), "Group", i)
        values = getattr(container, "datavalues", None)
        rects = list(container.patches)
        if values is not None and len(values) != len(rects):
            values = None
        for j, rect in enumerate(rects):
            if len(elements) >= budget.elements:
                cut = True
                break
            if horizontal:
                where = y.name(rect.get_y() + rect.get_height() / 2)
                value = rect.get_width()
            else:
                where = x.name(rect.get_x() + rect.get_width() / 2)
                value = rect.get_height()
            if values is not None:
                value = values[j]
            elements.append({"label": where, "group": group, "value": _number(value)})
    return elements, cut, horizontal


def _box_parts(lines, patches):
    """(The boxes, the lines, whether horizontal) when `ax` draws only box
    plots, else None."""
    import matplotlib.patches as mpatches

    if patches:
        if not all(type(p) is mpatches.PathPatch for p in patches):
            return None
        boxes = [_extent(p.get_path().vertices.tolist()) for p in patches[:ELEMENTS_MAX]]
        rest = lines
    else:
        boxes, rest = [], []
        for line in lines:
            xy = line.get_xydata()
            if 5 <= len(xy) <= 64 and xy[0].tolist() == xy[-1].tolist() and len(boxes) < ELEMENTS_MAX:
                boxes.append(_extent(xy.tolist()))
            else:
                rest.append(line)
    if not boxes or not rest or len(patches) > ELEMENTS_MAX:
        return None
    segments = []
    for line in rest:
        xy = line.get_xydata()
        if len(xy) > 100000:
            return None
        segments.append(xy)
    for horizontal in (False, True):
        found = _whiskers(boxes, segments, horizontal)
        if found is not None:
            return found, horizontal
    return None


def _extent(points):
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    return min(xs), max(xs), min(ys), max(ys)


def _whiskers(extents, segments, horizontal):
    """Each box's parts when the lines are its whiskers, caps, median and
    fliers (with the boxes drawn `horizontal` or not), else None."""
    boxes = []
    for x0, x1, y0, y1 in extents:
        if horizontal:
            x0, x1, y0, y1 = y0, y1, x0, x1
        # Along the positions (p) and the values (v).
        boxes.append({"p": (x0, x1), "v": (y0, y1), "low": None, "high": None, "median": None, "width": -1, "points": []})

    def pv(xy):
        return [(b, a) if horizontal else (a, b) for a, b in xy.tolist()]

    def near(a, b):
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))

    for xy in segments:
        points = pv(xy)
        owner = None
        for box in boxes:
            p0, p1 = box["p"]
            slack = (p1 - p0) * 1e-6
            if all(p0 - slack <= p <= p1 + slack for p, _ in points if not math.isnan(p)):
                owner = box
                break
        if owner is None:
            return None
        if len(points) != 2:
            owner["points"].extend(v for _, v in points)
            continue
        (pa, va), (pb, vb) = points
        v0, v1 = owner["v"]
        if pa == pb and va != vb:
            # A whisker: from an edge of the box outwards.
            lo, hi = min(va, vb), max(va, vb)
            if near(hi, v0):
                owner["low"] = lo
            elif near(lo, v1):
                owner["high"] = hi
            continue
        if pa == pb:
            # A whisker of length 0 (whis=0, or no spread).
            if near(va, v0) and owner["low"] is None:
                owner["low"] = va
            elif near(va, v1) and owner["high"] is None:
                owner["high"] = va
            continue
        if va == vb and v0 <= va <= v1 and abs(pb - pa) > owner["width"]:
            # The median, the widest line across the box.
            owner["median"], owner["width"] = va, abs(pb - pa)
        # Otherwise a cap, or a mean's marker.
    for box in boxes:
        if box["low"] is None or box["high"] is None:
            return None
    return boxes


def _boxes(parts, budget, x, y):
    """Box plots' elements, whether any was cut, whether horizontal."""
    boxes, horizontal = parts
    position = y if horizontal else x
    elements = []
    cut = False
    for box in boxes:
        budget.check()
        low, high = box["low"], box["high"]
        outliers = [v for v in box["points"] if not math.isnan(v) and (v < low or v > high)]
        if len(outliers) > budget.points:
            outliers, cut = outliers[: budget.points], True
        budget.points -= len(outliers)
        p0, p1 = box["p"]
        v0, v1 = box["v"]
        elements.append(
            {
                "label": position.name((p0 + p1) / 2),
                "min": _rounded(low),
                "first_quartile": _rounded(v0),
                "median": _rounded(box["median"]),
                "third_quartile": _rounded(v1),
                "max": _rounded(high),
                "outliers": [_number(v) for v in outliers],
            }
        )
    return elements, cut, horizontal


def _pie(wedges, title, budget):
    elements = []
    for wedge in wedges[: budget.elements]:
        budget.check()
        elements.append(
            {
                "label": _label(wedge.get_label(), "", 0),
                "angle": _rounded(abs(float(wedge.theta2) - float(wedge.theta1))),
                "radius": _number(wedge.r),
            }
        )
    out = {"type": "pie", "title": title, "elements": elements}
    if len(wedges) > budget.elements:
        out["truncated"] = True
    return out


def _number(value):
    """`value` as a finite float, or None."""
    if value is None or isinstance(value, str):
        return None
    if type(value).__module__ == "numpy" and hasattr(value, "item"):
        try:
            value = value.item()
        except Exception:
            return None
    if isinstance(value, (datetime.date, datetime.time, datetime.timedelta)):
        return None
    try:
        value = float(value)
    except Exception:
        return None
    return value if math.isfinite(value) else None


def _rounded(value):
    """A value matplotlib computed (a wedge's angle, a quartile): to 12
    significant digits, without float noise such as 35.99999999999999."""
    value = _number(value)
    if isinstance(value, float):
        value = float("%.12g" % value)
    return value


def _number_text(value):
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return "%.10g" % value if isinstance(value, float) else str(value)


def _text(value):
    if not isinstance(value, str):
        try:
            value = str(value)
        except Exception:
            return ""
    return cap(value, TEXT_MAX)[0]


def _title(value):
    """A title or axis label: None when empty."""
    value = _text(value)
    return value if value.strip() else None


def _tick_text(value):
    value = _text(value)
    m = _MATHDEFAULT.match(value)
    return m.group(1) if m else value


def _label(label, kind, i):
    """A series' label; matplotlib's own ("_child0": none given) is
    `kind` and its number among the chart's."""
    label = _text(label)
    if label.startswith("_"):
        return "%s %d" % (kind, i) if kind else ""
    return label

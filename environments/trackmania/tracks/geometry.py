"""Build reference lines from segments (straights and arcs) and resample them to a fixed spacing."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np

#: Default spacing of generated reference lines, m (the guide's distance_between_checkpoints).
LINE_SPACING_M = 0.5


@dataclass(frozen=True)
class Segment:
    """One piece of road: a straight (``radius`` = 0) or an arc.

    Attributes:
        length: straight length, m (ignored for arcs).
        radius: arc radius, m (0 = straight).
        angle_deg: arc turn, degrees; positive turns left.
        dy: height change over the segment, m (eased in and out).
    """

    length: float = 0.0
    radius: float = 0.0
    angle_deg: float = 0.0
    dy: float = 0.0

    @property
    def horizontal_length(self) -> float:
        """Length of the segment in the horizontal plane, m."""
        if self.radius > 0:
            return abs(math.radians(self.angle_deg)) * self.radius
        return self.length


def straight(length: float, dy: float = 0.0) -> Segment:
    """A straight of ``length`` m rising ``dy`` m."""
    return Segment(length=length, dy=dy)


def arc(radius: float, angle_deg: float, dy: float = 0.0) -> Segment:
    """An arc of ``radius`` m turning ``angle_deg`` degrees (positive = left)."""
    return Segment(radius=radius, angle_deg=angle_deg, dy=dy)


def build_polyline(
    segments: Sequence[Segment],
    start: tuple[float, float, float] = (0.0, 10.0, 0.0),
    heading_rad: float = 0.0,
    step_m: float = 0.1,
) -> tuple[np.ndarray, list[float]]:
    """Densely sample the segments. Returns the (M, 3) polyline and the horizontal arc length where each
    segment starts (plus the total at the end). Heading 0 faces +z; forward = (sin h, 0, cos h)."""
    x, y, z = start
    h = heading_rad
    pts: list[tuple[float, float, float]] = [(x, y, z)]
    seg_start: list[float] = []
    s_total = 0.0
    for seg in segments:
        seg_start.append(s_total)
        L = seg.horizontal_length
        n = max(1, int(math.ceil(L / step_m)))
        ds = L / n
        dpsi = (math.radians(seg.angle_deg) / n) if seg.radius > 0 else 0.0
        y0 = y
        for k in range(1, n + 1):
            # midpoint heading for an exact-ish arc step
            hm = h + 0.5 * dpsi
            x += ds * math.sin(hm)
            z += ds * math.cos(hm)
            h += dpsi
            u = k / n
            y = y0 + seg.dy * (3 * u * u - 2 * u * u * u)
            pts.append((x, y, z))
        s_total += L
    seg_start.append(s_total)
    return np.asarray(pts, dtype=np.float64), seg_start


def resample(polyline: np.ndarray, spacing: float = LINE_SPACING_M) -> np.ndarray:
    """Resample a dense (M, 3) polyline at equal 3-D arc-length ``spacing`` (m)."""
    seg = np.linalg.norm(np.diff(polyline, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])
    n = int(math.floor(s[-1] / spacing)) + 1
    t = np.linspace(0.0, (n - 1) * spacing, n)
    if s[-1] - t[-1] > 1e-6:
        t = np.append(t, s[-1])
    return np.stack([np.interp(t, s, polyline[:, i]) for i in range(3)], axis=1)


def min_clearance(line: np.ndarray, min_arc_separation: float = 60.0, stride: int = 4, closed: bool = False) -> float:
    """Smallest horizontal distance between two points of ``line`` more than ``min_arc_separation`` m apart
    along it (m; along a closed line the shorter way round). Used to reject self-overlapping tracks."""
    p = line[::stride][:, [0, 2]]
    seg = np.linalg.norm(np.diff(line, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(seg)])[::stride]
    best = math.inf
    for i in range(0, len(p), 64):
        d = np.linalg.norm(p[i:i + 64, None, :] - p[None, :, :], axis=2)
        sep = np.abs(s[i:i + 64, None] - s[None, :])
        if closed:
            sep = np.minimum(sep, s[-1] - sep)
        far = sep > min_arc_separation
        if far.any():
            best = min(best, float(d[far].min()))
    return best


def horizontal_to_3d_arc(polyline: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(horizontal arc length, 3-D arc length) at every point of a dense polyline, m."""
    d3 = np.linalg.norm(np.diff(polyline, axis=0), axis=1)
    dh = np.linalg.norm(np.diff(polyline[:, [0, 2]], axis=0), axis=1)
    return np.concatenate([[0.0], np.cumsum(dh)]), np.concatenate([[0.0], np.cumsum(d3)])

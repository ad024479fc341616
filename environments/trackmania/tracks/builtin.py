"""The named built-in tracks, as data: ``short`` (the default), ``medium`` and ``technical``."""
from __future__ import annotations

from environments.trackmania.tracks.builder import Piece, TrackSpec
from environments.trackmania.tracks.geometry import arc, straight

#: ~0.65 km point-to-point, flowing turns, one turbo, one hill: ~20 s for the classical driver.
SHORT = TrackSpec(
    name="short",
    pieces=[
        Piece(straight(80.0)),
        Piece(arc(50.0, -90.0)),
        Piece(straight(100.0), turbo=(30.0, 6.0), checkpoint=True),
        Piece(arc(35.0, 70.0)),
        Piece(straight(60.0, dy=4.0), surface=("dirt", 10.0, 40.0, 0.0, 8.0)),
        Piece(arc(60.0, 60.0)),
        Piece(straight(90.0, dy=-4.0), checkpoint=True),
        Piece(arc(45.0, -80.0)),
        Piece(straight(80.0)),
    ],
)

#: ~1.4 km point-to-point with fast sweepers, a dirt section, grass on an inside and two turbos.
MEDIUM = TrackSpec(
    name="medium",
    pieces=[
        Piece(straight(120.0)),
        Piece(arc(90.0, 60.0)),
        Piece(straight(150.0, dy=6.0), turbo=(20.0, 6.0), checkpoint=True),
        Piece(arc(40.0, -120.0), surface=("grass", 0.0, 60.0, -8.0, -4.0)),
        Piece(straight(80.0)),
        Piece(arc(70.0, -45.0)),
        Piece(straight(120.0, dy=-6.0), surface=("dirt", 0.0, 120.0, -8.0, 8.0), checkpoint=True),
        Piece(arc(30.0, 100.0)),
        Piece(straight(60.0)),
        Piece(arc(120.0, 40.0)),
        Piece(straight(160.0), turbo=(60.0, 6.0), checkpoint=True),
        Piece(arc(50.0, 90.0)),
        Piece(straight(100.0, dy=3.0)),
        Piece(arc(80.0, -60.0)),
        Piece(straight(120.0)),
    ],
)

#: ~1 km of hairpins, a chicane, an S, grass, dirt and a slippery patch: slow and precise.
TECHNICAL = TrackSpec(
    name="technical",
    road_width=14.0,
    pieces=[
        Piece(straight(60.0)),
        Piece(arc(16.0, 170.0)),
        Piece(straight(70.0), checkpoint=True),
        Piece(arc(18.0, -160.0)),
        Piece(straight(50.0)),
        Piece(arc(25.0, 40.0)),
        Piece(arc(25.0, -80.0)),
        Piece(arc(25.0, 40.0)),
        Piece(straight(60.0), surface=("dirt", 0.0, 60.0, -7.0, 7.0), checkpoint=True),
        Piece(arc(30.0, -120.0), surface=("grass", 0.0, 62.0, -7.0, -3.0)),
        Piece(straight(60.0, dy=6.0)),
        Piece(arc(14.0, 90.0)),
        Piece(arc(14.0, -90.0)),
        Piece(straight(80.0), surface=("other", 25.0, 45.0, -7.0, 7.0), checkpoint=True),
        Piece(arc(40.0, 135.0)),
        Piece(straight(100.0, dy=-6.0), turbo=(40.0, 6.0)),
    ],
)

BUILTIN_SPECS: dict[str, TrackSpec] = {spec.name: spec for spec in (SHORT, MEDIUM, TECHNICAL)}

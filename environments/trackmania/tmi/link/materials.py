"""TMNF contact materials (the ``contact_material_id`` of each wheel) and their surface groups.

The 31 ids and names are the game engine's ``EPlugSurfaceMaterialId`` as listed by TMInterface's
author (quoted in Linesight's ``contact_materials.py``). The grouping into the observation's
surface groups follows the same source: asphalt-like (Concrete, Pavement, Asphalt and their wet
variants), grass, dirt (Sand, Dirt, DirtRoad, WetDirtRoad), turbo (Turbo, Turbo2) and other.

The game stores the id in the low 16 bits of a 32-bit field; mask with ``0xFFFF`` before looking up.
"""
from __future__ import annotations

import numpy as np

from ...backend import SURFACE_ASPHALT, SURFACE_DIRT, SURFACE_GRASS, SURFACE_OTHER, SURFACE_TURBO

_A, _G, _D, _T, _O = SURFACE_ASPHALT, SURFACE_GRASS, SURFACE_DIRT, SURFACE_TURBO, SURFACE_OTHER

#: (id, name, surface group), in id order.
CONTACT_MATERIALS: tuple[tuple[int, str, int], ...] = (
    (0, "Concrete", _A),
    (1, "Pavement", _A),
    (2, "Grass", _G),
    (3, "Ice", _O),
    (4, "Metal", _O),
    (5, "Sand", _D),
    (6, "Dirt", _D),
    (7, "Turbo", _T),
    (8, "DirtRoad", _D),
    (9, "Rubber", _O),
    (10, "SlidingRubber", _O),
    (11, "Test", _O),
    (12, "Rock", _O),
    (13, "Water", _O),
    (14, "Wood", _O),
    (15, "Danger", _O),
    (16, "Asphalt", _A),
    (17, "WetDirtRoad", _D),
    (18, "WetAsphalt", _A),
    (19, "WetPavement", _A),
    (20, "WetGrass", _G),
    (21, "Snow", _O),
    (22, "ResonantMetal", _O),
    (23, "GolfBall", _O),
    (24, "GolfWall", _O),
    (25, "GolfGround", _O),
    (26, "Turbo2", _T),
    (27, "Bumper", _O),
    (28, "NotCollidable", _O),
    (29, "FreeWheeling", _O),
    (30, "TurboRoulette", _O),
)

N_MATERIALS = len(CONTACT_MATERIALS)
MATERIAL_NAMES: dict[int, str] = {mid: name for mid, name, _ in CONTACT_MATERIALS}
MATERIAL_IDS: dict[str, int] = {name: mid for mid, name, _ in CONTACT_MATERIALS}

#: Lookup table id -> surface group (int8); ids outside the table map to SURFACE_OTHER.
SURFACE_GROUP_OF_MATERIAL = np.array([group for _, _, group in CONTACT_MATERIALS], dtype=np.int8)


def surface_groups(material_ids: np.ndarray) -> np.ndarray:
    """Map raw 32-bit contact material fields to surface groups (int8), vectorised."""
    ids = np.asarray(material_ids, dtype=np.int64) & 0xFFFF
    out = np.full(ids.shape, SURFACE_OTHER, dtype=np.int8)
    known = ids < N_MATERIALS
    out[known] = SURFACE_GROUP_OF_MATERIAL[ids[known]]
    return out


def representative_material(group: int) -> int:
    """A material id of ``group`` (used by encoders that only know the group)."""
    return {_A: 16, _G: 2, _D: 6, _T: 7}.get(int(group), 4)

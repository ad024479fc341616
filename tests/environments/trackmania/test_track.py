"""Reference-line validation: bad lines are refused naming the file and the fix, from the API and the CLI."""
from __future__ import annotations

import numpy as np
import pytest

from environments.trackmania.track import (MIN_REFERENCE_LINE_POINTS, Track, TrackFileError, load_reference_line,
                                           track_from_npy)
from environments.trackmania.tracks import UnknownTrackError, check_track_name, get_track
from rulka.cli import main
from tests.environments.trackmania.helpers import straight_line

pytestmark = pytest.mark.reliability


def _bad_lines() -> dict[str, tuple[np.ndarray, str]]:
    good = straight_line(100.0)
    nan = good.copy()
    nan[100, 1] = np.nan
    inf = good.copy()
    inf[7, 0] = np.inf
    return {
        "one_nan_point": (nan, r"1 point\(s\) hold NaN or infinity \(first at row 100.*remove or interpolate"),
        "inf_point": (inf, r"1 point\(s\) hold NaN or infinity \(first at row 7"),
        "n_by_2": (good[:, [0, 2]], r"shape \(201, 2\), expected \(N, 3\): it has 2 columns: add the height"),
        "transposed": (good.T, r"shape \(3, 201\), expected \(N, 3\): it looks transposed"),
        "flat_vector": (good[:, 0], r"shape \(201,\), expected \(N, 3\)"),
        "three_points": (good[:3], rf"has 3 points, at least {MIN_REFERENCE_LINE_POINTS} are needed"),
        "repeated_points": (np.repeat(good, 2, axis=0), r"repeat the point before them \(first: rows 0 and 1\); drop them"),
        "one_repeat": (np.insert(good, 50, good[50], axis=0), r"1 point\(s\) repeat .*rows 50 and 51"),
        "too_short": (straight_line(5.0), r"has 11 points|is 5.0 m long"),
        "strings": (np.array([["a", "b", "c"]] * 30), r"holds <U1 values, not numbers"),
    }


BAD = _bad_lines()


@pytest.mark.parametrize("case", list(BAD))
def test_bad_reference_line_file_is_refused_naming_file_and_fix(tmp_path, case):
    """Wrong shape, NaN / inf, too few points, repeated points: TrackFileError naming the file."""
    line, pattern = BAD[case]
    path = tmp_path / f"{case}.npy"
    np.save(path, line)
    with pytest.raises(TrackFileError, match=pattern) as caught:
        load_reference_line(path)
    assert str(caught.value).startswith(f"{path}: reference line ")
    with pytest.raises(TrackFileError):
        track_from_npy(path)


@pytest.mark.parametrize("case", ["one_nan_point", "three_points", "repeated_points"])
def test_track_built_in_python_is_validated_too(case):
    """A Track made from an array goes through the same checks (named after the track)."""
    with pytest.raises(TrackFileError, match=r"^track 'mine': reference line"):
        Track("mine", BAD[case][0])


def test_unreadable_files_are_refused(tmp_path):
    """A missing file, a pickled object array, an .npz archive and a text file: one clear error each."""
    with pytest.raises(TrackFileError, match="not found"):
        load_reference_line(tmp_path / "missing.npy")
    pickled = tmp_path / "pickled.npy"
    np.save(pickled, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(TrackFileError, match="not a reference line .npy file"):
        load_reference_line(pickled)
    npz = tmp_path / "archive.npy"
    with open(npz, "wb") as f:
        np.savez(f, a=straight_line(100.0))
    with pytest.raises(TrackFileError, match="archive of several arrays"):
        load_reference_line(npz)
    text = tmp_path / "text.npy"
    text.write_text("0,0,0\n1,0,0\n")
    with pytest.raises(TrackFileError, match="not a reference line .npy file"):
        load_reference_line(text)


def test_valid_lines_and_every_builtin_track_pass():
    """A clean line loads; built-in and generated tracks (whose last step may be a few cm) all pass."""
    for name in ("short", "medium", "technical", "procedural:8", "procedural:10", "loop:15"):
        assert get_track(name).reference_line.shape[1] == 3


@pytest.mark.parametrize("case", ["one_nan_point", "n_by_2", "three_points", "repeated_points"])
def test_baseline_cli_gives_one_line_error_on_a_bad_line(tmp_path, capsys, case):
    """`rulka baseline --track BAD.npy` (one NaN point, (N, 2), 3 points, repeated points): exit 2 and one
    line naming the file, instead of a traceback or a race "finished in 0.40 s"."""
    path = tmp_path / f"{case}.npy"
    np.save(path, BAD[case][0])
    assert main(["baseline", "--track", str(path)]) == 2
    out = capsys.readouterr()
    assert out.out == ""
    lines = out.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"rulka: error: {path}: reference line ")


@pytest.mark.parametrize("name, pattern", [
    ("nonsense", r"unknown track 'nonsense'; built-in: short"),
    ("procedural:x", r"the seed after ':' must be a whole number"),
    ("line.npy@abc", r"the road width after '@' must be a positive number of metres, got 'abc'"),
    ("line.npy@-3", r"the road width after '@' must be a positive number"),
], ids=["unknown_name", "bad_seed", "width_not_a_number", "negative_width"])
def test_bad_track_names_are_refused(tmp_path, monkeypatch, capsys, name, pattern):
    """Unknown names, bad seeds and bad road widths: a clear error (still a KeyError for unknown names)."""
    monkeypatch.chdir(tmp_path)
    np.save(tmp_path / "line.npy", straight_line(100.0))
    with pytest.raises(TrackFileError, match=pattern):
        check_track_name(name)
    with pytest.raises(TrackFileError, match=pattern):
        get_track(name)
    assert main(["baseline", "--track", name]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    if name == "nonsense":
        assert isinstance(UnknownTrackError("x"), KeyError)

"""bench/race_curves.py: training curves with real axes (matplotlib, the optional ``plots`` extra), and a
clear refusal naming ``pip install -e .[plots]`` where matplotlib is missing."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tests.scripts_as_modules import load_script

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    return load_script(ROOT / "bench" / f"{name}.py")


def _rows() -> list[dict[str, str]]:
    """A run's races.csv rows: early races stall, later ones finish, greedy ones faster."""
    rows = []
    for i in range(60):
        finished = i >= 30
        rows.append({"wall_time_s": f"{10.0 * i:.1f}", "exploration": "0" if i % 3 == 0 else "1",
                     "finished": "1" if finished else "0", "race_time_s": f"{25.0 - i / 10:.2f}",
                     "progress_fraction": "1.0000" if finished else f"{i / 30:.4f}"})
    return rows


def test_curves_are_drawn_with_matplotlib(tmp_path):
    """The picture holds both panels' dots (blue greedy, green exploring) and the tuned driver's red line."""
    pytest.importorskip("matplotlib", reason="the optional plots extra (pip install -e .[plots]) is not installed")
    curves = _load("race_curves")
    png = tmp_path / "curve.png"
    curves.plot_races(_rows(), 19.0, png)
    from PIL import Image

    pixels = np.asarray(Image.open(png).convert("RGB")).reshape(-1, 3).astype(int)

    def count(hex_color: str, tolerance: int = 30) -> int:
        rgb = np.array([int(hex_color[i:i + 2], 16) for i in (1, 3, 5)])
        return int((np.abs(pixels - rgb).sum(axis=1) < tolerance).sum())

    assert count(curves.GREEDY) > 50 and count(curves.EXPLORING) > 50
    assert count(curves.DRIVER, tolerance=90) > 300  # the driver's line spans the panel (antialiased)


def test_without_matplotlib_the_error_names_the_extra(monkeypatch, tmp_path, capsys):
    """No matplotlib: plotting refuses with the command that installs it; a training run of the bench is
    refused before it trains (not after minutes of training, when it draws the curve), and ``--summarize``
    still prints its table, saying on stderr that the curve was left out and how to get it."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    curves = _load("race_curves")
    with pytest.raises(curves.PlottingUnavailable, match=r"pip install -e \.\[plots\]"):
        curves.plot_races(_rows(), 19.0, tmp_path / "curve.png")
    bench = _load("trackmania_vs_baseline")
    monkeypatch.setattr(bench, "references", lambda track: pytest.fail("trained before refusing"))
    monkeypatch.setattr(bench, "train", lambda *args, **kwargs: pytest.fail("trained before refusing"))
    monkeypatch.setattr(sys, "argv", ["trackmania_vs_baseline.py", "--rows", "short:0", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match=r"pip install -e \.\[plots\]"):
        bench.main()
    capsys.readouterr()
    bench.plot(_rows(), 19.0, tmp_path / "curve.png")
    assert "curve.png not drawn" in capsys.readouterr().err and not (tmp_path / "curve.png").exists()

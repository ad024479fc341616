"""What the learner keeps of every race: ``races.csv``, per-map TensorBoard values and best runs.

Best runs go to ``best_runs/<map>/``: the actions and the race's reset seed (json), the game's
``.inputs`` text and a GIF of the frames with speed, action and race time. On the simulator, once
:meth:`RaceLog.enable_pictures` is called, the race is also replayed without rendering (it is
deterministic) to keep its trajectory (``.npz``), a map of it coloured by speed next to the
classical driver's line (``_map.png``) and both speeds along the track (``_speed.png``); the
side-by-side animation is left to ``rulka record --best-run`` (seconds of encoding).
"""
from __future__ import annotations

import contextlib
import json
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from environments.trackmania.tools.record import write_gif
from rulka.collection.collector import episode_seed
from rulka.collection.episodes import EpisodeRecord

#: Races per map and kind over which the logged finished ratio is computed.
RATIO_WINDOW = 20
#: Per-step info entries a race record needs (speed and race time, for the GIF overlay).
RACE_INFO_KEYS = ("speed_kmh", "race_time_ms")


#: races.csv's columns (``stored_actions`` since 2026-12-06: files written before end at ``instance``).
RACES_CSV_HEADER = ("wall_time_s,env_steps,map,exploration,finished,race_time_s,progress_fraction,return,"
                    "end_reason,instance,stored_actions")


@dataclass
class RaceResult:
    map_name: str
    exploration: bool
    finished: bool
    race_time_s: float
    progress_fraction: float
    episode_return: float
    env_steps: int
    wall_time_s: float
    end_reason: str = ""
    instance: int = 0
    #: Actions of this race that went to the replay: its length, or 0 for a race not stored (a greedy
    #: race of an entry without ``fill_buffer``). ``env_steps`` counts them: between two rows it grows
    #: by the later row's ``stored_actions``, and by nothing else (no action of a lost race is stored).
    stored_actions: int = 0


@dataclass
class PictureSetup:
    """What replaying a simulator race needs: the environment parameters, the run's seed (with the
    instance and episode number it gives each reset's seed) and the backend's options."""

    params: Any
    run_seed: int
    backend_options: dict[str, Any] = field(default_factory=dict)
    #: Per map: the classical driver's race (shipped margins), raced once.
    drivers: dict[str, Any] = field(default_factory=dict)


class RaceLog:
    """Args: run folder (None: log nothing to disk), ``log(values)`` for TensorBoard, action duration in ms."""

    def __init__(self, run_dir: Path | None, log: Callable[[dict[str, float]], None], ms_per_action: int) -> None:
        self.run_dir = run_dir
        self.log = log
        self.ms_per_action = ms_per_action
        self.races: list[RaceResult] = []
        self.best_race_time_s: dict[str, float] = {}
        self.end_reasons: dict[tuple[str, str], int] = {}
        self.pictures: PictureSetup | None = None
        #: Seconds spent on each best run's files (json, inputs, GIF and, on the simulator, the pictures).
        self.best_run_seconds: list[float] = []
        self._csv_has_stored_actions: bool | None = None

    def enable_pictures(self, params: Any, run_seed: int, backend_options: dict[str, Any] | None = None) -> None:
        """Replay best runs on the simulator to draw their map and speed pictures (``params.backend == "sim"``)."""
        if getattr(params, "backend", None) == "sim":
            self.pictures = PictureSetup(params, int(run_seed), dict(backend_options or {}))

    def record(self, episode: EpisodeRecord, env_steps: int, wall_time_s: float) -> RaceResult:
        info = episode.final_info
        spec = episode.spec
        # a greedy race of the cycle played (partly) at random in heatup is no evaluation: logged as exploration
        exploration = spec.explore or getattr(episode, "played_in_heatup", False)
        race = RaceResult(spec.tag or str(info.get("track", "")), exploration, bool(info.get("finished", False)),
                          info.get("race_time_ms", 0) / 1000.0, float(info.get("progress_fraction", 0.0)),
                          episode.episode_return, env_steps, wall_time_s, str(info.get("end_reason", "")),
                          episode.source[2], episode.length if spec.store else 0)
        self.races.append(race)
        kind = "explo" if race.exploration else "eval"
        group = f"Race_{kind}/{race.map_name}"
        recent = [r.finished for r in self.races if r.map_name == race.map_name and r.exploration == race.exploration]
        values = {f"{group}/finished_ratio_last_{RATIO_WINDOW}": sum(recent[-RATIO_WINDOW:]) / len(recent[-RATIO_WINDOW:]),
                  f"{group}/progress": race.progress_fraction, f"{group}/return": race.episode_return}
        if race.finished:
            values[f"{group}/race_time_s"] = race.race_time_s
        reason = race.end_reason or ("finished" if race.finished else "unknown")
        count = self.end_reasons[(race.map_name, reason)] = self.end_reasons.get((race.map_name, reason), 0) + 1
        values[f"Race_end/{race.map_name}/{reason}"] = count  # races so far that ended this way
        best = self.best_race_time_s.get(race.map_name)
        if race.finished and (best is None or race.race_time_s < best):
            self.best_race_time_s[race.map_name] = race.race_time_s
            self.save_best_run(race, episode)
        if race.map_name in self.best_race_time_s:
            values[f"Race/{race.map_name}/best_race_time_s"] = self.best_race_time_s[race.map_name]
        self.log(values)
        self.append_csv(race)
        return race

    def append_csv(self, race: RaceResult) -> None:
        if self.run_dir is None:
            return
        path = self.run_dir / "races.csv"
        if self._csv_has_stored_actions is None:  # a run resumed from before the column keeps its header
            with contextlib.suppress(OSError):
                with open(path, encoding="utf-8") as f:
                    self._csv_has_stored_actions = f.readline().rstrip("\n").endswith(",stored_actions")
        new = not path.exists()
        with open(path, "a", encoding="utf-8") as f:
            if new:
                f.write(f"{RACES_CSV_HEADER}\n")
                self._csv_has_stored_actions = True
            stored = f",{race.stored_actions}" if self._csv_has_stored_actions else ""
            f.write(f"{race.wall_time_s:.1f},{race.env_steps},{race.map_name},{int(race.exploration)},"
                    f"{int(race.finished)},{race.race_time_s:.2f},{race.progress_fraction:.4f},{race.episode_return:.3f},"
                    f"{race.end_reason},{race.instance}{stored}\n")

    def save_best_run(self, race: RaceResult, episode: EpisodeRecord) -> None:
        if self.run_dir is None:
            return
        from environments.trackmania.tmi.maps.inputs_export import export_inputs

        start = time.perf_counter()
        actions = [int(a) for a in episode.actions()]
        folder = self.run_dir / "best_runs" / race.map_name
        folder.mkdir(parents=True, exist_ok=True)
        stem = f"{int(round(race.race_time_s * 1000))}ms_{race.env_steps}steps"
        first = episode.chunks[0] if episode.chunks else None
        number = first.episode - 1 if first is not None else None  # the collector counts episodes from 1
        reset_seed = episode.spec.seed
        if reset_seed is None and self.pictures is not None and number is not None:
            reset_seed = episode_seed(self.pictures.run_seed, race.instance, number)
        step_speeds = episode.step_info("speed_kmh")
        (folder / f"{stem}.json").write_text(json.dumps(
            {"map": race.map_name, "race_time_s": race.race_time_s, "env_steps": race.env_steps,
             "exploration": race.exploration, "instance": race.instance, "episode": number,
             "reset_seed": reset_seed, "actions": actions,
             "speeds_kmh": [round(float(v), 2) for v in step_speeds]}))  # after each action: checks replays
        export_inputs(folder / f"{stem}.inputs", actions)
        frames = list(episode.states("frame")[:, 0])
        speeds = np.concatenate([[0.0], step_speeds])
        times = np.concatenate([[0], episode.step_info("race_time_ms")]).astype(int)
        overlays = [(float(speeds[i]), None if i == 0 else actions[i - 1], int(times[i])) for i in range(len(frames))]
        write_gif(frames, overlays, folder / f"{stem}.gif", self.ms_per_action)
        if self.pictures is not None and reset_seed is not None:
            track = (episode.spec.reset_options or {}).get("track")
            if track is not None:
                self._draw_best_run(folder, stem, race, actions, step_speeds, int(reset_seed), track)
        self.best_run_seconds.append(time.perf_counter() - start)

    def _draw_best_run(self, folder: Path, stem: str, race: RaceResult, actions: list[int], speeds: np.ndarray,
                       seed: int, track: Any) -> None:
        """Replay the race physics-only; save its trajectory, map and speed chart (next to the driver's)."""
        from environments.trackmania.env import TrackManiaEnv
        from environments.trackmania.tools.race_replay import driver_trajectory
        from environments.trackmania.tools.record import write_race_pictures
        from environments.trackmania.track import Track
        from environments.trackmania.tools.trajectory import drive
        from environments.trackmania.tracks import resolve_track

        setup = self.pictures
        assert setup is not None
        track = track if isinstance(track, Track) else resolve_track(track)
        options = {**setup.backend_options, "render": False}
        env = TrackManiaEnv(params=setup.params, track=track, backend="sim", backend_options=options)
        try:
            trajectory, _ = drive(env, actions, seed=seed)
        finally:
            env.close()
        same = (trajectory.finished and int(trajectory.race_time_ms[-1]) == int(round(race.race_time_s * 1000))
                and trajectory.steps == len(speeds) and np.allclose(trajectory.speeds_kmh[1:], speeds, atol=0.01))
        if not same:
            warnings.warn(f"best run {stem} on {race.map_name}: the replay (seed {seed}) is not the race "
                          f"(ended at {trajectory.race_time_s:.2f} s, saved {race.race_time_s:.2f} s); no pictures "
                          "drawn", RuntimeWarning, stacklevel=2)
            return
        trajectory.save(folder / f"{stem}.npz")
        if race.map_name not in setup.drivers:
            setup.drivers[race.map_name] = driver_trajectory(track, setup.params)
        driver = setup.drivers[race.map_name]
        kind = "exploring" if race.exploration else "greedy"
        driver_label = (f"classical driver (shipped margins): {driver.race_time_s:.2f} s" if driver.finished
                        else "classical driver (shipped margins): did not finish")
        write_race_pictures(track, trajectory, folder, stem, f"agent best run ({kind}): {race.race_time_s:.2f} s",
                            driver, driver_label, ms_per_action=self.ms_per_action)

    def state_dict(self) -> dict[str, dict[str, float]]:
        return {"best_race_time_s": dict(self.best_race_time_s)}

    def load_state_dict(self, state: dict) -> None:
        self.best_race_time_s = {k: float(v) for k, v in state.get("best_race_time_s", {}).items()}

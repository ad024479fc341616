"""One game instance: launch, connect, configure, and race one action (50 ms) at a time.

The cycle (``shared/reference/tmi_protocol.md``, "One rollout"):

1. On connect (id 5): speed 1, RUN_STEP every ``ms_per_action``, console settings, load the map
   if the game shows its menus; echo.
2. Race start: the first time on a map, give up and save the state at race time 0; afterwards
   rewind to that saved start state (skips the countdown).
3. At every action boundary (RUN_STEP at t, a multiple of 50 ms): get the state, set speed 0,
   request a frame, echo; on the frame (id 4) return ``(state, frame)`` *without echoing*: the game
   stays frozen while the agent thinks. :meth:`GameInstanceManager.step` sets the inputs, sets
   speed back to ``running_speed`` and echoes the frame.
4. Finish (checkpoint count current == target): record the state, then undo the finish as Linesight
   does: rewind to that state with the last checkpoint time marked as not reached (-1), so the game
   never ends the race; ``PreventSimulationFinish`` is only the fallback when the state has no
   checkpoint times (TMInterface documents it for simulation contexts, not for a normal race). Leave
   the game blocked in that message until the next race.
5. Cut-offs are the environment's decision; :meth:`end_race` leaves the game blocked between races.
   While it waits there (its collector waits for the learner), :meth:`check_between_races` asks it one
   short question now and then: a game that died or stopped answering is killed and relaunched at once.
6. A socket timeout means the game hung: the rollout is discarded (:class:`RolloutDiscarded`) and
   the instance is killed and relaunched; a dropped connection is re-established (or relaunched).
7. The instance is relaunched every ``game_reboot_interval_s`` between races.
8. After each launch, as Linesight does: close the console that TMInterface opens (``toggle_console``)
   on the first connection, and show and focus the game window once, at the first race (Linesight
   documents that an instance that was never focused does not run properly under Linux).

Inputs are sent at every action, even when they equal the previous action's (Linesight removed the
"send only on change" shortcut because inputs were sometimes not applied).

Timing, as in Linesight: the state is read inside the RUN_STEP at race time t, but the game finishes
that 10 ms tick before it freezes, so the frame shows t + 10 ms and the action chosen applies from
t + 10 to t + 60 ms. At race time 0 every key is released first, so the first tick is the same in
every race (given up or rewound) and a race replays exactly.
"""
from __future__ import annotations

import enum
import logging
import math
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from environments.trackmania.backend_registry import RolloutDiscardedError
from rulka.phased_steps import Phases, finish_phases
from ..link.client import SyncMessage, TMIClient, TMInterfaceConnectError
from .launcher import GameProcess, Launcher, default_launcher, process_pids
from ..link.protocol import (
    MessageType,
    TMInterfaceError,
    TMInterfaceProtocolError,
    TMInterfaceTimeout,
)
from ..maps.replays import hide_personal_record_replays
from .settings import TMISettings
from ..link.state import check_wheel_order, with_finish_unreached

log = logging.getLogger(__name__)

#: Game speeds above this may skip inputs: TMInterface's documentation of ``set_speed``
#: (donadigo/TMInterfaceClientPython, ``tminterface/interface.py``) says that high factors
#: "(such as >100) could cause the game to skip running some subsystems such as the input subsystem".
SAFE_INPUT_SPEED = 100.0

#: Default of :attr:`ManagerConfig.start_timeout_s`: a first start under Wine (prefix set-up, shader
#: caches, TMLoader update check) can take minutes.
DEFAULT_START_TIMEOUT_S = 600.0

#: Start of the warning logged when a race in flight is lost (the game hung, died or dropped the link).
RACE_DISCARDED = "race discarded: "

#: Console command of rulka_link.as that shows and focuses the game window.
FOCUS_WINDOW_COMMAND = "rulka_focus_window"


def check_running_speed(speed: float) -> float:
    """Validate ``running_speed``; warn above :data:`SAFE_INPUT_SPEED`. Returns it as a float."""
    speed = float(speed)
    if not math.isfinite(speed) or speed <= 0:
        raise ValueError(f"running_speed must be a finite number > 0 (1 = real time), got {speed}")
    if speed > SAFE_INPUT_SPEED:
        log.warning(
            "running_speed %g is above %g: TMInterface documents that the game may then skip its input "
            "subsystem, so some actions may not be applied (Linesight trains at 80). Lower "
            "performance.running_speed if races look erratic.", speed, SAFE_INPUT_SPEED,
        )
    return speed

#: Console settings sent on every connection (besides countdown_speed and autologin).
CONSOLE_SETTINGS = (
    "set unfocused_fps_limit false",
    "set skip_map_load_screens true",
    "set disable_forced_camera true",
    "set autorewind false",
    "set auto_reload_plugins false",
)


class RolloutDiscarded(TMInterfaceError, RolloutDiscardedError):
    """The game hung or dropped the connection mid-race: throw this rollout away.

    It is also the backend-neutral :class:`~environments.trackmania.backend_registry.RolloutDiscardedError`
    that :class:`~environments.trackmania.env.TrackManiaEnv` turns into a discarded, truncated episode.

    The manager has already closed the connection (and killed a hung game); the next
    :meth:`GameInstanceManager.start_race` reconnects or relaunches.
    """


@dataclass
class ManagerConfig:
    """Timing and display settings of one game instance (times in ms unless the name says _s)."""

    running_speed: float = 1.0  # game speed while the car drives (the agent thinks at speed 0)
    ms_per_action: int = 50  # RUN_STEP period: one action per message
    frame_width: int = 160
    frame_height: int = 120
    timeout_during_run_ms: int = 30_000  # plugin waits this long for an echo while racing; also our read timeout
    timeout_between_runs_ms: int = 600_000  # plugin waits this long while blocked between races
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S  # menus, map load and countdown must fit in this
    connect_timeout_s: float = DEFAULT_START_TIMEOUT_S  # after a launch, the plugin must accept within this
    reconnect_timeout_s: float = 5.0  # after a dropped connection, try this long before relaunching
    game_reboot_interval_s: float = 12 * 3600.0
    max_start_attempts: int = 2  # start_race recovers and retries this many times in all
    hide_interface: bool = True
    game_camera: int | None = None  # console "cam N" once per map, if set
    rewind_before_frame: bool = True  # rewind_to_current_state before each frame (re-syncs rendering)


@dataclass
class StepResult:
    """What the game reports at an action boundary or at the finish."""

    state: bytes  # raw SimulationState blob (decode with state.decode_state)
    frame: np.ndarray  # (H, W) uint8 grayscale; at the finish, the previous frame
    race_time_ms: int
    finished: bool = False
    checkpoint_times_ms: list[int] = field(default_factory=list)


class _Phase(enum.Enum):
    PREPARING = "preparing"  # first RUN_STEP of a new race: choose load map / give up / rewind
    WAITING_START = "waiting_start"  # map loading or countdown after give up: wait for t == 0


class GameInstanceManager:
    """Drives one game instance through races, one action at a time.

    Args:
        instance_index: which instance (port = ``settings.base_port + instance_index``).
        settings: user settings; needed for the default launcher and for ``autologin``.
        config: timings and display settings.
        launcher: ``launcher(port) -> GameProcess``; defaults to TMLoader (Windows) / the Wine
            script (Linux) from ``settings``.
        port: the plugin's port; default ``settings.base_port + instance_index``.
    """

    def __init__(
        self,
        instance_index: int = 0,
        *,
        settings: TMISettings | None = None,
        config: ManagerConfig | None = None,
        launcher: Launcher | None = None,
        port: int | None = None,
    ) -> None:
        self.settings = settings or TMISettings()
        self.config = config or ManagerConfig()
        self.config.running_speed = check_running_speed(self.config.running_speed)
        self.instance_index = instance_index
        if port is not None and not 1 <= int(port) <= 65535:
            raise ValueError(f"port must be in 1..65535, got {port}")
        self.port = int(port) if port is not None else self.settings.port(instance_index)
        self._launcher = launcher
        self.process: GameProcess | None = None
        self.launched_at = 0.0
        self.launch_count = 0
        self.client: TMIClient | None = None
        self.pending: MessageType | None = None  # sync message we left unanswered (game blocked)
        self.loaded_map: str | None = None
        self.start_states: dict[str, bytes] = {}
        self.race_active = False
        self.last_action_time_ms = 0
        self.last_frame = np.zeros((self.config.frame_height, self.config.frame_width), dtype=np.uint8)
        self.checkpoint_times_ms: list[int] = []
        self._ui_hidden = False
        self._console_closed = True  # set False by each launch: TMInterface opens its console on start
        self._window_focused = True  # likewise: focus once per launch
        self._wheels_checked = False
        self._pids_seen: tuple[int, ...] = ()  # the game's pids at the last check_between_races
        self._never_connected = False  # a game launched between races: its first connection gets connect_timeout_s
        self._relaunch_due = False  # killed after a failed race, not yet relaunched: the check launches it

    # ------------------------------------------------------------------ lifecycle
    @property
    def game_pids(self) -> tuple[int, ...]:
        """Pids of the game this manager launched and still runs (the game process once found, and
        its launch script while that runs); ``()`` when no game runs or its handle has no pid (an
        in-process fake). With :attr:`port`, what a collector reports so that the learner can kill
        the game of a collector it replaces."""
        return process_pids(self.process)

    def _launch(self) -> None:
        if self._launcher is None:
            self._launcher = default_launcher(self.settings)
        log.info("launching game instance %d on port %d", self.instance_index, self.port)
        self.process = self._launcher(self.port)
        self.port = int(getattr(self.process, "port", self.port))
        self.launched_at = time.monotonic()
        self.launch_count += 1
        self.loaded_map = None
        self._ui_hidden = False
        self._console_closed = False
        self._window_focused = False
        self._wheels_checked = False
        self._never_connected = True
        self._relaunch_due = False
        self._pids_seen = ()

    def _kill(self) -> None:
        self._drop_client()
        if self.process is not None:
            try:
                self.process.terminate()
            except Exception:  # noqa: BLE001 - a dying game must not stop the relaunch
                log.exception("terminating game instance %d failed", self.instance_index)
        self.process = None
        self.loaded_map = None

    def _drop_client(self) -> None:
        if self.client is not None:
            self.client.close()
        self.client = None
        self.pending = None
        self.race_active = False

    def _connect(self, timeout_s: float) -> None:
        self.client = TMIClient.connect(
            self.port, timeout_s=self.config.start_timeout_s, connect_timeout_s=timeout_s
        )
        self.pending = None
        self._never_connected = False

    def _ensure_connected(self) -> None:
        """Launch, reboot or reconnect as needed so that ``self.client`` is connected."""
        if self.process is not None and self.client is None and not self.process.is_alive():
            self._kill()
        if (
            self.process is not None
            and time.monotonic() - self.launched_at > self.config.game_reboot_interval_s
        ):
            log.info("rebooting game instance %d after %.0f s", self.instance_index, self.config.game_reboot_interval_s)
            self._kill()
        if self.client is not None:
            return
        if self.process is not None:
            try:  # a game launched between races may still be starting: it gets the launch's timeout
                cfg = self.config
                self._connect(cfg.connect_timeout_s if self._never_connected else cfg.reconnect_timeout_s)
                return
            except TMInterfaceConnectError:
                log.warning("game instance %d does not accept connections: relaunching", self.instance_index)
                self._kill()
        self._launch()
        self._connect(self.config.connect_timeout_s)

    def _handle_failure(self, exc: TMInterfaceError, *, in_race: bool = False) -> None:
        """Forget the connection; kill the game if it hung or died (relaunched by the next
        :meth:`check_between_races`, or else by the next start).

        Logs one warning that says what was seen and what follows; ``in_race``: a race was in flight
        (it is discarded: the line starts with :data:`RACE_DISCARDED`)."""
        hung = isinstance(exc, (TMInterfaceTimeout, TMInterfaceProtocolError))
        dead = self.process is None or not self.process.is_alive()
        pids = self.game_pids
        if hung or dead:
            self._kill()
            self._relaunch_due = True
            then = (f"the game hung: killed (pids {', '.join(map(str, pids)) or '?'}), relaunched before the next race"
                    if hung else "the game is gone: relaunched before the next race")
        else:
            self._drop_client()
            then = "the game still runs: the next race reconnects (or relaunches it)"
        log.warning("%sgame instance %d (port %d): %s; %s", RACE_DISCARDED if in_race else "", self.instance_index,
                    self.port, exc, then)

    def check_between_races(self) -> None:
        """While no race runs (the collector waits, for the learner say): find a game that died or stopped
        answering now, not at the next race, kill it and launch a new one at once. A game waiting in our
        pending message is asked one short question (``is_in_menus``) that the plugin answers while it
        waits; no answer within ``timeout_during_run_ms`` is a hang, as mid-race. A game killed because its
        last race failed (hung or dead) is relaunched here too, so a stranger on its port is named now. Nothing
        happens when no game was launched.

        A launch that fails here (a stranger on the port: :class:`~.launcher.PortHeldError`) is logged now,
        not raised: the collector may hold finished races not yet sent, which an error would lose. The next
        race launches again and raises it there, when nothing is held."""
        if self.race_active or (self.process is None and not self._relaunch_due):
            return
        if self.process is None:  # killed when its race failed
            self._relaunch_due = False  # one try here; a refusal is raised at the next race
            log.warning("game instance %d (port %d) between races: the game killed when its race failed: relaunching "
                        "it now", self.instance_index, self.port)
            self._relaunch_here()
            return
        problem = "the game is gone"
        if self.process.is_alive():
            self._pids_seen = self.game_pids or self._pids_seen  # to name a game that then dies
            if self.client is None or self.pending is None:
                return  # not yet connected (a game launched here), or no message of ours to wait in
            try:
                self.client.set_timeout(self.config.timeout_during_run_ms / 1000.0)
                self.client.is_in_menus()
                return
            except (TMInterfaceTimeout, TMInterfaceProtocolError) as exc:
                problem = f"{exc}; the game hung"
            except TMInterfaceError as exc:
                if self.process.is_alive():
                    self._drop_client()
                    log.warning("game instance %d (port %d) between races: %s; the game still runs: the next race "
                                "reconnects", self.instance_index, self.port, exc)
                    return
                problem = f"{exc}; the game is gone"
        pids = self.game_pids or self._pids_seen
        self._kill()
        log.warning("game instance %d (port %d) between races: %s: killed (pids %s), relaunching it now",
                    self.instance_index, self.port, problem, ", ".join(map(str, pids)) or "?")
        self._relaunch_here()

    def _relaunch_here(self) -> None:
        """Launch a game from :meth:`check_between_races`; a refused launch is logged, not raised."""
        try:
            self._launch()
        except Exception as exc:  # noqa: BLE001 - the next race launches again and raises it (see above)
            self.process = None
            log.warning("game instance %d (port %d) between races: the relaunch failed: %s; the next race tries "
                        "again", self.instance_index, self.port, exc)

    def close(self) -> None:
        """Disconnect politely and stop the game if we launched it."""
        if self.client is not None:
            self.client.shutdown()
            self.client = None
        self._kill()

    # ------------------------------------------------------------------ messages
    def _read(self) -> SyncMessage:
        assert self.client is not None
        return self.client.read_message()

    def _respond(self, mtype: MessageType) -> None:
        assert self.client is not None
        self.client.respond(mtype)
        if self.pending == mtype:
            self.pending = None

    def _configure(self, map_path: str) -> None:
        """Answer SC_ON_CONNECT_SYNC: speeds, step period, console settings, map if in menus."""
        c = self.client
        assert c is not None
        cfg = self.config
        c.set_speed(1.0)
        c.set_on_step_period(cfg.ms_per_action)
        c.set_plugin_timeout(cfg.timeout_during_run_ms)
        if not self._console_closed:  # the game was (re)launched: TMInterface's console is open
            c.execute_command("toggle_console")
            self._console_closed = True
        c.execute_command(f"set countdown_speed {cfg.running_speed:g}")
        if self.settings.account_name:
            c.execute_command(f"set autologin {self.settings.account_name}")
        for command in CONSOLE_SETTINGS:
            c.execute_command(command)
        if c.is_in_menus():
            self._load_map(map_path)
        c.respond(MessageType.SC_ON_CONNECT_SYNC)

    def _load_map(self, map_path: str) -> None:
        assert self.client is not None
        if self.settings.user_data_path:  # hide the personal-record ghost, as Linesight does
            hide_personal_record_replays(self.settings.user_data_path, map_path)
        path = map_path.replace("/", "\\") if sys.platform.startswith("win") else map_path
        self.client.execute_command(f'map "{path}"' if " " in path else f"map {path}")
        self.loaded_map = map_path
        self._ui_hidden = False

    # ------------------------------------------------------------------ races
    def start_race(self, map_path: str) -> StepResult:
        """Put the car at race time 0 on ``map_path``; returns the first state and frame.

        Recovers from a hung or dropped game (relaunching it) up to ``max_start_attempts`` times.
        """
        map_path = str(map_path)
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._start_race_once(map_path)
            except TMInterfaceError as exc:
                self._handle_failure(exc)
                if attempt >= self.config.max_start_attempts:
                    raise

    def _start_race_once(self, map_path: str) -> StepResult:
        self.race_active = False
        self._ensure_connected()
        c = self.client
        assert c is not None
        # A race on the loaded map, on a connection where the game waits between races, starts by a rewind,
        # as quick as an action: a game that does not answer is hung, as mid-race. A new connection's first
        # message (the plugin first drops the old client, after its own timeout), menus, a map load and a
        # countdown get start_timeout_s (minutes under Wine).
        rewind = self.pending is not None and self.loaded_map == map_path and map_path in self.start_states
        c.set_timeout(self.config.timeout_during_run_ms / 1000.0 if rewind else self.config.start_timeout_s)
        if self.pending is not None:  # the game waits between races: wake it up
            c.set_speed(self.config.running_speed)
            c.set_plugin_timeout(self.config.timeout_during_run_ms)
            self._respond(self.pending)
        phase = _Phase.PREPARING
        seen_negative_time = False
        deadline = time.monotonic() + self.config.start_timeout_s
        while True:
            if time.monotonic() > deadline:
                raise TMInterfaceTimeout(
                    f"the race did not start within {self.config.start_timeout_s:.0f} s",
                    message_id=MessageType.SC_RUN_STEP_SYNC,
                    expected="race time 0",
                )
            msg = self._read()
            if msg.type == MessageType.SC_ON_CONNECT_SYNC:
                c.set_timeout(self.config.start_timeout_s)
                self._configure(map_path)
                continue
            if msg.type == MessageType.SC_CHECKPOINT_COUNT_CHANGED_SYNC and msg.current == msg.target:
                self._undo_finish(c.get_simulation_state())  # a finish left over from the last race
            if msg.type != MessageType.SC_RUN_STEP_SYNC:
                c.respond(msg.type)  # checkpoints, laps or stale frames before the start
                continue
            t = int(msg.race_time_ms or 0)
            if phase == _Phase.PREPARING:
                if self.loaded_map != map_path:
                    self._load_map(map_path)
                    phase = _Phase.WAITING_START
                elif map_path not in self.start_states:
                    c.give_up()
                    phase = _Phase.WAITING_START
                else:
                    c.rewind_to_state(self.start_states[map_path])
                    return self._begin_race()
                c.respond(MessageType.SC_RUN_STEP_SYNC)
                continue
            if t < 0:
                seen_negative_time = True
            elif t == 0 and seen_negative_time:
                self.start_states[map_path] = c.get_simulation_state()
                return self._begin_race()
            c.respond(MessageType.SC_RUN_STEP_SYNC)

    def _begin_race(self) -> StepResult:
        """At race time 0, inside a RUN_STEP: first action point of the race."""
        c = self.client
        assert c is not None
        self.race_active = True
        self.checkpoint_times_ms = []
        self.last_action_time_ms = 0
        # The tick that follows this RUN_STEP runs before the agent's first action: release every
        # key so that it is the same in every race (a give-up start and a rewound start alike).
        c.set_input_state(left=False, right=False, accelerate=False, brake=False)
        c.set_timeout(self.config.timeout_during_run_ms / 1000.0)
        if not self._window_focused:
            c.execute_command(FOCUS_WINDOW_COMMAND)
            self._window_focused = True
        if not self._ui_hidden:
            if self.config.hide_interface:
                c.toggle_interface(False)
            if self.config.game_camera is not None:
                c.execute_command(f"cam {int(self.config.game_camera)}")
            self._ui_hidden = True
        return finish_phases(self._action_point(race_time_ms=0))

    def _action_point(self, race_time_ms: int) -> Phases[StepResult]:
        """Inside a RUN_STEP: read the state, freeze, get the frame; leaves the frame unanswered.
        Yields once, while the game answers."""
        c = self.client
        assert c is not None
        with c.batched():  # one write and one round trip: the state's reply, then the frame
            c.request_simulation_state()
            if self.config.rewind_before_frame:
                c.rewind_to_current_state()
            c.set_speed(0.0)
            c.request_frame(self.config.frame_width, self.config.frame_height)
            c.respond(MessageType.SC_RUN_STEP_SYNC)
        yield  # the game sends the state, then renders
        blob = c.read_simulation_state()
        if not self._wheels_checked:
            self._wheels_checked = True
            problem = check_wheel_order(blob)
            if problem:
                log.warning("game instance %d: %s", self.instance_index, problem)
        while True:
            msg = self._read()
            if msg.type == MessageType.SC_REQUESTED_FRAME_SYNC:
                assert msg.frame is not None
                self.pending = MessageType.SC_REQUESTED_FRAME_SYNC
                self.last_frame = msg.frame
                return StepResult(blob, msg.frame, race_time_ms, False, list(self.checkpoint_times_ms))
            if msg.type == MessageType.SC_CHECKPOINT_COUNT_CHANGED_SYNC:
                result = self._on_checkpoint(msg)
                if result is not None:
                    return result
                continue
            if msg.type == MessageType.SC_ON_CONNECT_SYNC:
                raise TMInterfaceProtocolError(
                    "the plugin announced a new connection mid-race", message_id=msg.type, expected="a frame"
                )
            c.respond(msg.type)

    def _on_checkpoint(self, msg: SyncMessage) -> StepResult | None:
        """A checkpoint: record its time; at the finish, freeze and return the final result."""
        c = self.client
        assert c is not None
        blob = c.get_simulation_state()
        from ..link.state import decode_checkpoints  # local import: state imports nothing from here

        _, times = decode_checkpoints(blob)
        passed = [t for t in times if t >= 0]
        race_time = passed[-1] if passed else self.last_action_time_ms
        self.checkpoint_times_ms.append(int(race_time))
        if msg.current is not None and msg.current == msg.target:
            self._undo_finish(blob)
            c.set_plugin_timeout(self.config.timeout_between_runs_ms)
            if c.frame_requested:
                c.unrequest_frame()
            self.pending = MessageType.SC_CHECKPOINT_COUNT_CHANGED_SYNC
            self.race_active = False
            return StepResult(blob, self.last_frame, int(race_time), True, list(self.checkpoint_times_ms))
        c.respond(msg.type)
        return None

    def _undo_finish(self, blob: bytes) -> None:
        """Inside the finish's checkpoint message: keep the game from ending the race (see step 4)."""
        assert self.client is not None
        unreached = with_finish_unreached(blob)
        if unreached is not None:
            self.client.rewind_to_state(unreached)
        else:
            self.client.prevent_simulation_finish()

    def step(self, *, accelerate: bool, brake: bool, left: bool, right: bool) -> StepResult:
        """Hold the inputs for one action; returns the next action point or the finish.

        Raises:
            RolloutDiscarded: the game hung or dropped the connection; start a new race.
        """
        return finish_phases(self.step_phases(accelerate=accelerate, brake=brake, left=left, right=right))

    def step_phases(self, *, accelerate: bool, brake: bool, left: bool, right: bool) -> Phases[StepResult]:
        """:meth:`step` as a generator that yields twice while the game works (after the inputs are
        sent, and after the state and frame are requested), so that a collector can interleave
        several games' steps in one thread (:mod:`rulka.phased_steps`)."""
        if not self.race_active or self.pending != MessageType.SC_REQUESTED_FRAME_SYNC or self.client is None:
            raise RuntimeError("step() needs a running race: call start_race() first")
        try:
            return (yield from self._step(accelerate, brake, left, right))
        except TMInterfaceError as exc:
            self._handle_failure(exc, in_race=True)
            raise RolloutDiscarded(
                f"rollout discarded: {exc.detail}", message_id=exc.message_id, expected=exc.expected
            ) from exc

    def _step(self, accelerate: bool, brake: bool, left: bool, right: bool) -> Phases[StepResult]:
        c = self.client
        assert c is not None
        with c.batched():  # one write: one wake-up of the game
            c.set_input_state(left=bool(left), right=bool(right), accelerate=bool(accelerate), brake=bool(brake))
            c.set_speed(self.config.running_speed)
            self._respond(MessageType.SC_REQUESTED_FRAME_SYNC)
        yield  # the game plays the action
        next_action_ms = self.last_action_time_ms + self.config.ms_per_action
        while True:
            msg = self._read()
            if msg.type == MessageType.SC_RUN_STEP_SYNC:
                t = int(msg.race_time_ms or 0)
                if t >= next_action_ms and t % self.config.ms_per_action == 0:
                    self.last_action_time_ms = t
                    return (yield from self._action_point(t))
                c.respond(msg.type)
            elif msg.type == MessageType.SC_CHECKPOINT_COUNT_CHANGED_SYNC:
                result = self._on_checkpoint(msg)
                if result is not None:
                    return result
            elif msg.type == MessageType.SC_ON_CONNECT_SYNC:
                raise TMInterfaceProtocolError(
                    "the plugin announced a new connection mid-race", message_id=msg.type, expected="RUN_STEP"
                )
            else:
                c.respond(msg.type)

    def end_race(self) -> None:
        """End the race early (a cut-off): the game stays blocked until the next start_race."""
        if not self.race_active:
            return
        self.race_active = False
        if self.client is None or self.pending is None:
            return
        try:
            self.client.set_plugin_timeout(self.config.timeout_between_runs_ms)
            if self.client.frame_requested:
                self.client.unrequest_frame()
        except TMInterfaceError as exc:
            self._handle_failure(exc)


__all__ = [
    "CONSOLE_SETTINGS",
    "DEFAULT_START_TIMEOUT_S",
    "FOCUS_WINDOW_COMMAND",
    "SAFE_INPUT_SPEED",
    "check_running_speed",
    "GameInstanceManager",
    "ManagerConfig",
    "RACE_DISCARDED",
    "RolloutDiscarded",
    "StepResult",
]

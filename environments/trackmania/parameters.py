"""Typed parameters of the TrackMania environment (the ``environment`` and ``rewards`` YAML sections).

Field names and defaults follow the configuration guide. Only simple types are used so that the
YAML loader can fill the dataclass directly. Each field declares the values it accepts beside it,
``param(default, RULE)`` (:mod:`rulka.rules`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from environments.trackmania.layout import FloatLayout
from rulka.rules import (BOOL, FINITE, NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT, Rule, choice,
                         int_at_least, list_of, optional, param)

#: Smallest frame side Linesight's conv stack accepts (k4 s2, k4 s2, k3 s2, k3 s1), pixels.
MIN_FRAME_SIDE = 34

_BACKEND = Rule("a TrackMania backend: 'sim' (the simulator) or 'tmi' (the real game)",
                lambda v: isinstance(v, str) and v in ("sim", "tmi"))
_FRAME_SIDE = Rule(f"an int >= {MIN_FRAME_SIDE} (the conv stack's smallest input)",
                   lambda v: int_at_least(MIN_FRAME_SIDE).test(v))


@dataclass
class TrackManiaEnvironmentParameters:
    """Environment, frame, reward and cut-off settings shared by the ``sim`` and ``tmi`` backends.

    The configuration guide's ``rewards`` and ``state_normalization`` sections and
    ``neural_network.W_downsized`` / ``H_downsized`` are read into this section (the environment
    computes rewards and frames); see ``TrackManiaExperimentConfig.yaml_routes``.
    """

    backend: str = param("sim", _BACKEND)
    """What runs the car: ``sim``, the built-in simulator (any machine, no game, fast), or ``tmi``, the
    real game through TMInterface 2 (needs the game and a ``.env`` with its settings; see the README)."""

    # --- timing ---
    tm_engine_step_per_action: int = param(5, POSITIVE_INT)
    """Game engine ticks per agent action: the agent decides every ``5 x 10 ms = 50 ms`` (20 times a
    second) at the default. Fewer ticks give finer control, more decisions per second of racing and
    slower collection; more ticks are coarser and easier to learn. Changes every duration counted
    in actions (mini-race length, n-step span, previous actions' time span).

    Unit: engine ticks | Range: 3-10 | See: environment.ms_per_tm_engine_step, environment.temporal_mini_race_duration_ms, training.n_steps
    """
    ms_per_tm_engine_step: int = param(10, POSITIVE_INT)
    """Duration of one engine tick. Fixed by the game (its physics runs at 100 Hz): do not change it
    for the real game; the simulator follows it.

    Unit: ms | Range: 10 (the game's) | See: environment.tm_engine_step_per_action
    """

    # --- spatial ---
    n_zone_centers_in_inputs: int = param(40, int_at_least(2))
    """Reference-line points given to the agent, in the car's frame (3 floats each), starting at the
    current point: its view of the road ahead. With a stride of 20 points of 0.5 m they cover about
    400 m. More points see further and add inputs (changes ``float_input_dim`` by 3 per point).

    Unit: points | Range: 20-60 | See: environment.one_every_n_zone_centers_in_inputs, environment.distance_between_checkpoints, environment.float_input_dim
    """
    one_every_n_zone_centers_in_inputs: int = param(20, POSITIVE_INT)
    """Stride between the reference-line points given to the agent: every 20th point of a 0.5 m line
    is one point every 10 m. Smaller strides describe the road more densely and see less far for
    the same number of points.

    Unit: points of the line | Range: 10-30 | See: environment.n_zone_centers_in_inputs, environment.distance_between_checkpoints
    """
    distance_between_checkpoints: float = param(0.5, POSITIVE)
    """Spacing of the reference line's points (virtual checkpoints) once resampled; progress is
    tracked point to point. Finer spacing tracks progress more precisely and makes more points
    (below 0.3 m, zone tracking gets slow). The reference line files are made at this spacing.

    Unit: m | Range: 0.3-1.0 | See: environment.one_every_n_zone_centers_in_inputs, environment.road_width
    """
    n_zone_centers_extrapolate_before_start_of_map: int = param(20, NON_NEGATIVE_INT)
    """Points added before the start by extending the line's first segment backwards, so the car
    has a current point (and points behind it) while it waits at or behind the start line. The
    zone tracker starts at this index.

    Unit: points | Range: 10-30 | See: environment.distance_between_checkpoints
    """
    n_zone_centers_extrapolate_after_end_of_map: int = param(1000, NON_NEGATIVE_INT)
    """Points added after the finish by extending the line's last segment (1000 x 0.5 m = 500 m):
    the agent's view ahead and the distance to the finish stay defined near and past the finish.
    The tracker never enters the last one. Must cover the view ahead (points x stride x spacing).

    Unit: points | Range: 500-2000 | See: environment.n_zone_centers_in_inputs, environment.one_every_n_zone_centers_in_inputs
    """
    road_width: float = param(90.0, POSITIVE)
    """Bounds how far the next reference point may be for the zone tracker to advance to it:
    ``sqrt(0.25^2 + (road_width / 2)^2)`` m, about 45 m at 90. Generous on purpose (roads are 16-32 m
    wide): progress is still counted when the car cuts a corner or drives wide. Too small and a
    car off the line stops gaining progress.

    Unit: m | Range: 50-100 | See: environment.distance_between_checkpoints, environment.sync_virtual_and_real_checkpoints
    """

    # --- mini-races ---
    temporal_mini_race_duration_ms: int = param(7000, POSITIVE_INT)
    """Horizon of a mini-race. Each sampled transition is read as part of a race that ends this long
    after a random clock time, so Q means "reward over the next 7 s" and gamma can be 1. Shorter
    horizons learn faster and see less of the consequences; longer ones plan further with noisier
    targets. Changes the clock float's range and the mini-race sampling.

    Unit: ms | Range: 5000-10000 | See: environment.temporal_mini_race_duration_actions, training.gamma_schedule, training.oversample_long_term_steps, training.min_horizon_to_update_priority_actions
    """
    margin_to_announce_finish_meters: float = param(700.0, POSITIVE)
    """Cap of the distance-to-finish float: the agent sees ``min(distance to finish, margin)``, so the
    value only changes in the last 700 m and tells it the finish is near. Its normalisation uses
    the margin (mean margin, std margin / 2).

    Unit: m | Range: 500-1000 | See: environment.float_inputs_mean
    """

    # --- contact and physics inputs ---
    n_contact_material_physics_behavior_types: int = param(4, POSITIVE_INT)
    """Surface groups encoded one-hot per wheel (asphalt-like, grass, dirt, turbo; any other surface
    is all zeros): 4 wheels x 4 = 16 floats. Grip depends on the surface, which the frame does not
    always show. The groups are defined by the backends: change it only with them.

    Unit: groups | Range: 4 (the groups defined) | See: environment.float_input_dim
    """
    n_prev_actions_in_inputs: int = param(5, NON_NEGATIVE_INT)
    """Previous actions given to the agent, 4 flags each (accelerate, brake, left, right), oldest
    first: 5 actions are 250 ms of its own inputs, which makes the state closer to Markovian and the
    control smoother. Each action adds 4 floats to ``float_input_dim``.

    Unit: actions | Range: 3-8 | See: environment.float_input_dim, environment.tm_engine_step_per_action
    """

    # --- timeouts ---
    cutoff_rollout_if_race_not_finished_within_duration_ms: int = param(300_000, POSITIVE_INT)
    """End a race that has not finished after this race time (a truncation: the last state's value
    is still bootstrapped). Must exceed the time a good run needs, with margin for early slow runs.

    Unit: ms | Range: 180000-600000 | See: environment.cutoff_rollout_if_no_vcp_passed_within_duration_ms
    """
    cutoff_rollout_if_no_vcp_passed_within_duration_ms: int = param(2_000, POSITIVE_INT)
    """End a race (truncation) when no new reference point was reached for this long: a stuck or
    backwards car stops wasting collection time. Too short cuts races where the car briefly slows.

    Unit: ms | Range: 1000-5000 | See: environment.cutoff_rollout_if_race_not_finished_within_duration_ms, environment.road_width
    """
    timeout_during_run_ms: int = param(30_000, POSITIVE_INT)
    """How long to wait for TMInterface's answer while racing before the game is declared hung
    (``tmi`` backend only). Higher survives lag spikes and detects a frozen game later.

    Unit: ms | Range: 10000-60000 | See: performance.collector_timeout_s
    """
    timeout_between_runs_ms: int = param(600_000_000, POSITIVE_INT)
    """How long the game's plugin waits for its collector between races before giving up (``tmi``
    backend only); the collector may be busy there for a long time (a map change, a blocked
    queue). Very large by default: waiting between races is normal.

    Unit: ms | Range: 60000 to 600000000 | See: environment.timeout_during_run_ms
    """
    game_reboot_interval: int = param(43_200, POSITIVE_INT)
    """Restart each game instance after this long (``tmi`` backend only): long-running instances
    slow down and leak memory.

    Unit: s | Range: 21600-86400 | See: environment.backend
    """

    # --- game settings ---
    game_camera_number: int = param(2, choice(1, 2, 3))
    """The game's camera: 1 behind the car, 2 first person (what the agent was designed with: the
    road ahead fills the frame), 3 top view. Only the real game uses it.

    Unit: camera number | Range: 2 (1 and 3 change what the frames show)
    """
    sync_virtual_and_real_checkpoints: bool = param(True, BOOL)
    """Pair the real game's checkpoints with the nearest reference points, and only advance onto
    such a point when the car is within 12 m of the real checkpoint: progress cannot count a
    shortcut that skips a checkpoint the game would refuse. In the real game they are read from the
    map's .Challenge.Gbx (needs the pygbx extra, pip install 'rulka[tmi]', and TMI_USER_DATA_PATH for
    relative map paths) and paired with every reference point within 12 m, once per lap. On the
    simulator (and stand-in games) a track's own checkpoints use the reach of their gates instead of
    12 m (hypot(gate half-width, 6 m): 15.2 m on the built-in tracks), so a line that crosses a gate
    near its wall is not held."""

    # --- frame ---
    W_downsized: int = param(160, _FRAME_SIDE)
    """Width of the grayscale frame the agent sees (the game renders at this size). Smaller frames
    train faster and use less replay memory (bytes per transition grow with W x H) with less
    detail; the conv stack's output size is computed from it.

    Unit: pixels | Range: 64-256 (at least 34) | Section: neural_network | See: environment.H_downsized, memory.memory_size_schedule
    """
    H_downsized: int = param(120, _FRAME_SIDE)
    """Height of the grayscale frame the agent sees (4:3 with the default width).

    Unit: pixels | Range: 48-192 (at least 34) | Section: neural_network | See: environment.W_downsized
    """

    # --- rewards ---
    constant_reward_per_ms: float = param(-0.0012, FINITE)
    """Reward per millisecond of race time, negative: a time penalty, -0.06 per 50 ms action,
    -6 per 5 s. Together with the progress reward it defines "go fast, go forward": with the
    defaults the net reward is positive only above 0.12 m/ms (432 km/h), so almost every second
    costs reward and the less time a stretch of road takes, the better; standing still costs most.

    Unit: reward/ms | Range: -0.002 to -0.0005 | Section: rewards | See: environment.reward_per_m_advanced_along_centerline
    """
    reward_per_m_advanced_along_centerline: float = param(0.01, FINITE)
    """Reward per metre of progress along the reference line (+5 per 500 m), the main positive
    signal. Its ratio to the time penalty sets how much speed matters against progress.

    Unit: reward/m | Range: 0.005-0.05 | Section: rewards | See: environment.constant_reward_per_ms, environment.distance_between_checkpoints
    """
    shaped_reward_dist_to_cur_vcp: float = param(0.0, FINITE)
    """Weight of a potential-based shaping term on the distance to the current reference point,
    clipped to [min, max]: potential ``w x clip(distance)``; the replay adds
    ``gamma x phi(s') - phi(s)`` to each reward (dropped at the mini-race end), which leaves the
    best policy unchanged and guides early learning towards the line. 0 turns it off (the guide's
    default); -0.1 is the guide's suggestion when learning is too slow.

    Unit: reward/m | Range: -0.1 to 0 | Section: rewards | See: environment.shaped_reward_min_dist_to_cur_vcp, environment.shaped_reward_max_dist_to_cur_vcp
    """
    shaped_reward_min_dist_to_cur_vcp: float = param(2.0, NON_NEGATIVE)
    """Lower clip of the shaping distance: closer than this to the current point earns nothing more.

    Unit: m | Range: 0-5 | Section: rewards | See: environment.shaped_reward_dist_to_cur_vcp
    """
    shaped_reward_max_dist_to_cur_vcp: float = param(25.0, POSITIVE)
    """Upper clip of the shaping distance: further than this costs nothing more.

    Unit: m | Range: 10-50 | Section: rewards | See: environment.shaped_reward_dist_to_cur_vcp
    """
    missed_gate_ends_race: bool = param(False, BOOL)
    """Count a race cut off at a missed gate (``missed_checkpoint_K_of_N``: the car went round a
    checkpoint's gate; ``missed_finish_gate``; ``far_from_checkpoint_K_of_N``: it crossed the gate
    too far from the checkpoint for the zone rule) as lost: the last step is terminal, not a truncation,
    and earns ``reward_on_missed_gate``. Off (as Linesight): the race is truncated at the
    no-progress cut-off and its last state's value is bootstrapped, so going round a gate costs only
    the progress reward of the seconds before the cut-off, and the agent can keep doing it.

    Unit: on/off | Range: False, True | Section: rewards | See: environment.reward_on_missed_gate, environment.cutoff_rollout_if_no_vcp_passed_within_duration_ms
    """
    reward_on_missed_gate: float = param(-8.4, FINITE)
    """Reward of the last step of a race lost at a missed gate (``missed_gate_ends_race``). Keep it at
    or below the time penalty of a whole mini-race (``constant_reward_per_ms x
    temporal_mini_race_duration_ms``, -8.4 by default): losing the race must never pay better than
    driving on, or the agent learns to end races early; while ``missed_gate_ends_race`` is on, a value
    above that bound is refused.

    Unit: reward | Range: -20 to -8.4 | Section: rewards | See: environment.missed_gate_ends_race, environment.constant_reward_per_ms, environment.temporal_mini_race_duration_ms
    """

    # --- state normalisation (the ``state_normalization`` section; None = built-in defaults) ---
    float_inputs_mean: Optional[list[float]] = param(None, optional(list_of(FINITE)))
    """Per-float mean subtracted before the network, ``(floats - mean) / std``, one value per float
    of the layout (``float_input_dim`` values, each in its float's unit). None uses built-in values
    derived from the layout and these settings (clock: half the mini-race; distance to finish: the
    margin; flags: their typical frequency; reference points: spreading with the distance ahead).
    ``rulka stats`` measures them on your tracks; the list must match the layout's length.

    Unit: each float's unit | Range: None, or float_input_dim values | Section: state_normalization | See: environment.float_inputs_std, environment.float_input_dim
    """
    float_inputs_std: Optional[list[float]] = param(None, optional(list_of(POSITIVE)))
    """Per-float standard deviation dividing the centred floats (all > 0), one per float of the
    layout. None uses the built-in values; ``rulka stats`` measures them.

    Unit: each float's unit | Range: None, or float_input_dim values > 0 | Section: state_normalization | See: environment.float_inputs_mean, environment.float_input_dim
    """

    def validation_problems(self) -> list[str]:
        """Checks of several environment fields together (paths relative to the section), run by
        :func:`rulka.validation.validate_config` once every field passed its own rule."""
        problems = []
        if self.shaped_reward_min_dist_to_cur_vcp > self.shaped_reward_max_dist_to_cur_vcp:
            problems.append(f"shaped_reward_min_dist_to_cur_vcp: must be <= shaped_reward_max_dist_to_cur_vcp "
                            f"({self.shaped_reward_max_dist_to_cur_vcp}), got {self.shaped_reward_min_dist_to_cur_vcp}; "
                            f"set it to at most {self.shaped_reward_max_dist_to_cur_vcp:g} "
                            f"(-cp environment.shaped_reward_min_dist_to_cur_vcp={self.shaped_reward_max_dist_to_cur_vcp!r})")
        if self.temporal_mini_race_duration_ms < self.ms_per_action:
            problems.append(f"temporal_mini_race_duration_ms: must be at least one action ({self.ms_per_action} ms), "
                            f"got {self.temporal_mini_race_duration_ms}; set it to at least {self.ms_per_action} "
                            f"(-cp environment.temporal_mini_race_duration_ms={self.ms_per_action})")
        whole_race_penalty = self.constant_reward_per_ms * self.temporal_mini_race_duration_ms
        if self.missed_gate_ends_race and self.reward_on_missed_gate > whole_race_penalty + 1e-9:
            bound = _at_most(whole_race_penalty)
            problems.append(f"reward_on_missed_gate: must be <= constant_reward_per_ms x temporal_mini_race_duration_ms "
                            f"= {whole_race_penalty:.4g} while missed_gate_ends_race is on (else losing a race pays better "
                            f"than driving on), got {self.reward_on_missed_gate}; set it to {bound} or lower "
                            f"(-cp environment.reward_on_missed_gate={bound}) or turn the rule off "
                            f"(-cp environment.missed_gate_ends_race=false)")
        for name in ("float_inputs_mean", "float_inputs_std"):
            values = getattr(self, name)
            if values is not None and len(values) != self.float_input_dim:
                problems.append(f"{name}: must hold float_input_dim = {self.float_input_dim} values (one per float "
                                f"input at these settings), got {len(values)}; measure them again with `rulka stats`, "
                                f"or use the built-in values (-cp environment.{name}=null)")
        return problems

    @property
    def ms_per_action(self) -> int:
        """Duration of one action: ``tm_engine_step_per_action x ms_per_tm_engine_step``.

        Unit: ms | Range: 30-100 | See: environment.tm_engine_step_per_action, environment.ms_per_tm_engine_step
        """
        return self.tm_engine_step_per_action * self.ms_per_tm_engine_step

    @property
    def temporal_mini_race_duration_actions(self) -> int:
        """Mini-race horizon in actions: ``temporal_mini_race_duration_ms // ms_per_action``; the clock
        float counts from 0 up to it.

        Unit: actions | Range: 100-200 | See: environment.temporal_mini_race_duration_ms, training.oversample_long_term_steps
        """
        return self.temporal_mini_race_duration_ms // self.ms_per_action

    @property
    def float_input_dim(self) -> int:
        """Length of the float observation vector, computed from the float layout
        (``environments/trackmania/layout.py``), never set by hand. The configuration guide gives two
        values for it (191 in one place, 184 in its breakdown); the value here is the layout's sum,
        broken down below.

        Unit: floats | Range: computed | See: environment.n_prev_actions_in_inputs, environment.n_zone_centers_in_inputs, environment.n_contact_material_physics_behavior_types, environment.float_inputs_mean
        """
        return FloatLayout.from_parameters(self).size

    def parameter_notes(self) -> dict[str, str]:
        """Explanations computed from the current values, shown by ``rulka params`` (documentation only)."""
        layout = FloatLayout.from_parameters(self)
        groups = " + ".join(f"{sl.stop - sl.start} {name}" for name, sl in layout.groups())
        return {
            "float_input_dim": (f"Computed at these settings: {groups} = {layout.size} (previous_actions = 4 x "
                                f"n_prev_actions_in_inputs, wheel_surface_one_hot = 4 wheels x "
                                f"n_contact_material_physics_behavior_types, zone_centers = 3 x "
                                f"n_zone_centers_in_inputs)."),
            "temporal_mini_race_duration_actions": (
                f"At these settings: {self.temporal_mini_race_duration_ms} // {self.ms_per_action} = "
                f"{self.temporal_mini_race_duration_actions}."),
            "ms_per_action": (f"At these settings: {self.tm_engine_step_per_action} x {self.ms_per_tm_engine_step} = "
                              f"{self.ms_per_action} ms, {1000 / self.ms_per_action:g} actions per second."),
        }


def _at_most(bound: float) -> str:
    """``bound`` written short (4 significant digits) without rounding above it."""
    short = f"{bound:.4g}"
    return short if float(short) <= bound else repr(bound)

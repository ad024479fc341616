"""Linesight's IQN agent on the built-in simulator, sized for a 2-core CPU without a GPU.

The same agent, memory and map cycle as ``trackmania_iqn_uni``; every change from the
configuration guide's defaults is listed below with its reason. Main job of the README:

    rulka -p trackmania_iqn_sim
"""
from agents.trackmania_iqn_agent import TrackManiaIQNAgent
from environments.trackmania.training.experiment_parameters import (MapCycleEntry, MapCycleParameters,
                                                           TrackManiaExperimentConfig, TrackManiaMemoryParameters,
                                                           TrackManiaNeuralNetworkParameters,
                                                           TrackManiaPerformanceParameters,
                                                           TrackManiaTrainingParameters)
from environments.trackmania.parameters import TrackManiaEnvironmentParameters
from environments.trackmania.training.trackmania_graph_manager import TrackManiaGraphManager
from rulka.parameters import ExplorationParameters
from rulka.schedules import Schedule

config = TrackManiaExperimentConfig(
    environment=TrackManiaEnvironmentParameters(
        backend="sim",
        # 48 x 64 instead of 120 x 160: the conv stack costs ~6x less per sample on a CPU, and the
        # floats (reference line ahead, speeds) carry most of what the simulator's driving needs.
        H_downsized=48, W_downsized=64,
        # An action every 100 ms (10 engine ticks) instead of 50, and 10 s mini-races instead of 7 s:
        # both ends of the guide's ranges. The learner limits a CPU run, and at 100 ms each stored
        # transition (each sample of an update) covers twice the racing; the 100 actions of a mini-race
        # are backed up in 20 returns of 5 steps (28 at 50 ms and 7 s). The longer horizon lets
        # braking before a turn pay inside one mini-race: at 7 s the agent kept full throttle into a
        # turn of `medium`, hit the outer wall and rode it on the grass for 8 s; at 10 s it drove that
        # stretch on the road.
        # Measured, 30 min on `medium` seed 0, one run each on one machine: 0.965 of the tuned driver
        # (1.004 at 50 ms and 7 s, 1.008 at 100 ms and 7 s): docs/benchmarks.md, "Coarser actions and
        # a longer mini-race". The tuned driver it is compared with still acts every 50 ms.
        tm_engine_step_per_action=10,
        temporal_mini_race_duration_ms=10_000,
        # The guide's remedy for slow learning: potential-based shaping towards the reference line
        # (-0.1 x clip(distance to the current point, 2, 25) m), added by the replay memory when it
        # assembles a batch (gamma * phi(s') - phi(s), dropped at the mini-race end), as Linesight.
        # Without shaping a 30-minute CPU run learned to race off the road and stalled in the
        # third turn (measured: greedy runs stuck at 65 % of the track after 22 minutes).
        shaped_reward_dist_to_cur_vcp=-0.1,
        # 0.05 reward per metre of progress instead of 0.01: with the shaping telescoping inside each
        # mini-race, the actions' values differ only by the progress they make, a few thousandths
        # at 0.01 against a -6.8 mini-race value; 5x makes those differences learnable in a CPU run.
        # The optimum is unchanged (within a mini-race the time reward does not depend on the
        # actions). Measured, 30 min on `short`, seed 0 (bench/trackmania_vs_baseline.py): first finish
        # 6.5 min (10.4 at 0.01), best greedy race 17.85 s (20.80 s at 0.01).
        reward_per_m_advanced_along_centerline=0.05,
    ),
    neural_network=TrackManiaNeuralNetworkParameters(
        # 128-wide float head and dueling heads instead of 256 / 512: ~30x fewer parameters,
        # a gradient step on a CPU in tens of milliseconds instead of seconds.
        float_hidden_dim=128, dense_hidden_dimension=128,
        # K = 8 quantiles when acting instead of 32: inference is per action on the CPU.
        iqn_k=8,
        # Polyak update every 4 batches, as Linesight does at batch 512 (2048 transitions).
        number_memories_trained_on_between_target_network_updates=4 * 64,
    ),
    training=TrackManiaTrainingParameters(
        run_name="sim",
        # Batch 64 instead of 512: same number of samples per stored transition (the gate
        # below), 8x more frequent updates, which a short CPU run needs.
        batch_size=64,
        # n-step returns over 5 actions instead of 3 (exploratory actions still cut them, as the guide):
        # a mini-race's value is backed up in fewer steps, which a 30-minute CPU run needs. Measured at
        # 50 ms and 7 s, 30 min, one run each on one machine: `medium` 1.004 of the tuned driver (1.033
        # at 3, 1.023 at 10), `short` seed 2 0.853 (0.900 at 3), `procedural:1` 0.893 (0.912 at 3):
        # docs/benchmarks.md, "n-step returns".
        n_steps=5,
        # Schedules compressed ~5x: a 30-minute run on 2 CPU cores plays 0.6-0.9 million actions,
        # not the tens of millions the real-game schedules span. At ~10x every schedule had reached
        # its last value by minute 10-14 and `medium`'s greedy races stopped improving there
        # (1.040 of the tuned driver); at 5x they improved to the end (0.995), `short` 0.871
        # (0.913 at 10x): bench/results/2026-12-02_schedules, docs/benchmarks.md.
        lr_schedule=Schedule([(0, 1e-3), (600_000, 1e-4), (3_000_000, 5e-5)], "exponential"),
        gamma_schedule=Schedule([(0, 0.999), (300_000, 0.999), (500_000, 1.0)], "linear"),
        tensorboard_suffix_schedule=Schedule([(0, "")], "staircase"),
        checkpoint_every_n_env_steps=20_000,
        max_env_steps=2_000_000,
    ),
    memory=TrackManiaMemoryParameters(
        # Smaller frames make transitions ~5x smaller; the buffer is sized for the shorter run.
        memory_size_schedule=Schedule([(0, (50_000, 5_000)), (500_000, (100_000, 20_000))], "staircase"),
        # Each transition used 8 times instead of 32: on a CPU the learner, not the simulator, is the
        # bottleneck. 4 and 16 (learning rate kept per update) gave `medium` 1.044 and 1.020 of the
        # tuned driver against 1.033 at 8, one run each: docs/benchmarks.md, "The replay ratio on `medium`".
        number_times_single_memory_is_used_before_discard=8.0,
        # 50k transitions at 48 x 64 are ~170 MB: saved in checkpoints so --resume loses nothing.
        save_memory_in_checkpoint=True,
    ),
    exploration=ExplorationParameters(
        # The guide's knots / 5, for the same reason as the schedules above.
        epsilon_schedule=Schedule([(0, 1.0), (10_000, 1.0), (60_000, 0.1), (600_000, 0.03)], "exponential"),
        epsilon_boltzmann_schedule=Schedule([(0, 0.15), (600_000, 0.03)], "exponential"),
    ),
    map_cycle=MapCycleParameters([
        MapCycleEntry(short_name="short", map_path="short", is_exploration=True, fill_buffer=True, repeat=4),
        MapCycleEntry(short_name="short", map_path="short", is_exploration=False, fill_buffer=True, repeat=1),
    ]),
    # One collector process plays 4 simulator instances (one batched forward pass for their 4 actions)
    # while the learner trains in the main process. The learner waits for no one, the collector waits
    # for the learner (the replay ratio) most of the time: the learner keeps torch's default threads
    # (all cores), so its second thread uses the collector's idle core (bench/preset_actions_per_s.py
    # on 2 cores: 1.12x the actions/s of one learner thread).
    performance=TrackManiaPerformanceParameters(gpu_collectors_count=1, envs_per_collector=4, torch_num_threads=0),
)

graph_manager = TrackManiaGraphManager(agent_class=TrackManiaIQNAgent, config=config)

"""QR-DQN (agents/qr_dqn_agent.py) on gymnasium CartPole-v1: the agent of docs/new_agent.md.

Same network widths, memory and rhythm as cartpole_iqn, with N fixed quantile fractions instead
of sampled ones. Golden test: an evaluation average (10 greedy episodes) of at least 475 within
50,000 environment steps.

    rulka -p cartpole_qr_dqn --seed 0
"""
from agents.qr_dqn_agent import QRDQNAgent
from rulka.graph_manager import BasicRLGraphManager
from rulka.parameters import (ExperimentConfig, ExplorationParameters, GymEnvironmentParameters, MemoryParameters,
                              NeuralNetworkParameters, PresetValidationParameters, TrainingParameters)
from rulka.schedules import Schedule

config = ExperimentConfig(
    environment=GymEnvironmentParameters(level="CartPole-v1"),
    neural_network=NeuralNetworkParameters(
        vector_embedder_hidden_sizes=[128, 128], dense_hidden_dimension=128, dueling=True,
        iqn_n=16, iqn_kappa=1.0, use_ddqn=True,  # N = 16 fixed quantiles
        clip_grad_norm=10.0, number_memories_trained_on_between_target_network_updates=64 * 50,
        soft_update_tau=1.0,
    ),
    training=TrainingParameters(
        run_name="cartpole_qr_dqn", batch_size=64, lr_schedule=Schedule([(0, 1e-3)], "staircase"),
        gamma_schedule=Schedule([(0, 0.99)], "staircase"), n_steps=3, discard_non_greedy_actions_in_nsteps=False,
        adam_epsilon=1e-8, evaluate_every_n_env_steps=2_500, evaluation_episodes=10,
        checkpoint_every_n_env_steps=10_000, max_env_steps=50_000,
    ),
    memory=MemoryParameters(
        memory_size_schedule=Schedule([(0, (50_000, 1_000))], "staircase"),
        number_times_single_memory_is_used_before_discard=32.0,
    ),
    exploration=ExplorationParameters(
        epsilon_schedule=Schedule([(0, 1.0), (10_000, 0.02)], "linear"),
        epsilon_boltzmann_schedule=Schedule([(0, 0.0)], "staircase"),
    ),
)

graph_manager = BasicRLGraphManager(
    agent_class=QRDQNAgent, config=config,
    preset_validation_params=PresetValidationParameters(test=True, min_reward_threshold=475, max_env_steps=50_000),
)

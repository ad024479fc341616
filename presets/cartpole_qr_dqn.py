"""QR-DQN (agents/qr_dqn_agent.py) on gymnasium CartPole-v1: the agent of docs/new_agent.md.

cartpole_iqn's configuration (network widths, memory, rhythm, schedules) with N = 16 fixed quantile
fractions instead of sampled ones (QR-DQN ignores ``iqn_k`` and ``iqn_embedding_dimension``).
Golden test: an evaluation average (10 greedy episodes) of at least 475 within 50,000 environment steps.

    rulka -p cartpole_qr_dqn --seed 0
"""
import copy

from agents.qr_dqn_agent import QRDQNAgent
from presets.cartpole_iqn import config as iqn_config
from rulka.graph_manager import BasicRLGraphManager
from rulka.parameters import PresetValidationParameters

config = copy.deepcopy(iqn_config)
config.neural_network.iqn_n = 16
config.training.run_name = "cartpole_qr_dqn"

graph_manager = BasicRLGraphManager(
    agent_class=QRDQNAgent, config=config,
    preset_validation_params=PresetValidationParameters(test=True, min_reward_threshold=475, max_env_steps=50_000),
)

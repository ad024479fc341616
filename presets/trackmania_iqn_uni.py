"""Linesight's IQN agent in the real game: TMNF through TMInterface 2, the configuration guide's
defaults (``trackmania_iqn_uni.yaml`` beside this file holds all of them).

Without the game (no TMInterface settings in ``.env``, no reference line) the run stops at once
and names ``trackmania_iqn_sim``, the same agent on the built-in simulator.
"""
from pathlib import Path

from agents.trackmania_iqn_agent import TrackManiaIQNAgent
from environments.trackmania.training.experiment_parameters import TrackManiaExperimentConfig
from environments.trackmania.training.trackmania_graph_manager import TrackManiaGraphManager
from rulka.config import apply_dict, load_yaml_file

CONFIG_FILE = Path(__file__).with_suffix(".yaml")

config = apply_dict(TrackManiaExperimentConfig(), load_yaml_file(CONFIG_FILE))

graph_manager = TrackManiaGraphManager(agent_class=TrackManiaIQNAgent, config=config)

"""Preset files loaded by path reach collector processes: classes defined in them can be unpickled there."""
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

from rulka.cli import main
from rulka import checkpoints

PRESET = textwrap.dedent('''
    from agents.dqn_agent import DQNAgent
    from presets.cartpole_dqn import config
    from rulka.graph_manager import BasicRLGraphManager


    class MyDQN(DQNAgent):
        """An agent class that exists only in this file."""


    graph_manager = BasicRLGraphManager(agent_class=MyDQN, config=config)
''')


def test_unpickling_user_modules_imports_the_preset_file_in_a_fresh_process(tmp_path):
    """A fresh interpreter that unpickles UserModules, then a class of a preset file, finds the class."""
    from rulka.presets import load_preset_module
    from rulka.user_modules import UserModules

    (tmp_path / "my_dqn.py").write_text(PRESET)
    module = load_preset_module(str(tmp_path / "my_dqn.py"))
    payload = tmp_path / "payload.pkl"
    payload.write_bytes(pickle.dumps((UserModules(), module.MyDQN)))
    code = f"import pickle; _, cls = pickle.loads(open({str(payload)!r}, 'rb').read()); print(cls.__name__)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "MyDQN"


def test_a_preset_file_with_its_own_agent_class_trains_with_a_collector_process(tmp_path):
    """rulka -p FILE.py with gpu_collectors_count=1: the collector process builds the file's agent class."""
    (tmp_path / "my_dqn.py").write_text(PRESET)
    assert main(["-p", str(tmp_path / "my_dqn.py"), "-e", "r", "--experiments-dir", str(tmp_path), "--max-steps", "600",
                 "-cp", "performance.gpu_collectors_count=1", "-cp", "training.checkpoint_every_n_env_steps=0",
                 "-cp", "training.evaluate_every_n_env_steps=0", "--device", "cpu", "--no-progress"]) == 0
    saved = checkpoints.load_checkpoint(tmp_path / "r" / "checkpoints" / checkpoints.LAST)
    assert saved["agent"]["counters"]["env_steps"] >= 600

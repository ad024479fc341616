"""``rulka.policy``: predict(deterministic=True) of an IQN policy is a function of the observation
(the rest of the policy API is in tests/rulka/test_export.py)."""
import gymnasium as gym
import numpy as np
import yaml

from rulka.config import apply_overrides
from rulka.policy import load_policy
from rulka.presets import load_graph_manager


def iqn_run(tmp_path):
    """A cartpole_iqn run folder with a checkpoint of its (untrained) networks."""
    graph_manager = load_graph_manager("cartpole_iqn")
    graph_manager.config = apply_overrides(graph_manager.config, [], ["performance.torch_num_threads=1"])
    run_dir = tmp_path / "iqn"
    graph_manager.create(run_dir, "cpu", 0)
    (run_dir / "run_info.yaml").write_text(yaml.safe_dump({"preset": "cartpole_iqn", "seed": 0}))
    graph_manager.save_checkpoint()
    graph_manager.close()
    return run_dir


def test_iqn_deterministic_predict_returns_the_same_action_on_every_call(tmp_path):
    """predict(deterministic=True) gives the same action for the same observation on every call, one
    observation or a batch (IQN ranks actions at the fixed fractions (i + 0.5) / iqn_k, not sampled ones);
    deterministic=False still samples (exploration at the checkpoint's step)."""
    policy = load_policy(iqn_run(tmp_path))
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(0)
    observations = np.stack([env.reset(seed=s)[0] for s in range(8)]
                            + [rng.normal(0, 1.5, 4).astype(np.float32) for _ in range(504)])
    first = policy.predict(observations, deterministic=True)
    values = policy.q_values(observations)
    assert first.tolist() == values.argmax(1).tolist()
    for _ in range(30):
        assert policy.predict(observations, deterministic=True).tolist() == first.tolist()
        assert np.array_equal(policy.q_values(observations), values)
    singles = [{policy.predict(obs, deterministic=True) for _ in range(30)} for obs in observations[:8]]
    assert singles == [{int(a)} for a in first[:8]]
    assert len({policy.predict(observations[0], deterministic=False) for _ in range(50)}) == 2

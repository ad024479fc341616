"""bench/trackmania_soak.py's judging without a run: the stored-actions check over races.csv lines, and a
fault's detection time and races lost read from a stamped log."""
from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import trackmania_soak as soak  # noqa: E402


def _rows(*pairs):
    return [{"env_steps": str(steps), "stored_actions": str(stored)} for steps, stored in pairs]


def test_actions_stored_outside_kept_races_are_counted_and_a_resume_line_is_skipped():
    """Between two lines env_steps must grow by the later race's stored actions: 200 actions of a lost race
    stored in between are found; the first line after a resume (from the checkpoint's count) is not checked."""
    clean = _rows((100, 100), (180, 80), (300, 120))
    assert soak.stored_outside_races(clean, []) == (2, 0)
    lost_race_stored = _rows((100, 100), (380, 80), (500, 120))
    assert soak.stored_outside_races(lost_race_stored, []) == (2, 200)
    resumed = _rows((100, 100), (180, 80), (150, 50), (250, 100))
    assert soak.stored_outside_races(resumed, [2]) == (2, 0)


def test_a_fault_is_judged_from_the_lines_after_it():
    """A game stopped at 100 s: the hang line for its port at 131 s is its detection (31 s) and one race is
    lost; lines of another port, and lines before the fault, do not count. A killed collector loses the race
    it had in flight (no line says so)."""
    log = soak.Log()
    log.lines = [(90.0, "race discarded: game instance 1 (port 5001): timed out; the game hung: killed (pids 7)"),
                 (120.0, "race discarded: game instance 2 (port 5002): timed out; the game hung: killed (pids 8)"),
                 (131.0, "race discarded: game instance 1 (port 5001): timed out; the game hung: killed (pids 9), "
                         "relaunched before the next race")]
    fault = soak.Fault(100.0, "game_stop", 9, 5001)
    soak.judge(fault, log, 220.0, soak.Watch(), soak.GAMES)
    assert fault.detected_s == 31.0 and fault.lost == 1 and "pids 9" in fault.done
    killed = soak.Fault(100.0, "collector_kill", 4, 5003)
    log.lines.append((100.8, "rulka: collector 2 died (exit code -9); its processes (pids 10; ports 5003) were killed"))
    soak.judge(killed, log, 220.0, soak.Watch(), soak.GAMES)
    assert abs(killed.detected_s - 0.8) < 1e-9 and killed.lost == 1  # its race in flight, never reported
    # collector processes: the learner's exit watcher logs the death at once, its next check replaces it
    watched = soak.Fault(150.0, "collector_kill", 5, 5003)
    log.lines += [(150.3, "collector 2 died (exit code -9): its processes are killed now, the learner replaces it"),
                  (153.1, "rulka: collector 2 died (exit code -9); its processes (pids 11; ports 5003) were killed; "
                          "its unfinished episodes are dropped, a new collector 2 starts")]
    soak.judge(watched, log, 220.0, soak.Watch(), soak.GAMES)
    assert abs(watched.detected_s - 0.3) < 1e-9 and "killed now" in watched.done
    assert "replaced after 3.1 s" in watched.note and "pids 11" in watched.note


def test_a_node_loss_loses_its_games_races_and_ray_prefixed_lines_count():
    """A lost Ray node is detected by the first "collector N died" line after it; its races lost are one per
    game it ran (in flight, never reported) plus any discarded later on those games' ports, read through the
    prefix Ray puts before an actor's lines. Another port's discard is not counted; more than one race per
    game on the node misses the goal's bound."""
    log = soak.Log()
    log.lines = [(212.5, "rulka: collector 3 died (The actor died unexpectedly before finishing this task.); "
                         "its unfinished episodes are dropped, a new collector 3 starts"),
                 (240.0, "(RayCollectorActor pid=77, ip=127.0.0.1) race discarded: game instance 3 (port 5003): "
                         "timed out"),
                 (241.0, "(RayCollectorActor pid=78) race discarded: game instance 1 (port 5001): timed out")]
    fault = soak.Fault(200.0, "node_loss", 55, None, node_ports=[5002, 5003])
    soak.judge(fault, log, 300.0, soak.Watch(), soak.GAMES)
    assert fault.detected_s == 12.5 and fault.lost == 3 and "collector 3 died" in fault.done


def test_the_learners_updates_add_up_over_incarnations_and_its_training_fraction_is_the_median(tmp_path):
    """Two incarnations' TensorBoard files (a resumed run's counter starts from its checkpoint's: 300, not 0):
    updates are each file's last count minus its first (200 + 150), the training fraction their median, and the
    printout's line says how many actions each update stands for."""
    from tensorboardX import SummaryWriter

    for name, counts, fractions in (("a", [0, 100, 200], [0.0, 0.99, 0.98]), ("b", [300, 400, 450], [0.0, 0.97, 0.99])):
        writer = SummaryWriter(str(tmp_path / name))
        for step, (count, fraction) in enumerate(zip(counts, fractions)):
            writer.add_scalar("RL/gradient_updates", count, step)
            writer.add_scalar("Performance/learner_training_fraction", fraction, step)
        writer.close()
    updates, fraction = soak.learner_updates(tmp_path)
    assert updates == 350 and abs(fraction - 0.975) < 1e-6  # float32 in the files
    line = soak.learner_line(tmp_path, 5600)
    assert "350 gradient updates (16.0 actions stored per update)" in line and "median training fraction 0.98" in line
    assert "no update logged" in soak.learner_line(tmp_path / "none", 10)

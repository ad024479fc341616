"""write_highest_priority_figures: which slots are drawn, how the frames become images, where they go."""
import numpy as np
import pytest
from gymnasium import spaces
from PIL import Image

from memories.high_priority_figures import write_highest_priority_figures
from memories.replay import make_replay


def frame_memory(capacity=64, n_steps=3, shape=(1, 4, 6), dtype=np.uint8, alpha=1.0, **kwargs):
    space = spaces.Dict({"frame": spaces.Box(0, 255, shape, dtype)})
    return make_replay(space, capacity, n_steps, seed=0, prio_alpha=alpha, prio_epsilon=1e-9, **kwargs)


def fill(memory, length, shape=(1, 4, 6), dtype=np.uint8, greedy=lambda t: True):
    """One episode of ``length`` steps whose frame at step t is filled with t (terminated at the end)."""
    for t in range(length):
        memory.add({"frame": np.full(shape, t, dtype)}, 0, 0.0, {"frame": np.full(shape, t + 1, dtype)},
                   t == length - 1, False, greedy(t))


def prioritize(memory, priorities: dict[int, float]) -> None:
    """Priority ~ error for the given slots, ~0 for every other ready slot."""
    slots = np.flatnonzero(memory.ready)
    memory.sampler.update(memory.storage, slots, [priorities.get(int(s), 0.0) for s in slots])


def owners(paths) -> set[int]:
    return {int(p.name.split("_")[0]) for p in paths}


def test_default_top_is_20_and_only_positive_priorities_are_drawn(tmp_path):
    """By default the 20 slots of highest priority are drawn; slots of priority 0 (not ready) never own figures."""
    memory = frame_memory(capacity=64)
    fill(memory, 40)
    prioritize(memory, {s: 1.0 + s for s in range(40)})
    assert owners(write_highest_priority_figures(memory, tmp_path / "a")) == set(range(20, 40))
    one = frame_memory(capacity=64)
    fill(one, 1)  # slot 0 ready, slot 1 its final state (priority 0)
    prioritize(one, {0: 1.0})
    written = write_highest_priority_figures(one, tmp_path / "b", top=5)
    assert [p.name for p in written] == ["0_0_1_1.00.png"]


def test_uniform_memory_and_missing_frames_write_nothing(tmp_path):
    """A uniform memory has no priorities to rank: nothing is written, even with a frame observation."""
    memory = frame_memory(alpha=0.0)
    fill(memory, 10)
    assert write_highest_priority_figures(memory, tmp_path / "u") == []
    assert not (tmp_path / "u").exists()


def test_old_figures_are_cleared_by_default_and_nested_folders_are_made(tmp_path):
    """Earlier PNGs in the folder are deleted first (clear=True by default), other files are left; with
    clear=False they stay. The folder is created with its parents."""
    memory = frame_memory()
    fill(memory, 10)
    prioritize(memory, {5: 3.0})
    out = tmp_path / "run" / "high_prio_figures"
    out.mkdir(parents=True)
    (out / "old.png").write_bytes(b"x")
    (out / "notes.txt").write_text("keep")
    write_highest_priority_figures(memory, out, top=1)
    assert not (out / "old.png").exists() and (out / "notes.txt").exists()
    (out / "old.png").write_bytes(b"x")
    write_highest_priority_figures(memory, out, top=1, clear=False)
    assert (out / "old.png").exists()
    deep = tmp_path / "a" / "b" / "c"
    assert write_highest_priority_figures(memory, deep, top=1) and deep.is_dir()


def test_window_wraps_around_a_full_ring(tmp_path):
    """Once the ring is full, the window of the newest slot wraps to slots 0, 1, ... (still only ready ones)."""
    memory = frame_memory(capacity=16, n_steps=1)
    fill(memory, 15)  # slots 0-14 ready, 15 the final state: the ring is full
    assert memory.num_slots_used == memory.capacity
    prioritize(memory, {14: 9.0})
    names = {p.name.split("_")[1] for p in write_highest_priority_figures(memory, tmp_path, top=1)}
    assert names == {str(s) for s in (10, 11, 12, 13, 14, 0, 1, 2, 3)}  # 15 is not ready


def test_window_stops_at_the_last_written_slot(tmp_path):
    """Before the ring is full, the window ends at the last slot written (no wrap, no slot out of range)."""
    memory = frame_memory(capacity=16, n_steps=1)
    fill(memory, 13)  # slots 0-12 ready, 13 final, 14-15 empty
    prioritize(memory, {12: 9.0})
    slots = sorted(int(p.name.split("_")[1]) for p in write_highest_priority_figures(memory, tmp_path, top=1))
    assert slots == list(range(8, 13))


def test_window_uses_the_memorys_discard_rule(tmp_path):
    """The figure's n-step count is the memory's own: with discard_non_greedy_actions_in_nsteps a window is
    cut before a later exploratory action."""
    memory = frame_memory(n_steps=3, discard_non_greedy_actions_in_nsteps=True)
    fill(memory, 10, greedy=lambda t: t != 6)
    prioritize(memory, {5: 2.0})
    names = {p.name for p in write_highest_priority_figures(memory, tmp_path, top=1)}
    assert "5_5_1_2.00.png" in names  # slot 5: the action of step 6 is exploratory, so 1 step


def test_rgb_channels_first_frames_become_colour_images(tmp_path):
    """(3, H, W) frames are drawn as RGB: state and next state side by side, upscaled 4 times."""
    memory = frame_memory(shape=(3, 2, 3), n_steps=1)
    for t in range(4):
        frame = np.zeros((3, 2, 3), np.uint8)
        frame[0], frame[1], frame[2] = 10 * t, 100, 200  # R varies with t
        nxt = frame.copy()
        nxt[0] = 10 * (t + 1)
        memory.add({"frame": frame}, 0, 0.0, {"frame": nxt}, t == 3, False)
    prioritize(memory, {1: 5.0})
    image = np.asarray(Image.open(tmp_path / "1_1_1_5.00.png")) if write_highest_priority_figures(
        memory, tmp_path, top=1) else None
    assert image.shape == (8, 24, 3)
    np.testing.assert_array_equal(image[0, 0], [10, 100, 200])
    np.testing.assert_array_equal(image[0, 12], [20, 100, 200])


def test_stacks_draw_their_last_frame_and_gray_frames_are_drawn_as_they_are(tmp_path):
    """A (K, H, W) stack (K != 3) is drawn by its last frame; (H, W) frames are drawn directly."""
    stack = frame_memory(shape=(4, 2, 2), n_steps=1)
    for t in range(3):
        frame = np.stack([np.full((2, 2), 50 + k, np.uint8) for k in range(4)]) + t
        stack.add({"frame": frame}, 0, 0.0, {"frame": frame + 1}, t == 2, False)
    prioritize(stack, {0: 1.0})
    write_highest_priority_figures(stack, tmp_path / "s", top=1)
    image = np.asarray(Image.open(tmp_path / "s" / "0_0_1_1.00.png"))
    assert image.shape == (8, 16) and image[0, 0] == 53 and image[0, 8] == 54
    gray = frame_memory(shape=(2, 2), n_steps=1)
    fill(gray, 3, shape=(2, 2))
    prioritize(gray, {1: 1.0})
    write_highest_priority_figures(gray, tmp_path / "g", top=1)
    image = np.asarray(Image.open(tmp_path / "g" / "1_1_1_1.00.png"))
    assert image.shape == (8, 16) and image[0, 0] == 1 and image[0, 8] == 2


def test_float_frames_are_rescaled_to_the_full_gray_range(tmp_path):
    """Non-uint8 frames are mapped from their [min, max] over the drawn states (and, apart, next states) to
    [0, 255]; a constant batch is drawn black."""
    memory = frame_memory(shape=(1, 2, 2), dtype=np.float32, n_steps=1)
    fill(memory, 3, shape=(1, 2, 2), dtype=np.float32)  # frames 0, 1, 2 (and 3, the final state)
    prioritize(memory, {1: 1.0})
    write_highest_priority_figures(memory, tmp_path / "f", top=1)
    lows = [np.asarray(Image.open(tmp_path / "f" / f"1_{s}_1_{p}.png"))[0, 0] for s, p in ((0, "0.00"), (1, "1.00"))]
    highs = [np.asarray(Image.open(tmp_path / "f" / f"1_{s}_1_{p}.png"))[0, 4] for s, p in ((2, "0.00"),)]
    assert lows == [0, 128] and highs == [255]  # states 0, 1, 2 -> 0, 128, 255; next states 1, 2, 3 likewise
    flat = frame_memory(shape=(1, 2, 2), dtype=np.float32, n_steps=1)
    for t in range(2):
        flat.add({"frame": np.full((1, 2, 2), 7.0, np.float32)}, 0, 0.0, {"frame": np.full((1, 2, 2), 7.0, np.float32)},
                 t == 1, False)
    prioritize(flat, {0: 1.0})
    write_highest_priority_figures(flat, tmp_path / "c", top=1)
    assert (np.asarray(Image.open(tmp_path / "c" / "0_0_1_1.00.png")) == 0).all()


def test_frames_of_other_ranks_are_refused(tmp_path):
    """A frame observation that is neither (H, W) nor (C, H, W) is refused, naming its shape."""
    memory = frame_memory(shape=(5,), n_steps=1)
    fill(memory, 3, shape=(5,))
    prioritize(memory, {1: 1.0})
    with pytest.raises(ValueError, match=r"cannot draw frames of shape \(5,\)"):
        write_highest_priority_figures(memory, tmp_path, top=1)

"""The progress line shows the best evaluation so far beside the last one."""
import io

from rulka.progress import ProgressBar


def test_progress_line_shows_last_and_best_evaluation():
    """With no last evaluation (e.g. a greedy race that did not finish) the best so far still shows."""
    stream = io.StringIO()
    bar = ProgressBar(1000, stream=stream, interval_s=0.0)
    bar.update("train", 10, None, force=True)
    bar.update("train", 20, None, force=True, best_eval=19.8)
    bar.update("train", 30, 21.25, force=True, best_eval=19.8)
    lines = stream.getvalue().splitlines()
    assert lines[0].endswith("last eval -  best -")
    assert lines[1].endswith("last eval -  best 19.80")
    assert lines[2].endswith("last eval 21.25  best 19.80")

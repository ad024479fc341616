"""``rulka`` with checkpoint writes slowed down, so a test can kill the process in the middle of one.

RULKA_SLOW_WRITE=before|after: sleep before the payload is written (the arrays folder is already
there) or after it is written and fsynced but before it replaces ``last.pt``; the file named by
RULKA_SLOW_WRITE_MARKER is created when the sleep starts. Only checkpoint files (``*.pt``) are slowed:
``run_info.yaml`` goes through the same durable write when a run starts, and slowing it would hold the
run before its first checkpoint (a kill there is not one inside a checkpoint write).
"""
import os
import sys
import time

from rulka import checkpoints
from rulka.cli import main

_original = checkpoints._write_file_durably


def _slow(path, header, payload):
    where = os.environ.get("RULKA_SLOW_WRITE", "") if path.suffix == ".pt" else ""
    if where == "before":
        open(os.environ["RULKA_SLOW_WRITE_MARKER"], "w").close()
        time.sleep(30)
    written = _original(path, header, payload)
    if where == "after":
        open(os.environ["RULKA_SLOW_WRITE_MARKER"], "w").close()
        time.sleep(30)
    return written


checkpoints._write_file_durably = _slow

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

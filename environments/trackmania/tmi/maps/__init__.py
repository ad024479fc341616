"""The game's files: a map's real checkpoints (:mod:`.map_checkpoints`), replays (:mod:`.replays`: hiding
the personal-record ghost; :mod:`.replay_to_line`: a reference line from a replay) and TMInterface input
scripts (:mod:`.inputs_script` reads one, :mod:`.inputs_export` writes one from actions)."""

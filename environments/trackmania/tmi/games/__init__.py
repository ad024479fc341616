"""The games and their processes: a user's game settings (:mod:`.settings`, the ``TMI_*`` keys), launching
a game (:mod:`.launcher`, one launch at a time: :mod:`.launch_lock`), knowing its processes by pid and start
time on every platform (:mod:`.processes`), the guard that kills a game whose collector is gone
(:mod:`.game_guard`, run as a script), and one game's race cycle (:mod:`.game_instance_manager`)."""

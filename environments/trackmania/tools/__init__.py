"""TrackMania tools around training: the classical driver, recordings, race pictures and replays, and
the `rulka trackmania` commands."""

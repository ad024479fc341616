"""What TrackMania plugs into the training loop: its graph manager, experiment parameters, map cycle,
race log and observation normalisation."""

"""Presets: one Python file per experiment, each ending by building `graph_manager`."""

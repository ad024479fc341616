"""The built-in TrackMania simulator: car physics at 100 Hz, surfaces, and a grayscale renderer."""
from environments.trackmania.sim.backend import SimBackend, SimOptions
from environments.trackmania.sim.car import CarPhysics
from environments.trackmania.sim.car_parameters import CarParameters
from environments.trackmania.sim.render import CAMERAS, Renderer

__all__ = ["SimBackend", "SimOptions", "CarPhysics", "CarParameters", "Renderer", "CAMERAS"]

"""Input filters (observations, rewards) and output filters (actions) that also map spaces."""
from filters.filter import ActionFilter, InputFilter, ObservationFilter, OutputFilter, RewardFilter

__all__ = ["ActionFilter", "InputFilter", "ObservationFilter", "OutputFilter", "RewardFilter"]

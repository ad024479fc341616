"""Collection: playing environments with the current policy and handing the learner what was played.

One :class:`~rulka.collection.collector.Collector` steps ``envs_per_collector`` environments
together and chooses all their actions in one forward pass. It runs either inside the learner's
process (``gpu_collectors_count: 0``; :class:`~rulka.collection.in_process.InProcessCollection`) or
in collector processes (:class:`~rulka.collection.processes.ProcessCollection`), which read the
policy the learner publishes in shared memory (:class:`~rulka.collection.shared.SharedPolicy`) and
send :class:`~rulka.collection.rollout.Rollout` chunks back through bounded channels. Every action
is stamped with its weights' gradient updates and the time it was chosen; :mod:`rulka.collection.lag`
turns the stamps into policy lag and queue delay.

All three kinds (in-process, processes, Ray actors:
:class:`~rulka.collection.ray_collection.RayCollection`) implement :class:`Collection`, what the
training loop asks of a collection; the two remote kinds share their restart and replacement
accounting in :class:`~rulka.collection.remote.RemoteCollection`.
"""
from rulka.collection.interface import Collection

__all__ = ["Collection"]

"""Importers: turn traces from other tools (torch.profiler / Kineto JSON) into a :class:`~collector.model.Trace`."""

"""Importers: turn traces from other tools (torch.profiler / Kineto JSON) into a :class:`~collector.model.Trace`.

:mod:`collector.importers.registry` lists every format Streamscope reads (ours included), each recognised by
its first bytes; collector.load.load_trace hands a file to the importer that claims it.
"""

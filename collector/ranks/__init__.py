"""Ranks: the traces of one job's ranks made into one run, after each rank recorded (or was imported) alone.

:mod:`~collector.ranks.align` puts the ranks on one clock from their collectives, :mod:`~collector.ranks.merge`
joins them into one multi-rank run, and :mod:`~collector.ranks.rankzip` reads the rank files out of one zip.
"""

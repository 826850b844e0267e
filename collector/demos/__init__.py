"""The built-in demos: small, real training loops that each teach one lesson (``streamscope record demo:NAME``).

:mod:`~collector.demos.loops` holds the loops and their list (``DEMOS``); :mod:`~collector.demos.ddp` the
DistributedDataParallel demo, with the straggler it can plant on one rank. Importing them never imports torch.
Their source lines count as the user's (collector.recording.sourceline), so findings point into these files.
"""

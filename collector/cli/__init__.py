"""The collector's command line: ``python3 -m collector record|demos``, with no web dependencies.

:mod:`~collector.cli.main` parses the command, :mod:`~collector.cli.runner` records a demo or runs a user's
script under the recorder, and :mod:`~collector.cli.launch` starts every rank of a ``--nproc`` job.
"""

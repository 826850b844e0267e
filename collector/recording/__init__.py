"""Recording: everything that needs torch at run time (op interception, CUDA events, host waits, the runner).

Nothing here is imported by ``import collector``; :func:`collector.record` loads it on first use.
"""

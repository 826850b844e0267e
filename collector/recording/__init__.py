"""Recording: everything that needs torch at run time (op interception, CUDA events, CUPTI, host waits).

Nothing here is imported by ``import collector``; :func:`collector.record` loads it on first use.
"""

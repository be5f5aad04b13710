"""Where the stages' work runs: the Dask cluster or, for a small run, the command's own
thread (``client``), and the progress bars of long stages (``progress``)."""

"""Where the stages' work runs: the Dask cluster or, for a small run, the command's own
thread (``client``), the side process a command forks for Great Expectations and figures
(``side_process``), and the progress bars of long stages (``progress``)."""

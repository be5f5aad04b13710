"""Analyse stage: the analysis tables of a run (fits, cells, tests), written from its
scores (``scores``) and world episodes."""

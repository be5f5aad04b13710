"""Problem families, one package each, plus what they share (plan parser, sampling).

Families are found through the ``horizonbench.families`` entry points declared in
pyproject.toml, so adding one touches nothing else in the package.
"""

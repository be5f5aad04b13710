"""Pure statistics over the scores table: no file I/O, no orchestration.

Everything here takes arrays or DataFrames and returns new ones, so the flows decide
where results are written and the tests can exercise the maths on hand-made data.
"""

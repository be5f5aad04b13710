"""Arrow schemas of every table, the config models, and the Great Expectations suites."""

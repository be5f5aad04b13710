"""What a run hands to people: the HTML report (``page``), what the Prefect UI shows
(``artifacts``), rebuilt and compared finished runs (``compare``) and the step tables
exported for training (``export``)."""

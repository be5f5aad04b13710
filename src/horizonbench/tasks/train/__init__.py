"""The train stage: RecurrReason's sequence models, trained on the run's step exports."""

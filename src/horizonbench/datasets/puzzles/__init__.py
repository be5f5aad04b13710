"""The RecurrReason puzzles (Tower of Hanoi, Checkers Jumping, River Crossing, Blocks
World): pure rules in one module each, made families by :mod:`.family`."""

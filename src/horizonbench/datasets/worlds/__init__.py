"""World-model environments with exact per-step gold state (the world-model-collapse
paper's StatefulPuzzle, GraphNav and ToolDAG), on one contract (:mod:`.base`)."""

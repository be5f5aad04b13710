"""RecurrReason's sequence models: (current state, goal) -> next state.

Texts (``texts``), a word-level tokenizer shared by one run's checkpoints
(``tokenizer``), the T5-style and GPT-2-style models (``architectures``), batched greedy
decoding of a checkpoint (``decoding``) and a resumable AdamW trainer with early stopping
(``trainer``). torch and transformers are imported only inside this package's modules
(never here), so the rest of horizonbench imports without them.
"""

"""A word-level tokenizer over the exports' texts.

Why word level: the states are short sequences of pieces, brackets and commas; one token
per piece keeps sequences short for the tiny CPU models, and one vocabulary built from
every puzzle's texts lets the checkpoints of one run (scratch and fine-tuned) share it.
Words are runs of letters and digits; every other visible character is its own token and
whitespace is dropped. The decoder puts the spaces back where the puzzles' formatters put
them (after a comma or colon, between words, none inside brackets), so a decoded state
parses with the puzzle's ``parse_state``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

PAD, EOS, UNK, BOS = "<pad>", "</s>", "<unk>", "<s>"
SPECIALS = (PAD, EOS, UNK, BOS)
WORD_PATTERN = r"[A-Za-z0-9]+|[^\sA-Za-z0-9]"
#: (found, replacement) after the tokens are joined with one space each
_SPACING = (
    (" ,", ","),
    (" ]", "]"),
    ("[ ", "["),
    (" )", ")"),
    ("( ", "("),
    (" :", ":"),
    (" _", "_"),
    ("_ ", "_"),
)


def build_tokenizer(texts: Iterable[str]) -> PreTrainedTokenizerFast:
    """A WordLevel tokenizer whose vocabulary is every token of ``texts`` (sorted, after the
    special tokens, so the same texts give the same ids)."""
    from tokenizers import Regex, Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    pre = pre_tokenizers.Split(Regex(WORD_PATTERN), behavior="isolated")
    words: set[str] = set()
    for text in texts:
        words.update(w for w, _ in pre.pre_tokenize_str(text) if w.strip())
    vocab = {tok: i for i, tok in enumerate(SPECIALS)}
    for w in sorted(words - set(SPECIALS)):
        vocab[w] = len(vocab)
    tok = Tokenizer(WordLevel(vocab=vocab, unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre])
    tok.decoder = decoders.Sequence(
        [decoders.WordPiece(prefix="\x00##", cleanup=False), decoders.Fuse()]
        + [decoders.Replace(a, b) for a, b in _SPACING]
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token=PAD, eos_token=EOS, unk_token=UNK, bos_token=BOS
    )

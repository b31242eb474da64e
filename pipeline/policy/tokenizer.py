"""A character-level tokenizer built with the `tokenizers` library, saved as a normal HF tokenizer.

Every printable ASCII character and newline is one token; anything else maps to `<unk>`; encoding
prepends `<bos>`. The
problem families only produce ASCII (tests/policy check every character they emit round-trips).

Test: `pytest tests/policy/test_tokenizer.py`.
"""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
CHARSET = (*(chr(c) for c in range(32, 127)), "\n")


def build_tokenizer() -> PreTrainedTokenizerFast:
    """The tiny policy's tokenizer: ids 0-3 are <pad>, <bos>, <eos>, <unk>, then one per char."""
    vocab = {token: i for i, token in enumerate(SPECIALS + CHARSET)}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    core.decoder = decoders.Fuse()
    # Encoding adds <bos> in front, as HF tokenizers of real models do; training used the same.
    core.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", special_tokens=[(BOS, vocab[BOS])]
    )
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token=BOS, eos_token=EOS, pad_token=PAD, unk_token=UNK
    )
    tokenizer.padding_side = "left"  # generation pads on the left
    return tokenizer

"""Every token's own bytes, from a Hugging Face tokenizer.

A byte-level BPE token may be half a UTF-8 character: the backend's candidates carry
each token's bytes (`token_pieces`), and their text is derived from them. Owns the
byte table of byte-level vocabularies; tokenizing and detokenizing are the tokenizer's.
"""

from __future__ import annotations


def token_pieces(tokenizer) -> list[bytes]:
    """Every token's own bytes (a byte-level BPE token may be half a UTF-8 character)."""
    hf = getattr(tokenizer, "_tokenizer", tokenizer)
    vocab_size = max(len(hf), max(hf.get_vocab().values()) + 1)
    strings = hf.convert_ids_to_tokens(list(range(vocab_size)))
    decoder = _byte_decoder()
    pieces = []
    for token_id, token in enumerate(strings):
        if token is None:
            pieces.append(b"")
        elif token_id in hf.all_special_ids:
            pieces.append(token.encode("utf-8"))
        elif all(ch in decoder for ch in token):
            pieces.append(bytes(decoder[ch] for ch in token))
        else:
            pieces.append(hf.decode([token_id]).encode("utf-8"))
    return pieces


def _byte_decoder() -> dict[str, int]:
    """GPT-2's printable-unicode-to-byte table used by byte-level BPE vocabularies."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    codes = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            codes.append(256 + extra)
            extra += 1
    return {chr(c): b for b, c in zip(printable, codes, strict=True)}

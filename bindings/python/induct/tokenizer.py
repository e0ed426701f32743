"""Tokenizers: text to token ids and back, with TransformerLens's method names.

* ByteTokenizer: byte-level text, the tokenizer of the byte-level text datasets
  (Dataset.text, Dataset.text_path): byte b is id b, and with bos=True the vocabulary
  has a BOS token, id 256 (TEXT_BOS, d_vocab 257). Runs in the C library
  (induct_text_encode, induct_text_decode).
* SentencePieceTokenizer: a sentencepiece model file (`spm_train`), through Debian's
  python3-sentencepiece. Optional extra ids outside the model's pieces: a newline id
  (for token files encoded line by line, as scripts/phase-change.sh does: sentencepiece
  never sees the line breaks, which become one id between lines) and a BOS id.

Both have the same methods:

* to_tokens(text, prepend_bos=None) -> int32 ids [1, T] (a batch of one, as
  TransformerLens returns); prepend_bos=None means "if the vocabulary has a BOS";
* to_str_tokens(text or ids) -> list of str, one per token (BOS is "<bos>");
* to_string(ids) -> str ([T] ids) or list of str ([B, T] ids); BOS ids produce no
  text, wherever they stand (a document boundary);
* d_vocab, bos_id.

BOS rule (the same as the text datasets'): a BOS token starts a document; it is never
part of the text, so to_string(to_tokens(s)[0]) == s for every str s a tokenizer
can represent (any str for ByteTokenizer).
"""
import array
import base64
import json
import os

from . import _arrays
from ._capi import Bytes, Out, call

#: How to_str_tokens() shows a BOS token.
BOS_STR = "<bos>"


def _ids(tokens):
    """(flat int32 buffer, shape) of ids [T] or [B, T]."""
    buf, shape = _arrays.flat(tokens, "i")
    if len(shape) not in (1, 2):
        raise ValueError(f"token ids must be [T] or [batch, T], got shape {tuple(shape)}")
    return buf, tuple(shape)


def _rows(tokens):
    """A list of rows (lists of int ids) and whether the input was 2-D."""
    buf, shape = _ids(tokens)
    flat = [int(t) for t in buf]  # Python ints: sentencepiece refuses NumPy scalars
    if len(shape) == 1:
        return [flat], False
    T = shape[1]
    return [flat[i * T:(i + 1) * T] for i in range(shape[0])], True


class _Tokenizer:
    """What both tokenizers share: to_tokens/to_str_tokens/to_string over the
    subclass's _encode(str) -> list of ids (no BOS) and _decode(list of ids without
    BOS) -> str and _piece(id) -> str."""

    bos_id = None
    d_vocab = 0

    @property
    def bos_token_id(self):
        """The BOS id or None: bos_id under the name Hugging Face tokenizers give it
        (TransformerLens code reads model.tokenizer.bos_token_id)."""
        return self.bos_id

    def to_tokens(self, text, prepend_bos=None):
        """Token ids of `text` (str; ByteTokenizer also takes bytes) as int32
        [1, T], with the BOS id first if `prepend_bos` (default: when the vocabulary
        has a BOS)."""
        if prepend_bos is None:
            prepend_bos = self.bos_id is not None
        if prepend_bos and self.bos_id is None:
            raise ValueError(f"{type(self).__name__}: this vocabulary has no BOS token")
        ids = self._encode(text, bool(prepend_bos))
        buf = _arrays.buffer(len(ids), "i")
        buf[:] = array.array("i", ids)
        return _arrays.shaped(buf, (1, len(ids)))

    def to_str_tokens(self, tokens, prepend_bos=None):
        """One str per token: of `tokens` (ids [T] or [1, T]) or of to_tokens(tokens,
        prepend_bos) for a str. BOS is shown as "<bos>"; a token that is not valid
        UTF-8 on its own shows its bytes as \\xNN escapes."""
        if isinstance(tokens, (str, bytes)):
            tokens = self.to_tokens(tokens, prepend_bos)
        rows, two_d = _rows(tokens)
        if two_d and len(rows) != 1:
            raise ValueError("to_str_tokens() takes one sequence")
        self._check(rows[0])
        return [BOS_STR if t == self.bos_id else self._piece(t) for t in rows[0]]

    def to_string(self, tokens):
        """The text of token ids: a str for ids [T], a list of str for [B, T]. BOS ids
        produce no text."""
        rows, two_d = _rows(tokens)
        out = []
        for row in rows:
            self._check(row)
            out.append(self._decode([t for t in row if t != self.bos_id]))
        return out if two_d else out[0]

    def _check(self, row):
        for i, t in enumerate(row):
            if not 0 <= t < self.d_vocab:
                raise IndexError(f"token id {t} at index {i} is outside [0, {self.d_vocab})")

    def __repr__(self):
        return f"<induct.{type(self).__name__} d_vocab={self.d_vocab} bos_id={self.bos_id}>"


class ByteTokenizer(_Tokenizer):
    """Byte-level text, as the byte-level text datasets tokenize it: UTF-8 bytes are
    the ids 0..255; with bos=True the vocabulary also has BOS = 256 (d_vocab 257,
    Dataset.text(..., bos=1)), else d_vocab is 256. to_string() decodes the bytes as
    UTF-8 with U+FFFD for invalid sequences (to_bytes() gives them raw)."""

    def __init__(self, bos=False):
        self.bos = bool(bos)
        self.bos_id = 256 if self.bos else None
        self.d_vocab = 257 if self.bos else 256

    def _encode(self, text, prepend_bos):
        data = text.encode("utf-8") if isinstance(text, str) else bytes(text)
        n = len(data) + int(prepend_bos)
        buf = _arrays.buffer(max(n, 1), "i")
        call("induct_text_encode", data, len(data), int(prepend_bos), buf, n, Out("size"))
        return list(buf[:n])

    def to_bytes(self, tokens):
        """The raw bytes of one sequence of ids [T] (BOS ids dropped)."""
        buf, shape = _ids(tokens)
        if len(shape) == 2 and shape[0] != 1:
            raise ValueError("to_bytes() takes one sequence")
        n, out = Out("size"), Bytes(len(buf))
        call("induct_text_decode", buf, len(buf), int(self.bos), out, len(buf), n)
        return out.value(n.value)

    def _decode(self, ids):
        return self.to_bytes(ids).decode("utf-8", "replace")

    def _piece(self, t):
        return bytes([t]).decode("utf-8", "backslashreplace")


class SentencePieceTokenizer(_Tokenizer):
    """A sentencepiece model (`model_file`, e.g. the .model file of `spm_train`) via
    Debian's python3-sentencepiece. `newline_id`: the id that stands for a line break
    (text is encoded line by line, the lines joined by this id, as
    scripts/phase-change.sh makes its token files); None: line breaks go to
    sentencepiece like any other character. `bos_id`: the id of a BOS token, outside
    the model's pieces or the model's own control piece (sp.bos_id(), `<s>`), or None.
    d_vocab is the largest id + 1. `model_proto`: the model's serialized bytes instead of
    a file (serialized_model_proto() gives them; Model.save() stores them this way)."""

    def __init__(self, model_file=None, newline_id=None, bos_id=None, model_proto=None):
        try:
            import sentencepiece
        except ImportError as e:
            raise ImportError("SentencePieceTokenizer needs the sentencepiece module "
                              "(Debian: apt-get install python3-sentencepiece)") from e
        if (model_file is None) == (model_proto is None):
            raise TypeError("give a sentencepiece model as model_file (a path) or as "
                            "model_proto (its serialized bytes), not both")
        if model_proto is not None:
            if not isinstance(model_proto, (bytes, bytearray)):
                raise TypeError(f"model_proto must be bytes, got {type(model_proto).__name__}")
            self.model_file = None
            self.sp = sentencepiece.SentencePieceProcessor()
            try:
                self.sp.LoadFromSerializedProto(bytes(model_proto))
            except Exception as e:  # sentencepiece raises OSError / RuntimeError
                raise ValueError(f"model_proto is not a sentencepiece model: {e}") from None
        else:
            path = os.fspath(model_file)
            if not os.path.isfile(path):
                raise FileNotFoundError(f"no sentencepiece model at {path!r}")
            self.model_file = path
            self.sp = sentencepiece.SentencePieceProcessor(model_file=path)
        self.n_pieces = self.sp.get_piece_size()
        self.newline_id = newline_id
        self.bos_id = bos_id
        extra = [i for i in (newline_id, bos_id) if i is not None]
        for i in extra:
            if not isinstance(i, int) or i < 0:
                raise ValueError(f"newline_id and bos_id must be ids, got {i!r}")
            if i < self.n_pieces and not (i == bos_id and self.sp.is_control(i)):
                raise ValueError(f"id {i} is one of the model's {self.n_pieces} pieces: "
                                 f"newline_id must be beyond them, bos_id beyond them or a "
                                 f"control piece of the model (its <s>)")
        if newline_id is not None and newline_id == bos_id:
            raise ValueError("newline_id and bos_id must differ")
        self.d_vocab = max([self.n_pieces] + [i + 1 for i in extra])

    def _encode(self, text, prepend_bos):
        if not isinstance(text, str):
            raise TypeError(f"SentencePieceTokenizer encodes str, got {type(text).__name__}")
        ids = [self.bos_id] if prepend_bos else []
        if self.newline_id is None:
            return ids + list(self.sp.encode(text))
        for i, line in enumerate(text.split("\n")):
            if i:
                ids.append(self.newline_id)
            ids += self.sp.encode(line)
        return ids

    def _decode(self, ids):
        if self.newline_id is None:
            return self._pieces(ids)
        lines, cur = [], []
        for t in ids:
            if t == self.newline_id:
                lines.append(self._pieces(cur))
                cur = []
            else:
                cur.append(t)
        lines.append(self._pieces(cur))
        return "\n".join(lines)

    def _pieces(self, ids):
        for t in ids:
            if t >= self.n_pieces or t == self.bos_id:
                raise IndexError(f"token id {t} is not a piece of {self._source()}")
        return self.sp.decode(list(ids))

    def _source(self):
        return repr(self.model_file) if self.model_file else "the sentencepiece model"

    def serialized_model_proto(self):
        """The sentencepiece model as bytes (what model_proto= takes back)."""
        return self.sp.serialized_model_proto()

    def _piece(self, t):
        if t == self.newline_id:
            return "\n"
        if t >= self.n_pieces:
            raise IndexError(f"token id {t} is not a piece of {self._source()}")
        if self.sp.is_unknown(t) or self.sp.is_control(t):
            return self.sp.id_to_piece(t)
        if self.sp.is_byte(t):  # byte fallback, <0x0A>
            return self.sp.decode([t])
        # the piece as it stands in the text: decode() alone would drop the leading space
        # of a word's first piece (the model's dummy prefix)
        return self.sp.id_to_piece(t).replace("\u2581", " ")


def tokenizer_to_json(tok):
    """A tokenizer as a JSON string (what Model.save() stores under the checkpoint's
    `tokenizer` metadata key; docs/checkpoint-format.md):
    {"type": "byte", "bos": bool} or {"type": "sentencepiece", "model_proto": base64,
    "newline_id": int|null, "bos_id": int|null}."""
    if isinstance(tok, ByteTokenizer):
        d = {"type": "byte", "bos": tok.bos}
    elif isinstance(tok, SentencePieceTokenizer):
        d = {"type": "sentencepiece",
             "model_proto": base64.b64encode(tok.serialized_model_proto()).decode("ascii"),
             "newline_id": tok.newline_id, "bos_id": tok.bos_id}
    else:
        raise TypeError(f"cannot save a tokenizer of type {type(tok).__name__}: "
                        f"ByteTokenizer or SentencePieceTokenizer")
    return json.dumps(d, separators=(",", ":"))


def tokenizer_from_json(text):
    """The tokenizer of tokenizer_to_json(); ValueError for anything else."""
    try:
        d = json.loads(text)
    except ValueError as e:
        raise ValueError(f"tokenizer metadata is not JSON: {e}") from None
    kind = d.get("type") if isinstance(d, dict) else None
    if kind == "byte" and isinstance(d.get("bos"), bool):
        return ByteTokenizer(bos=d["bos"])
    if kind == "sentencepiece" and isinstance(d.get("model_proto"), str):
        try:
            proto = base64.b64decode(d["model_proto"], validate=True)
        except ValueError as e:
            raise ValueError(f"tokenizer metadata: model_proto is not base64: {e}") from None
        return SentencePieceTokenizer(model_proto=proto, newline_id=d.get("newline_id"),
                                      bos_id=d.get("bos_id"))
    raise ValueError(f"tokenizer metadata of an unknown form: {str(text)[:80]!r}")


__all__ = ["ByteTokenizer", "SentencePieceTokenizer", "BOS_STR"]

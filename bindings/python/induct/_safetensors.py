"""The `__metadata__` of a safetensors checkpoint: read it, and add string keys to a file
the library wrote (docs/checkpoint-format.md, "Layout" and "Metadata").

The library writes its own metadata keys; the Python bindings add `tokenizer` (the
tokenizer attached to a model, see induct.tokenizer.tokenizer_to_json). The file is
rewritten with the same data section and a header that has the extra keys: written to a
temporary file in the destination's directory, flushed, fsynced and renamed over the
destination (as the library's own atomic save), so a reader sees the old file or the
new one, never a half-written one. The library's loader reads and ignores metadata keys
it does not know."""
import json
import os
import shutil
import struct
import tempfile

#: The largest header the library's loader accepts (docs/checkpoint-format.md, rule 2).
MAX_HEADER = 16 * 1024 * 1024


def read_header(path):
    """The header of a safetensors file as a dict (entries in file order).
    ValueError for a file that is not one (the library has validated files it loaded)."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise ValueError(f"{os.fsdecode(path)!r}: truncated safetensors file")
        (n,) = struct.unpack("<Q", raw)
        if not 2 <= n <= MAX_HEADER:
            raise ValueError(f"{os.fsdecode(path)!r}: header length {n} out of range")
        text = f.read(n)
        if len(text) != n:
            raise ValueError(f"{os.fsdecode(path)!r}: header goes beyond the end of the file")
    header = json.loads(text.decode("utf-8"))
    if not isinstance(header, dict):
        raise ValueError(f"{os.fsdecode(path)!r}: header is not a JSON object")
    return header


def read_metadata(path):
    """The `__metadata__` dict of a safetensors file ({} when it has none)."""
    meta = read_header(path).get("__metadata__", {})
    if not isinstance(meta, dict):
        raise ValueError(f"{os.fsdecode(path)!r}: __metadata__ is not an object")
    return meta


def add_metadata(src, dst, extra):
    """Copy the safetensors file `src` to `dst` (atomically) with the string keys of
    `extra` added to its `__metadata__` (replacing keys of the same name). The header
    is padded with spaces so that the data section starts at a multiple of 8, as the
    library writes it. ValueError if the header would exceed the loader's limit."""
    header = read_header(src)
    meta = dict(header.get("__metadata__", {}))
    for k, v in extra.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError("safetensors metadata keys and values are strings")
        meta[k] = v
    out = {"__metadata__": meta}
    out.update((k, v) for k, v in header.items() if k != "__metadata__")
    text = json.dumps(out, separators=(",", ":")).encode("utf-8")
    text += b" " * ((-(8 + len(text))) % 8)
    if len(text) > MAX_HEADER:
        raise ValueError(f"the checkpoint header would be {len(text)} bytes, above the "
                         f"{MAX_HEADER}-byte limit of the library's loader")
    with open(src, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        f.seek(8 + n)
        d = os.path.dirname(os.path.abspath(os.fsdecode(dst)))
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(os.fsdecode(dst)) + ".tmp.", dir=d)
        try:
            with os.fdopen(fd, "wb") as out_f:
                out_f.write(struct.pack("<Q", len(text)))
                out_f.write(text)
                shutil.copyfileobj(f, out_f, 1 << 20)
                out_f.flush()
                os.fsync(out_f.fileno())
            shutil.copymode(src, tmp)  # the library created src 0666 minus the umask
            os.replace(tmp, dst)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    try:  # the rename itself durable (best effort, as the library's save)
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass


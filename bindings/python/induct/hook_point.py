"""HookPoint: what a hook function receives as its second argument.

TransformerLens calls a hook as fn(activation, hook) with its HookPoint module, whose
`name` is the full point name and `layer()` the block index; libinduct's hooks were
called as fn(activation, name) with the name as a str. A HookPoint here is both: a str
(equal to the full name, so `name == "blocks.0.attn.hook_z"`, `name.endswith(...)` and
f-strings keep working) with TransformerLens's `name`, `layer()` and `ctx`. A model keeps
one HookPoint per point, so `ctx` (a dict for a hook's own state) persists between
passes until Model.reset_hooks(clear_contexts=True) or clear_contexts()."""

__all__ = ["HookPoint"]


class HookPoint(str):
    """The hook point a hook function is called at: a str equal to its full name, with
    TransformerLens's `.name`, `.layer()` and `.ctx`."""

    def __new__(cls, name):
        self = super().__new__(cls, name)
        self.ctx = {}
        return self

    @property
    def name(self):
        """The full hook point name (a plain str), e.g. "blocks.1.attn.hook_pattern"."""
        return str.__str__(self)

    def layer(self):
        """The block index of a "blocks.{l}.…" point; ValueError for points outside the
        blocks (hook_embed, hook_pos_embed, ln_final.hook_normalized), as TransformerLens
        cannot give one either."""
        parts = self.name.split(".")
        if len(parts) < 3 or parts[0] != "blocks" or not parts[1].isdigit():
            raise ValueError(f"hook point {self.name!r} is not inside a block: it has no "
                             f"layer")
        return int(parts[1])

    def clear_context(self):
        """Empty ctx."""
        self.ctx = {}

    def __repr__(self):
        return f"HookPoint(name={self.name!r})"

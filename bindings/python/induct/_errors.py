"""C status codes as Python exceptions carrying the library's per-thread message."""


class InductError(Exception):
    """A libinduct call failed. `status` is the negative C status code, `name` its
    symbolic name (e.g. "INDUCT_EINVAL")."""

    status = -1
    name = "INDUCT_ERROR"

    def __init__(self, message, status=None, name=None, function=None):
        super().__init__(message)
        if status is not None:
            self.status = status
        if name is not None:
            self.name = name
        self.function = function


class OutOfMemory(InductError, MemoryError):
    status, name = -2, "INDUCT_ENOMEM"


class InvalidArgument(InductError, ValueError):
    status, name = -3, "INDUCT_EINVAL"


class OutOfRange(InductError, IndexError):
    status, name = -4, "INDUCT_ERANGE"


class ArgumentOutOfRange(OutOfRange, ValueError):
    """An integer argument or config field that its C type cannot hold (ctypes would wrap
    it: -1 would become 4294967295), refused in Python before the call. Both an
    OutOfRange and a ValueError."""


class BufferTooSmall(InductError):
    status, name = -5, "INDUCT_EBUFSIZE"


class IOFailure(InductError, OSError):
    status, name = -6, "INDUCT_EIO"


class FormatError(InductError, ValueError):
    status, name = -7, "INDUCT_EFORMAT"


class ABIMismatch(InductError):
    status, name = -8, "INDUCT_EABI"


class StateError(InductError, RuntimeError):
    status, name = -9, "INDUCT_ESTATE"


class Interrupted(InductError):
    status, name = -10, "INDUCT_EINTERRUPTED"


class NotSupported(InductError, NotImplementedError):
    status, name = -11, "INDUCT_ENOTSUP"


class NumericError(InductError, FloatingPointError):
    status, name = -12, "INDUCT_ENUMERIC"


class LimitExceeded(InductError, MemoryError):
    status, name = -13, "INDUCT_ELIMIT"


def training_interrupted(step, path=None):
    """The KeyboardInterrupt Optimizer.train() raises when Ctrl-C stopped it between two
    steps: a plain KeyboardInterrupt (a subclass would make the interpreter exit with
    status 1 instead of by SIGINT, which shells and `make` read as "interrupted"), with
    `step` (the step counter the model and optimizer are at) and `path` (the file the
    resume point was saved to, or None) as attributes."""
    where = f"; resume point saved to {path}" if path else \
        "; the model and optimizer hold the resume point (no resume_path given)"
    e = KeyboardInterrupt(f"training interrupted at step {step}{where}")
    e.step = step
    e.path = path
    return e


BY_STATUS = {cls.status: cls for cls in (
    OutOfMemory, InvalidArgument, OutOfRange, BufferTooSmall, IOFailure, FormatError,
    ABIMismatch, StateError, Interrupted, NotSupported, NumericError, LimitExceeded)}


def from_status(status, message, name, function):
    cls = BY_STATUS.get(status, InductError)
    if not message:
        message = name
    if not message.startswith(function + ":"):  # many messages name the function already
        message = f"{function}: {message}"
    return cls(message, status=status, name=name, function=function)

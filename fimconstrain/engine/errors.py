"""Exception types raised by fimconstrain; all derive from FimConstrainError."""


class FimConstrainError(Exception):
    """Base class for every error the package raises on purpose."""


class GrammarError(FimConstrainError):
    """A grammar file or terminal pattern that the engine cannot use."""


class InputError(FimConstrainError):
    """Input the engine cannot take: a wrong type, or a character no source file may contain
    (NUL, a lone surrogate); ``offset`` says where in prefix + suffix, when it is a character."""

    def __init__(self, message: str, offset: int | None = None):
        super().__init__(message)
        self.offset = offset


class UncompletableError(FimConstrainError):
    """A prefix (or prefix and suffix) that no middle can turn into a valid program."""

    def __init__(self, message: str, offset: int | None = None):
        super().__init__(message)
        self.offset = offset


class Interrupted(FimConstrainError):
    """The caller's ``should_stop`` ended the work early; what was done is kept in the caches,
    so the same call later resumes where this one stopped."""

"""What every ``fimconstrain`` command ends with: its exit codes, and the error that is a usage
or input problem (one line on standard error, exit code 2; ``fimconstrain.cli`` prints it)."""

#: the command did what it was asked, and the file is valid (``check``, ``complete``)
OK = 0
#: the file is invalid (``check``; ``complete``: the completed file does not parse)
INVALID = 1
#: the command could not do its work (``model get``: a fetch failed)
FAILED = 1
#: a usage or input error: bad options, a file that cannot be read, a model that is not one
USAGE = 2
#: a bug (a traceback is printed: please report it with the input file)
INTERNAL = 3
#: Ctrl-C
INTERRUPTED = 130


class UsageError(Exception):
    """A problem with the command line or the input file (exit code :data:`USAGE`)."""

"""The one base of every error in what the user gave semiactive.

A configuration, a CQL text, source data, certificates: an error in any of
them is a :class:`UserError`, whose message says what and where in one
line. The command line prints it and exits with status 2, never a
traceback; anything else escaping is a bug.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input, located: the message is meant for whoever gave it."""

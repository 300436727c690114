# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: gpucmp contributors
"""NAME=REGEX options (search-providers.py's --provider, kernel-breakdown.py's --group): each
parsed into (name, compiled pattern), a malformed one refused with the tool's and flag's name."""
import re
import sys


def parse_named_patterns(specs, tool, flag):
    """[(name, re.Pattern)] of `specs` ("NAME=REGEX" each); exits naming `tool` and `flag` on a bad one."""
    patterns = []
    for spec in specs:
        name, sep, pattern = spec.partition("=")
        if not sep or not name or not pattern:
            sys.exit(f"{tool}: {flag} takes NAME=REGEX, got '{spec}'")
        try:
            patterns.append((name, re.compile(pattern)))
        except re.error as e:
            sys.exit(f"{tool}: {flag} {name}: bad REGEX '{pattern}': {e}")
    return patterns

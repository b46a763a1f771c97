# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""What must happen when a module's run ends (its progress thread stopped, its process taken off
the pass lock): at the exit of its own process when it runs the usual way, and when its action
plugin ends it in the task's worker, which leaves without running exit handlers
(``plugins/plugin_utils/controller_module.py`` calls :func:`end_module`)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import atexit

_handlers = []


def at_module_end(function):
    """Run ``function`` (once, last registered first) when the module's run ends."""
    if not _handlers:
        atexit.register(end_module)
    _handlers.append(function)
    return function


def end_module():
    """Run the handlers registered so far; one that fails does not keep the others from running."""
    while _handlers:
        function = _handlers.pop()
        try:
            function()
        except Exception:  # pylint: disable=broad-except
            pass

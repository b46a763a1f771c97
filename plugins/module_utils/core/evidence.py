# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""No decision on an unproven read: the proof the passes act on, as types.

Every read of Waldur, DigitalOcean and ARM goes through its API's one read layer
(``waldur/client.py``, ``digitalocean/reads.py``, ``azure/clients.py``). A read layer either
returns a checked answer or raises :class:`Unproven`:

* :class:`ProvenObject` (a dict) and :class:`ProvenList` (a list): JSON where JSON is due, of the
  shape the agent relies on (the fields it reads present, of their types), a listing with every
  page and as many items as the API says it holds;
* :class:`ProvenAbsence` (falsy): a direct read of the object answered the API's own not-found
  (Waldur's JSON ``detail``, DigitalOcean's ``not_found`` id, ARM's ``*NotFound`` error code),
  never an HTML page, an empty body or an empty list.

Decisions that create, delete, resize or power a machine, set an order done or erred, or send
usage take their evidence through :func:`require` (or are :func:`decides` functions): a value that
is not proof raises :class:`Unproven` before anything is written, so the item is left as it is,
with one line naming what could not be proven, and the pass exits non-zero. The layer test
``tests/unit/test_evidence.py`` finds every write of the collection and checks that it sits in such
a decision.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import functools

# The outcome of an item left as it is because a read could not be proven (a failed one: the pass
# exits non-zero; never erred, never done).
UNPROVEN = "unproven"


class Unproven(Exception):
    """A read whose answer is not proof: not the JSON the call expects, the wrong shape, a page
    missing, counts that do not add up, a not-found that is not the API's own, or reads of one
    pass that disagree. ``call`` names the call (``GET /v2/droplets``), the message what came back.
    It is not transient (the same answer would come again) and it never errs an order: the item is
    left as it is for the next pass."""

    def __init__(self, message, call=None):
        self.message = str(message)
        self.call = call
        super(Unproven, self).__init__(self.message)

    def __str__(self):
        return "unproven: %s" % self.message


class Proven(object):
    """What the read layers return: a checked answer (``source``: the call that gave it)."""

    source = None


class ProvenObject(dict, Proven):
    """One object a read layer checked (JSON object, the fields the agent reads of their types)."""

    def __init__(self, value=(), source=None):
        super(ProvenObject, self).__init__(value)
        self.source = source


class ProvenList(list, Proven):
    """A whole listing a read layer checked: every page, every item of the shape the agent reads,
    as many items as the API states. ``source`` names the listing."""

    def __init__(self, items=(), source=None):
        super(ProvenList, self).__init__(items)
        self.source = source


class ProvenAbsence(Proven):
    """A direct read of one object answered the API's own not-found: the object does not exist.
    Falsy, so ``if facts:`` reads as before; ``is_absent`` says so by type."""

    def __init__(self, source, detail=""):
        self.source = source
        self.detail = detail

    def __bool__(self):
        return False

    __nonzero__ = __bool__

    def __repr__(self):
        return "ProvenAbsence(%r)" % (self.source,)

    def __str__(self):
        return "%s answered not found%s" % (self.source, " (%s)" % self.detail if self.detail else "")


def is_absent(value):
    """True when ``value`` is proven absence (never for None or an empty list)."""
    return isinstance(value, ProvenAbsence)


def is_proven(value):
    return isinstance(value, Proven)


def require(value, what):
    """``value`` when it is proof (``Proven``), else :class:`Unproven` naming ``what``: the guard a
    decision puts before it writes on what a read said."""
    if isinstance(value, Proven):
        return value
    raise Unproven("%s was not proven by a checked read (got %s); nothing was written on it"
                   % (what, "nothing" if value is None else type(value).__name__))


# Every decision function of the collection, by name (``decides``): the evidence test reads it.
DECISIONS = {}


def decides(action, *evidence):
    """Mark a decision function (``action``: create, delete, resize, power, settle, usage) whose
    arguments named in ``evidence`` must be proof: each is checked with :func:`require` before the
    function runs."""

    def wrap(function):
        code = function.__code__
        names = code.co_varnames[:code.co_argcount]
        positions = dict((name, names.index(name)) for name in evidence)

        @functools.wraps(function)
        def checked(*args, **kwargs):
            for name, position in positions.items():
                value = kwargs[name] if name in kwargs else (args[position] if position < len(args) else None)
                require(value, name.replace("_", " "))
            return function(*args, **kwargs)

        DECISIONS["%s.%s" % (function.__module__.rsplit(".", 1)[-1], function.__qualname__)] = action
        checked.decides = action
        return checked

    return wrap


# ---- shapes: the fields the agent reads of an answer, with their JSON types -----------------
STRING, INTEGER, NUMBER, BOOLEAN, OBJECT, LIST, NULL = "string", "integer", "number", "boolean", "object", "list", "null"
_JSON_TYPES = {
    STRING: lambda value: isinstance(value, str),
    INTEGER: lambda value: isinstance(value, int) and not isinstance(value, bool),
    NUMBER: lambda value: isinstance(value, (int, float)) and not isinstance(value, bool),
    BOOLEAN: lambda value: isinstance(value, bool),
    OBJECT: lambda value: isinstance(value, dict),
    LIST: lambda value: isinstance(value, list),
    NULL: lambda value: value is None,
}


def json_type(value):
    """The JSON name of ``value``'s type, as a shape problem words it."""
    for name in (NULL, BOOLEAN, INTEGER, NUMBER, STRING, OBJECT, LIST):
        if _JSON_TYPES[name](value):
            return name
    return type(value).__name__


class Shape(object):
    """What the agent relies on in one kind of object: ``required`` fields (present, of one of
    their types) and ``optional`` ones (of one of their types when present), each ``field: types``
    with the types as JSON names (``"string"``, ``("string", "null")``). An answer of another shape
    is not proof (the read layers raise :class:`Unproven` with :meth:`problem`'s words)."""

    def __init__(self, name, required=None, optional=None):
        self.name = name
        self.required = dict((field, _types(types)) for field, types in (required or {}).items())
        self.optional = dict((field, _types(types)) for field, types in (optional or {}).items())

    def problem(self, value, asked=None):
        """Why ``value`` is not of this shape, or None. ``asked``: the fields the call asked for
        (Waldur's ``field=``), when it asked for some: only those are required."""
        if not isinstance(value, dict):
            return "%s is %s, not an object" % (self.name, json_type(value))
        for field, types in self.required.items():
            if asked is not None and field not in asked:
                continue
            if field not in value:
                return "%s has no %s" % (self.name, field)
            if not any(_JSON_TYPES[kind](value[field]) for kind in types):
                return "%s's %s is %s, not %s" % (self.name, field, json_type(value[field]), " or ".join(types))
        for field, types in self.optional.items():
            if field in value and not any(_JSON_TYPES[kind](value[field]) for kind in types):
                return "%s's %s is %s, not %s" % (self.name, field, json_type(value[field]), " or ".join(types))
        return None

    def first_problem(self, values, asked=None):
        """The first problem of any of ``values`` (with its position), or None."""
        for index, value in enumerate(values):
            problem = self.problem(value, asked)
            if problem:
                return "item %d: %s" % (index, problem) if len(values) > 1 else problem
        return None


def _types(types):
    types = (types,) if isinstance(types, str) else tuple(types)
    unknown = [kind for kind in types if kind not in _JSON_TYPES]
    if unknown:
        raise ValueError("unknown JSON type(s) %s" % ", ".join(unknown))
    return types

# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Bounds checked before a site agent configuration file is loaded, and the words for a file
that cannot be loaded.

``yaml_bound_problem(text)`` refuses a file whose YAML aliases would expand it
beyond a bound before anything walks the data (a few hundred bytes of nested
aliases expand to billions of values). ``yaml_error_text(path, exc)`` says where and why
a file is not valid YAML, without quoting it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

from ansible_collections.waldur.site_agent.plugins.module_utils.core.secrets import error_message_without_source

# Files larger than this are not read: a site agent configuration is a few KiB.
MAX_CONFIG_BYTES = 1024 * 1024
# Values (mappings, lists, scalars) a configuration may hold once its YAML aliases are expanded.
MAX_YAML_NODES = 100000


def config_file_problem(path, loader):
    """Why the file at ``path`` must not be loaded (too large, or YAML aliases that expand
    without bound), checked before ``loader`` (Ansible's DataLoader, which decrypts a vault)
    builds anything; None when it may be loaded."""
    size = os.path.getsize(path)
    if size > MAX_CONFIG_BYTES:
        return "it is %d bytes, more than the %d a site agent configuration may have" % (size, MAX_CONFIG_BYTES)
    try:
        if hasattr(loader, "get_text_file_contents"):
            text = loader.get_text_file_contents(path)
        else:  # ansible-core < 2.19: the file, decrypted when it is a vault
            real = loader.get_real_file(path)
            try:
                with open(real, "rb") as stream:
                    text = stream.read().decode("utf-8", "replace")
            finally:
                loader.cleanup_tmp_file(real)
    except UnicodeDecodeError:
        return "it is not UTF-8 text"
    except Exception:  # pylint: disable=broad-except
        return None  # unreadable, or a vault without its password: the loader says so next
    return yaml_bound_problem(text)


def yaml_bound_problem(text, max_nodes=MAX_YAML_NODES):
    """A message when the YAML ``text`` would hold more than ``max_nodes`` values once
    its aliases are expanded (an alias bomb), else None. Composes the node graph
    (aliases stay shared, nothing is expanded) and counts the expanded size with one
    memo per node; syntax errors are left to the loader that reads the file next."""
    import yaml

    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        loader = loader_class(str(text))  # plain str: the C parser takes no tagged subclass
        try:
            root = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.YAMLError:
        return None
    except RecursionError:
        return "the YAML is nested too deeply to be a site agent configuration"
    if root is None:
        return None
    sizes, visiting = {}, set()
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        if not children_done and key in visiting:
            return "a YAML alias refers to a value that contains it (a recursive alias)"
        if isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            sizes[key] = 1
            continue
        if children_done:
            visiting.discard(key)
            sizes[key] = 1 + sum(sizes.get(id(child), 0) for child in children)
            if sizes[key] > max_nodes:
                return ("its YAML aliases expand to more than %d values (an alias bomb?); write the values out "
                        "instead of repeating aliases" % max_nodes)
            continue
        visiting.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return None


# The most of PyYAML's problem text kept (its problems are short; a line is the bound of a message).
_PROBLEM_MAX = 300


def _marked_yaml_error(exc):
    """The PyYAML error (one with ``problem_mark``) behind ``exc``: ``exc`` itself, the
    ``orig_exc`` of an AnsibleError (ansible-core 2.18 and older) or its cause (2.19+)."""
    seen = []
    queue = [exc]
    while queue and len(seen) < 8:
        error = queue.pop(0)
        if error is None or any(error is other for other in seen):
            continue
        seen.append(error)
        if getattr(error, "problem_mark", None) is not None or getattr(error, "context_mark", None) is not None:
            return error
        queue.extend((getattr(error, "orig_exc", None), getattr(error, "__cause__", None),
                      getattr(error, "__context__", None)))
    return None


def _one_line(text):
    text = re.sub(r"\s+", " ", str(text or "")).strip()
    return text if len(text) <= _PROBLEM_MAX else text[:_PROBLEM_MAX] + "..."


def _position(mark):
    # PyYAML counts lines and columns from 0, an editor from 1.
    return "line %d, column %d" % (mark.line + 1, mark.column + 1)


def yaml_error_text(path, exc):
    """One line saying why the configuration file at ``path`` could not be read, with the line
    and column when the error has them: ``<path> could not be read (line 12, column 5): it is not
    valid YAML: mapping values are not allowed here``. ``exc``: PyYAML's error, or the AnsibleError
    of Ansible's loader (which wraps PyYAML's). Only the position and PyYAML's problem are given,
    never PyYAML's snippet of the source nor Ansible's excerpt: the line may hold a token."""
    marked = _marked_yaml_error(exc)
    if marked is not None:
        mark = marked.problem_mark or marked.context_mark
        problem = _one_line(marked.problem or marked.context or "invalid YAML")
        context_mark = marked.context_mark
        if marked.problem and marked.context and context_mark is not None and \
                (context_mark.line, context_mark.column) != (mark.line, mark.column):
            problem += " (%s that starts at %s)" % (_one_line(marked.context), _position(context_mark))
        return "%s could not be read (%s): it is not valid YAML: %s" % (path, _position(mark), problem)
    is_yaml = any(klass.__module__.split(".")[0] == "yaml" for klass in type(exc).__mro__)
    # ansible-core 2.19+ gives the position as the error's origin (1-based already).
    origin = getattr(exc, "obj", None)
    position = ""
    if isinstance(getattr(origin, "line_num", None), int):
        position = " (line %d, column %d)" % (origin.line_num, getattr(origin, "col_num", None) or 1)
    if is_yaml:
        # A PyYAML error without a mark (an unreadable character): its own words, first line only.
        first_line = (str(exc).splitlines() or [type(exc).__name__])[0]
        return "%s could not be read%s: it is not valid YAML: %s" % (path, position, _one_line(first_line))
    # Without its closing full stop: callers go on after it ("; nothing was done").
    return "%s could not be read%s: %s" % (path, position, _one_line(error_message_without_source(exc)).rstrip("."))

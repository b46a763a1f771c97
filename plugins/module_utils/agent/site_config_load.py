# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)
"""Bounds checked before a site agent configuration file is loaded.

``yaml_bound_problem(text)`` refuses a file whose YAML aliases would expand it
beyond a bound before anything walks the data (a few hundred bytes of nested
aliases expand to billions of values).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

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
        else:  # ansible-core < 2.19
            text = loader._get_file_contents(path)[0].decode("utf-8", "replace")  # pylint: disable=protected-access
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

"""Benchmarks of the collection's passes, side by side with the upstream Python agent.

``make bench`` (``python -m bench``) runs them; ``docs/performance.md`` explains the method
and shows the figures of the last full run. Not part of ``make test``; a tiny smoke run of
the harness is (``tests/unit/test_bench_smoke.py``).
"""

import sys

from tests.helpers import collection_path

# The event benches reuse the integration tests' helpers, which import the collection's
# module_utils as ``ansible_collections.waldur.site_agent``: the path tests/conftest.py adds.
sys.path.insert(0, str(collection_path()))

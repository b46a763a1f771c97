"""Benchmarks of the collection's passes, side by side with the upstream Python agent.

``make bench`` (``python -m bench``) runs them; ``docs/performance.md`` explains the method
and shows the figures of the last full run. Not part of ``make test``; a tiny smoke run of
the harness is (``tests/unit/test_bench_smoke.py``).
"""

from tests.helpers import import_collection_from_checkout

# The event benches reuse the integration tests' helpers, which import the collection's
# module_utils; outside pytest nothing else puts the checkout on the path.
import_collection_from_checkout()

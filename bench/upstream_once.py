"""Run the upstream ``waldur_site_agent`` for exactly one polling cycle, then exit.

Run with the upstream venv's Python, with the agent's own arguments::

    .cache/bench-upstream-venv/bin/python -P bench/upstream_once.py -m order_process -c config.yaml

The agent's polling modes loop forever: run a cycle, sleep 60 s, run again when the
period has passed. This wrapper goes through the agent's real entry point
(``waldur_site_agent.main.main``: argument parsing, configuration, logging set-up,
version logging, mode dispatch), with only the mode's ``start(configuration)`` replaced
by one iteration of that same loop: ``setup_log_shippers``, the module's own
``_process_offerings(configuration)``, ``teardown_log_shippers``. Process start-up,
imports and every call of the cycle are therefore the agent's own; only the sleep and
the next cycle are cut off. It imports nothing from this repository.
"""

import sys

from waldur_site_agent import main as agent_main
from waldur_site_agent.common import utils
from waldur_site_agent.polling_processing import agent_membership_sync, agent_order_process, agent_report


def _one_cycle(mode_module):
    def start(configuration):
        utils.setup_log_shippers(configuration)
        try:
            mode_module._process_offerings(configuration)
        finally:
            utils.teardown_log_shippers()
    return start


for _module in (agent_order_process, agent_report, agent_membership_sync):
    _module.start = _one_cycle(_module)

if __name__ == "__main__":
    sys.exit(agent_main.main())

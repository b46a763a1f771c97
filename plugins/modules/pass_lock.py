#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: Waldur site agent developers
# MIT License (see LICENSE)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: pass_lock
short_description: Hold a lock for one site agent pass of an offering, released on any exit
version_added: 1.0.0
description:
  - Keeps two passes from working on the same offering at once (two timers, a manual run beside
    a timer, the event rulebook's run beside its sweep). The C(waldur.site_agent.agent_pass) role
    takes it before each offering and releases it when the offering is done, failed or not.
  - The lock is the file C(<directory>/<key>.lock), naming its holder - the ansible-playbook
    process running the pass (its PID and its start time, so that a reused PID is not taken for
    the holder), the host, O(label) and a random token. It is written atomically under a short
    C(flock) of C(<directory>/<key>.guard).
  - The modules of the pass that write register their own processes with the lock (C(workers)) from
    their first write until they exit, and write nothing once the controller has ended. The role
    C(waldur.site_agent.agent_pass) tells them the lock through the environment variables
    E(WALDUR_SITE_AGENT_PASS_LOCK) (RV(path)) and E(WALDUR_SITE_AGENT_PASS_TOKEN) (RV(token)).
  - A lock whose holder process has ended (a pass killed or crashed before it released the lock) is
    stale and is taken over once every module registered with it has ended too (killing only the
    controller leaves the module it waited for running, so the next pass waits for that module); the
    result says whose it was and a warning is printed. A lock written on another host is respected
    (its process cannot be checked); delete the file if that host is gone.
  - Runs on the controller as an action plugin.
author:
  - Waldur site agent developers (@waldur)
extends_documentation_fragment:
  - waldur.site_agent.attributes
attributes:
  check_mode:
    support: full
    details:
      - It works the same in check mode, so a check pass holds the lock too and never overlaps a real one.
  diff_mode:
    support: none
options:
  state:
    description:
      - V(held) takes the lock, waiting up to O(wait) seconds while another pass holds it; the
        result says whether it was taken (RV(acquired)). A busy lock is not a failure.
      - V(released) removes the lock if O(token) is still its holder's.
      - V(skipped) reports the offerings O(skipped) names (the ones whose lock was busy, or that left
        orders for the next run after transient failures) and ends the host as unreachable, so that
        ansible-playbook exits with status 4; nothing is done when the list is empty.
    type: str
    choices: [held, released, skipped]
    default: held
  key:
    description:
      - What the lock protects, used as the file name, for example C(<offering uuid>.machines).
        Letters, digits, C(.), C(_) and C(-).
      - Required with O(state=held) and O(state=released).
    type: str
  directory:
    description:
      - Where the lock files are. Created (mode C(0700)) when missing.
      - Defaults to E(WALDUR_SITE_AGENT_LOCK_DIR), else C(~/.cache/waldur-site-agent/locks).
    type: path
  wait:
    description:
      - With O(state=held), seconds to wait for a busy lock before giving up (polled every second).
    type: float
    default: 0
  label:
    description:
      - Who holds the lock, for the messages of the passes that find it busy.
    type: str
    default: pass
  token:
    description:
      - With O(state=released), the RV(token) the O(state=held) task returned.
    type: str
  skipped:
    description:
      - With O(state=skipped), one line per offering that was not processed.
    type: list
    elements: str
notes:
  - Several machines are not protected by a lock file on one of them. See the scaling guide
    (C(docs/scaling.md)) - AWX job templates without concurrent jobs, one node per offering.
"""

EXAMPLES = r"""
- name: Take the offering's lock (waiting up to two minutes)
  waldur.site_agent.pass_lock:
    key: d0000000000000000000000000000001.machines
    wait: 120
    label: order_process pass of offering DigitalOcean VM
  register: lock

- name: Work on the offering
  when: lock.acquired
  block:
    - name: Process the orders
      ansible.builtin.include_role:
        name: waldur.site_agent.order_process
  always:
    - name: Release the lock
      waldur.site_agent.pass_lock:
        state: released
        key: d0000000000000000000000000000001.machines
        token: "{{ lock.token }}"
      when: lock.acquired
"""

RETURN = r"""
acquired:
  description: Whether the lock was taken (O(state=held)).
  returned: when O(state=held)
  type: bool
token:
  description: The holder's token, needed to release the lock.
  returned: when the lock was taken
  type: str
holder:
  description: The holder after this task (this pass when taken, the other pass when busy) - C(pid), C(host), C(label), C(since).
  returned: when O(state=held)
  type: dict
  sample: {pid: 41233, host: agent-1, label: order_process pass of offering DigitalOcean VM, since: "2026-11-29T12:00:05Z"}
took_over:
  description: The stale holder whose lock was taken over (C(pid), C(host), C(label), C(since)).
  returned: when a stale lock was taken over
  type: dict
waited:
  description: Seconds spent waiting for a busy lock.
  returned: when O(state=held)
  type: float
released:
  description: Whether the lock file was removed (O(state=released)).
  returned: when O(state=released)
  type: bool
path:
  description: The lock file.
  returned: when O(state=held) or O(state=released)
  type: str
skipped_offerings:
  description: The lines of O(skipped) (O(state=skipped)).
  returned: when O(state=skipped) and some offering was skipped
  type: list
  elements: str
msg:
  description: What happened.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", default="held", choices=["held", "released", "skipped"]),
            key=dict(type="str", no_log=False),
            directory=dict(type="path"),
            wait=dict(type="float", default=0),
            label=dict(type="str", default="pass"),
            token=dict(type="str", no_log=False),
            skipped=dict(type="list", elements="str"),
        ),
        supports_check_mode=True,
    )
    # The work happens in the action plugin of the same name on the controller.
    module.fail_json(msg="waldur.site_agent.pass_lock runs as an action plugin; it cannot run as a plain module")


if __name__ == "__main__":
    main()

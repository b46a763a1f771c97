"""The fault matrix: every read the passes make, answered wrong on purpose, and the invariants
that must hold whatever a read answered (issue 37, "no decision on an unproven read").

* ``worlds.py`` seeds one world per pass and backend (the orders of every type, resources with
  usage, machines to power, drift and orphans for the audit, a foreign machine beside them) and
  says what a clean run ends with;
* ``matrix.py`` runs a pass on its world, enumerates its reads from the simulators' call logs (the
  inventory ``reads.json``), builds the cases (every read x every fault kind x the first call and a
  later one), and checks the invariants after each run;
* ``tests/integration/test_fault_matrix.py`` runs a sample of the cases in ``make test`` (its seed
  printed in the header) and all of them with ``FAULT_MATRIX=all`` (``make faults``), and fails when
  a pass makes a read the inventory does not hold.
"""

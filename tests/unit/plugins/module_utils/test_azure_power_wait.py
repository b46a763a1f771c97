"""PowerWaiter: the power changes of a batch share one read per round, and a machine that has not
moved is told failed or not yet started by its operation's status."""

import threading

import pytest

from ansible_collections.waldur.site_agent.plugins.module_utils.azure.power_wait import PowerChangeFailed, PowerWaiter

SUB = "/subscriptions/sub-1/resourceGroups/g/providers/Microsoft.Compute/virtualMachines/"


class ScriptedArm:
    """Power states by round (a list of {name: state} per listing), operation statuses by URL."""

    subscription_id = "sub-1"

    def __init__(self, rounds, operations=None):
        self.rounds = list(rounds)
        self.operations = dict(operations or {})
        self.listings, self.views, self.asked = 0, [], []
        self.lock = threading.Lock()

    def call(self, what, function, *args, **kwargs):
        kwargs.pop("deadline", None)
        return function(*args, **kwargs)

    read = call

    def _powers(self):
        with self.lock:
            return self.rounds.pop(0) if len(self.rounds) > 1 else self.rounds[0]

    def json_pages(self, kind, path, params=None):
        assert params == {"statusOnly": "true"}
        self.listings += 1
        yield [{"id": SUB + name, "properties": {"instanceView": {"statuses": [{"code": "PowerState/" + state}]}}}
               for name, state in sorted(self._powers().items())]

    def json_get(self, kind, resource_id, suffix=""):
        name = resource_id.rsplit("/", 1)[-1]
        self.views.append(name)
        return {"statuses": [{"code": "PowerState/" + self._powers()[name]}]}

    def json_at(self, url):
        self.asked.append(url)
        return self.operations[url]


def wait_all(waiter, names, previous="running", wanted="deallocated"):
    outcomes = {}

    def one(name):
        try:
            outcomes[name] = waiter.wait(SUB + name, (SUB + name).lower(), (wanted,), previous, "op/" + name)
        except PowerChangeFailed as error:
            outcomes[name] = error

    threads = [threading.Thread(target=one, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    return outcomes


def test_many_changes_are_waited_for_with_one_listing_per_round():
    arm = ScriptedArm([{"a": "deallocating", "b": "deallocating", "c": "deallocating"},
                       {"a": "deallocated", "b": "deallocating", "c": "deallocated"},
                       {"a": "deallocated", "b": "deallocated", "c": "deallocated"}])
    waiter = PowerWaiter(arm, min_interval=0.01, max_interval=0.02)
    assert wait_all(waiter, ["a", "b", "c"]) == {"a": "deallocated", "b": "deallocated", "c": "deallocated"}
    # a read per round for all of them (a listing; the last one left alone, its instance view), where a
    # wait per machine would read each machine each round
    assert arm.listings + len(arm.views) == 3 and set(arm.views) <= {"b"} and arm.asked == []


def test_one_machine_is_read_by_its_instance_view():
    arm = ScriptedArm([{"a": "starting"}, {"a": "running"}])
    waiter = PowerWaiter(arm, min_interval=0.01, max_interval=0.02)
    assert wait_all(waiter, ["a"], previous="deallocated", wanted="running") == {"a": "running"}
    assert arm.listings == 0 and arm.views == ["a", "a"]


def test_a_change_not_yet_started_is_waited_for_and_a_failed_one_named():
    arm = ScriptedArm([{"late": "running", "bad": "deallocating"},
                       {"late": "running", "bad": "running"},
                       {"late": "deallocated", "bad": "running"}],
                      operations={"op/late": {"status": "InProgress"},
                                  "op/bad": {"status": "Failed", "error": {"code": "AllocationFailed",
                                                                           "message": "the host refused"}}})
    waiter = PowerWaiter(arm, min_interval=0.01, max_interval=0.02)
    outcomes = wait_all(waiter, ["late", "bad"])
    assert outcomes["late"] == "deallocated"
    assert isinstance(outcomes["bad"], PowerChangeFailed) and "the host refused" in str(outcomes["bad"])
    # only the machines that had not moved (or went back) had their operations asked about
    assert set(arm.asked) == {"op/late", "op/bad"}


def test_the_deadline_ends_the_wait_with_the_last_state_seen():
    import time
    arm = ScriptedArm([{"a": "deallocating", "b": "deallocating"}])
    waiter = PowerWaiter(arm, deadline=time.monotonic() + 0.2, min_interval=0.01, max_interval=0.02)
    assert wait_all(waiter, ["a", "b"]) == {"a": "deallocating", "b": "deallocating"}


@pytest.mark.parametrize("status", ["Failed", "Canceled"])
def test_an_operation_that_ended_without_success_fails_the_change(status):
    arm = ScriptedArm([{"a": "running", "b": "running"}], operations={"op/a": {"status": status}, "op/b": {"status": status}})
    waiter = PowerWaiter(arm, min_interval=0.01, max_interval=0.02)
    outcomes = wait_all(waiter, ["a", "b"])
    assert all(isinstance(outcome, PowerChangeFailed) for outcome in outcomes.values())

"""The Azure simulator's vCPU quotas, driven by the real SDKs: Usage - List answers them with their use,
and a VM PUT past one is refused as ARM refuses it (409 OperationNotAllowed)."""

from __future__ import annotations

import pytest
from azure.core.exceptions import HttpResponseError

from tests.simulators.azure import presets
from tests.simulators.azure.simulator import AzureSimulator, parse_vcpu_quotas
from tests.unit.simulators import test_azure_sim
from tests.unit.simulators.test_azure_sim import build_chain, vm_model

azure = test_azure_sim.azure  # the fixture of the SDK-driven simulator tests


def usages(az, location="westeurope") -> dict:
    return {usage.name.value: (usage.current_value, usage.limit) for usage in az.compute.usage.list(location)}


def test_usage_list_answers_each_quota_with_what_the_location_uses(azure):
    azure.app.vcpu_quotas = parse_vcpu_quotas({"cores": 10, "standardBSFamily": 4, "northeurope/cores": 20})
    azure.app.seed_vm("seeded", size="Standard_B2s", power_state="deallocated")  # deallocated still counts
    build_chain(azure, vm_kwargs={"size": "Standard_D2s_v3"})

    west = usages(azure)
    assert west["cores"] == (4, 10) and west["standardBSFamily"] == (2, 4) and west["standardDSv3Family"] == (2, 100000)
    assert west["virtualMachines"] == (2, 25000)
    assert set(presets.families()) <= set(west)
    assert usages(azure, "northeurope")["cores"] == (0, 20)
    names = {usage.name.value: usage.name.localized_value for usage in azure.compute.usage.list("westeurope")}
    assert names["cores"] == "Total Regional vCPUs" and names["standardBSFamily"] == "Standard BS Family vCPUs"
    assert [call["operation"] for call in azure.app.calls if call["operation"] == "usages.list"] == ["usages.list"] * 3


def test_a_machine_past_its_family_quota_is_refused_as_arm_refuses_it(azure):
    azure.app.vcpu_quotas = parse_vcpu_quotas("standardBSFamily=3")
    made = build_chain(azure, rg="group-1", name="one", vm_kwargs={"size": "Standard_B2s"})

    with pytest.raises(HttpResponseError) as raised:
        build_chain(azure, rg="group-2", name="two", vm_kwargs={"size": "Standard_B2s"})

    assert raised.value.status_code == 409 and raised.value.error.code == "OperationNotAllowed"
    assert raised.value.error.message.startswith(
        "Operation could not be completed as it results in exceeding approved standardBSFamily Cores quota. "
        "Additional details - Deployment Model: Resource Manager, Location: westeurope, Current Limit: 3, "
        "Current Usage: 2, Additional Required: 2, (Minimum) New Limit Required: 4.")
    assert not [arm_id for arm_id in azure.app.resources() if arm_id.lower().endswith("/virtualmachines/two")]
    # another family still fits, and a PUT of the machine that exists needs nothing more
    build_chain(azure, rg="group-3", name="three", vm_kwargs={"size": "Standard_D2s_v3"})
    azure.compute.virtual_machines.begin_create_or_update(
        "group-1", "one", vm_model(made["nics.put"].id, name="one", size="Standard_B2s")).result()


def test_a_machine_past_the_regional_total_is_refused_naming_it(azure):
    azure.app.vcpu_quotas = {"westeurope/cores": 1}
    with pytest.raises(HttpResponseError, match="exceeding approved Total Regional Cores quota.*Current Limit: 1, "
                                                "Current Usage: 0, Additional Required: 2"):
        build_chain(azure, vm_kwargs={"size": "Standard_D2s_v3"})


def test_the_quota_option_takes_text_and_is_restored_by_a_reset():
    app = AzureSimulator(vcpu_quotas="cores=10, westeurope/standardBSFamily=4")
    assert app.vcpu_limit("westeurope", "standardbsfamily") == 4 and app.vcpu_limit("eastus", "standardBSFamily") == 100000
    assert app.vcpu_limit("West Europe", "cores") == 10 and app.current_options()["vcpu_quotas"]["cores"] == 10
    app.vcpu_quotas = {}
    app.reset("default")
    assert app.vcpu_limit("westeurope", "cores") == 10
    with pytest.raises(ValueError):
        parse_vcpu_quotas("cores")

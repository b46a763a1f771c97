"""The Waldur simulator driven by Waldur's own generated client (``waldur_api_client``).

The client is what the upstream site agent uses: it parses every 2xx body into its attrs
models (strict enums, UUIDs, datetimes, required keys). A shape the client cannot parse
raises out of ``sync_detailed``/``sync`` and fails the test.
"""

from __future__ import annotations

import datetime
from uuid import UUID

import pytest
from waldur_api_client.api.marketplace_component_usages import (
    marketplace_component_usages_list, marketplace_component_usages_set_usage)
from waldur_api_client.api.marketplace_orders import (
    marketplace_orders_approve_by_provider, marketplace_orders_create, marketplace_orders_list,
    marketplace_orders_retrieve, marketplace_orders_set_state_done, marketplace_orders_set_state_erred)
from waldur_api_client.api.marketplace_plans import marketplace_plans_retrieve
from waldur_api_client.api.marketplace_provider_offerings import marketplace_provider_offerings_retrieve
from waldur_api_client.api.marketplace_provider_resources import (
    marketplace_provider_resources_list, marketplace_provider_resources_retrieve,
    marketplace_provider_resources_set_backend_id, marketplace_provider_resources_set_backend_metadata,
    marketplace_provider_resources_set_limits, marketplace_provider_resources_team_list)
from waldur_api_client.api.marketplace_resources import (
    marketplace_resources_retrieve, marketplace_resources_terminate, marketplace_resources_update_limits)
from waldur_api_client.api.marketplace_service_providers import (
    marketplace_service_providers_keys_list, marketplace_service_providers_list)
from waldur_api_client.api.users import users_me_retrieve
from waldur_api_client.client import AuthenticatedClient
from waldur_api_client.errors import UnexpectedStatus
from waldur_api_client.models import (
    ComponentUsage, ComponentUsageCreateRequest, ComponentUsageItemRequest, OrderApproveByProviderRequest,
    OrderCreateRequest, OrderDetails, OrderDetailsFieldEnum, OrderErrorDetailsRequest, OrderInfoResponse,
    OrderState, OrderUUID, ProjectUser, ProviderOfferingDetails, ProviderOfferingDetailsFieldEnum,
    ProviderPlanDetails, RequestTypes, Resource, ResourceBackendIDRequest, ResourceBackendMetadataRequest,
    ResourceBackendMetadataRequestBackendMetadata, ResourceSetLimitsRequest, ResourceSetLimitsRequestLimits,
    ResourceState, ResourceTerminateRequest, ResourceUpdateLimitsRequest, ResourceUpdateLimitsRequestLimits,
    ServiceProvider, SshKey, UserMe)
from waldur_api_client.models.order_create_request_limits import OrderCreateRequestLimits
from waldur_api_client.models.generic_order_attributes import GenericOrderAttributes

from tests.simulators.waldur import presets as P


@pytest.fixture
def provider(waldur_sim):
    with AuthenticatedClient(base_url=waldur_sim.url, token=P.PROVIDER_TOKEN) as client:
        yield client


@pytest.fixture
def consumer(waldur_sim):
    with AuthenticatedClient(base_url=waldur_sim.url, token=P.CONSUMER_TOKEN) as client:
        yield client


def _parsed(response, status=200):
    assert response.status_code == status, response.content
    return response.parsed


def test_processor_construction_calls_parse(provider):
    me = _parsed(users_me_retrieve.sync_detailed(client=provider))
    assert isinstance(me, UserMe)
    assert me.username == "provider-agent"
    offering = marketplace_provider_offerings_retrieve.sync(
        UUID(P.DO_OFFERING_UUID), client=provider,
        field=[ProviderOfferingDetailsFieldEnum.COMPONENTS, ProviderOfferingDetailsFieldEnum.CUSTOMER_UUID,
               ProviderOfferingDetailsFieldEnum.PLUGIN_OPTIONS])
    assert isinstance(offering, ProviderOfferingDetails)
    assert offering.customer_uuid == UUID(P.PROVIDER_CUSTOMER_UUID)
    assert [c.type_ for c in offering.components] == ["cpu", "ram", "disk"]
    full = marketplace_provider_offerings_retrieve.sync(UUID(P.AZURE_OFFERING_UUID), client=provider)
    assert full.plans[0].uuid == UUID(P.AZURE_PLAN_UUID)
    providers = marketplace_service_providers_list.sync(client=provider, customer_uuid=UUID(P.PROVIDER_CUSTOMER_UUID))
    assert [type(p) for p in providers] == [ServiceProvider]
    assert providers[0].uuid == UUID(P.SERVICE_PROVIDER_UUID)
    plan = _parsed(marketplace_plans_retrieve.sync_detailed(UUID(P.DO_PLAN_UUID), client=provider))
    assert isinstance(plan, ProviderPlanDetails)
    assert plan.quotas.additional_properties == P.DO_PLAN_QUOTAS


def test_service_provider_keys_page_through(provider):
    first = marketplace_service_providers_keys_list.sync_detailed(UUID(P.SERVICE_PROVIDER_UUID), client=provider)
    second = marketplace_service_providers_keys_list.sync_detailed(UUID(P.SERVICE_PROVIDER_UUID), client=provider,
                                                                   page=2)
    keys = _parsed(first) + _parsed(second)
    assert first.headers["x-result-count"] == "12"
    assert all(isinstance(k, SshKey) for k in keys)
    assert [k.uuid.hex for k in keys] == [k["uuid"] for k in P.SSH_KEYS]
    assert keys[0].fingerprint_md5 == P.SSH_KEYS[0]["fingerprint_md5"]


def test_order_processing_calls_parse(waldur_sim, provider):
    orders = marketplace_orders_list.sync(
        client=provider, offering_uuid=UUID(P.DO_OFFERING_UUID),
        state=[OrderState.PENDING_PROVIDER, OrderState.EXECUTING], page_size=100)
    assert [type(o) for o in orders] == [OrderDetails]
    order = orders[0]
    assert (order.uuid, order.type_, order.state) == (UUID(P.DO_ORDER_UUID), RequestTypes.CREATE,
                                                      OrderState.PENDING_PROVIDER)
    approved = _parsed(marketplace_orders_approve_by_provider.sync_detailed(
        order.uuid, client=provider, body=OrderApproveByProviderRequest()))
    assert isinstance(approved, OrderInfoResponse) and approved.detail
    refreshed = marketplace_orders_retrieve.sync(order.uuid, client=provider)
    assert refreshed.state == OrderState.EXECUTING
    assert refreshed.marketplace_resource_uuid == UUID(P.DO_RESOURCE_UUID)

    resource = _parsed(marketplace_provider_resources_retrieve.sync_detailed(
        refreshed.marketplace_resource_uuid, client=provider))
    assert isinstance(resource, Resource)
    assert (resource.state, resource.name, resource.offering_plugin_options.additional_properties) == (
        ResourceState.CREATING, "do-vm-1", {})
    assert resource.order_in_progress.uuid == order.uuid
    team = marketplace_provider_resources_team_list.sync(resource.uuid, client=provider)
    assert [type(m) for m in team] == [ProjectUser, ProjectUser]
    status = marketplace_provider_resources_set_backend_id.sync(
        resource.uuid, client=provider, body=ResourceBackendIDRequest(backend_id="424242"))
    assert status.status
    metadata = ResourceBackendMetadataRequestBackendMetadata.from_dict({"droplet_id": 424242})
    assert marketplace_provider_resources_set_backend_metadata.sync(
        resource.uuid, client=provider, body=ResourceBackendMetadataRequest(backend_metadata=metadata)).status
    limits = ResourceSetLimitsRequestLimits.from_dict({"cpu": 1, "ram": 1024, "disk": 25600})
    assert marketplace_provider_resources_set_limits.sync(
        resource.uuid, client=provider, body=ResourceSetLimitsRequest(limits=limits)).status

    state = marketplace_orders_retrieve.sync(
        order.uuid, client=provider, field=[OrderDetailsFieldEnum.UUID, OrderDetailsFieldEnum.STATE])
    assert state.state == OrderState.EXECUTING
    done = marketplace_orders_set_state_done.sync_detailed(order.uuid, client=provider)
    assert done.status_code == 200
    assert waldur_sim.app.resource(P.DO_RESOURCE_UUID)["state"] == "OK"

    listed = marketplace_provider_resources_list.sync(
        client=provider, offering_uuid=[UUID(P.DO_OFFERING_UUID)], state=[ResourceState.OK, ResourceState.ERRED])
    assert [(r.uuid, r.backend_id) for r in listed] == [(UUID(P.DO_RESOURCE_UUID), "424242")]

    erred = marketplace_orders_set_state_erred.sync_detailed(
        UUID(P.AZURE_ORDER_UUID), client=provider,
        body=OrderErrorDetailsRequest(error_message="quota exceeded", error_traceback="Traceback: ..."))
    assert erred.status_code == 200
    assert marketplace_orders_retrieve.sync(UUID(P.AZURE_ORDER_UUID), client=provider).error_message == \
        "quota exceeded"


def test_409_on_a_second_approval_is_what_the_client_expects(provider):
    marketplace_orders_approve_by_provider.sync_detailed(
        UUID(P.DO_ORDER_UUID), client=provider, body=OrderApproveByProviderRequest())
    again = marketplace_orders_approve_by_provider.sync_detailed(
        UUID(P.DO_ORDER_UUID), client=provider, body=OrderApproveByProviderRequest())
    assert (again.status_code, again.parsed) == (409, None)
    with pytest.raises(UnexpectedStatus) as raised:
        marketplace_orders_set_state_done.sync_detailed(UUID(P.AZURE_ORDER_UUID), client=provider)
    assert raised.value.status_code == 409


def test_usage_reporting_calls_parse(waldur_sim, provider):
    resource = waldur_sim.app.seed_resource(P.AZURE_OFFERING_UUID, "vm", backend_id="/subscriptions/s/vm")
    first_of_month = datetime.datetime(2026, 2, 1, tzinfo=datetime.timezone.utc)
    body = ComponentUsageCreateRequest(
        usages=[ComponentUsageItemRequest(type_="cpu", amount="2.00"),
                ComponentUsageItemRequest(type_="ram", amount="4096.00")],
        resource=UUID(resource["uuid"]), date=first_of_month)
    created = marketplace_component_usages_set_usage.sync_detailed(client=provider, body=body)
    assert (created.status_code, created.content) == (201, b"")
    usages = marketplace_component_usages_list.sync(client=provider, resource_uuid=UUID(resource["uuid"]),
                                                    billing_period=first_of_month.date())
    assert all(isinstance(u, ComponentUsage) for u in usages)
    assert sorted((u.type_, u.usage, u.billing_period) for u in usages) == [
        ("cpu", "2.00", first_of_month.date()), ("ram", "4096.00", first_of_month.date())]


def test_consumer_order_flow_calls_parse(waldur_sim, consumer, provider):
    base = f"{waldur_sim.url}/api/marketplace-public-offerings/{P.DO_OFFERING_UUID}/"
    body = OrderCreateRequest(
        offering=base, project=f"{waldur_sim.url}/api/projects/{P.PROJECT_UUID}/",
        plan=f"{base}plans/{P.DO_PLAN_UUID}/", accepting_terms_of_service=True,
        attributes=GenericOrderAttributes.from_dict({"name": "client-vm"}),
        limits=OrderCreateRequestLimits.from_dict({"cpu": 1, "ram": 1024, "disk": 25600}))
    order = _parsed(marketplace_orders_create.sync_detailed(client=consumer, body=body), 201)
    assert isinstance(order, OrderDetails)
    assert (order.state, order.resource_name) == (OrderState.PENDING_PROVIDER, "client-vm")
    resource_uuid = order.marketplace_resource_uuid
    mine = marketplace_resources_retrieve.sync(resource_uuid, client=consumer)
    assert isinstance(mine, Resource) and mine.state == ResourceState.CREATING
    marketplace_orders_approve_by_provider.sync(order.uuid, client=provider, body=OrderApproveByProviderRequest())
    marketplace_orders_set_state_done.sync_detailed(order.uuid, client=provider)
    update = marketplace_resources_update_limits.sync(
        resource_uuid, client=consumer,
        body=ResourceUpdateLimitsRequest(limits=ResourceUpdateLimitsRequestLimits.from_dict({"cpu": 2})))
    assert isinstance(update, OrderUUID)
    assert marketplace_orders_retrieve.sync(update.order_uuid, client=provider).type_ == RequestTypes.UPDATE
    marketplace_orders_approve_by_provider.sync(update.order_uuid, client=provider,
                                                body=OrderApproveByProviderRequest())
    marketplace_orders_set_state_done.sync_detailed(update.order_uuid, client=provider)
    terminate = marketplace_resources_terminate.sync(resource_uuid, client=consumer, body=ResourceTerminateRequest())
    assert marketplace_orders_retrieve.sync(terminate.order_uuid, client=provider).type_ == RequestTypes.TERMINATE
    assert waldur_sim.app.resource(resource_uuid.hex)["limits"]["cpu"] == 2


def test_the_resource_fields_the_passes_ask_for_are_waldurs_own_field_names():
    """``waldur_resources_info`` sends ``field=`` with its keys: each must be one Waldur's
    provider-resources endpoints take (``ResourceFieldEnum``). Waldur ignores a name it does not
    know, so a wrong one would come back as an empty value, silently."""
    from waldur_api_client.models import ResourceFieldEnum

    from ansible_collections.waldur.site_agent.plugins.module_utils.waldur.marketplace import RESOURCE_KEYS
    assert set(RESOURCE_KEYS) - set(field.value for field in ResourceFieldEnum) == set()


def test_agent_identity_answers_parse_as_the_upstream_agent_parses_them(provider):
    # waldur-api-client 8.x requires created_by and compatibility in every AgentIdentity: the
    # upstream agent's event mode registered against this simulator only once it sent them.
    from waldur_api_client.api.marketplace_site_agent_identities import (
        marketplace_site_agent_identities_create, marketplace_site_agent_identities_list,
        marketplace_site_agent_identities_update)
    from waldur_api_client.models import AgentIdentity, AgentIdentityRequest
    from waldur_api_client.models.agent_compatibility_status_enum import AgentCompatibilityStatusEnum

    name = "agent-%s" % P.DO_OFFERING_UUID
    created = _parsed(marketplace_site_agent_identities_create.sync_detailed(
        client=provider, body=AgentIdentityRequest(offering=UUID(P.DO_OFFERING_UUID), name=name, version="1.0.8")),
        201)
    assert isinstance(created, AgentIdentity) and created.created_by == UUID(P.PROVIDER_USER_UUID)
    assert created.compatibility.status == AgentCompatibilityStatusEnum.COMPATIBLE
    (listed,) = _parsed(marketplace_site_agent_identities_list.sync_detailed(client=provider, name=name))
    assert listed.uuid == created.uuid
    updated = _parsed(marketplace_site_agent_identities_update.sync_detailed(
        uuid=created.uuid, client=provider, body=AgentIdentityRequest(offering=UUID(P.DO_OFFERING_UUID), name=name)))
    assert updated.compatibility.status == AgentCompatibilityStatusEnum.UNKNOWN

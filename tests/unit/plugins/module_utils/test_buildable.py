"""create_gaps: whether an offering can build a machine at all, from its settings and order form."""

from __future__ import annotations

import pytest

from plugins.filter.agent_pass import create_gaps
from plugins.module_utils.agent.buildable import order_form_fields
from plugins.plugin_utils import backends
from scripts import gen_config_reference

DO = {"order_processing_backend": "digitalocean",
      "backend_settings": {"default_region": "ams3", "default_image": "ubuntu-22-04-x64", "default_size": "s-1vcpu-1gb"}}
AZURE = {"backend_type": "azure", "order_processing_backend": "azure",
         "backend_settings": {"default_location": "westeurope", "default_size": "Standard_B1s", "default_image": "x:y:z:1"}}
EMPTY_FORM = {"order": [], "options": {}}


def without(offering, *keys):
    settings = {key: value for key, value in offering["backend_settings"].items() if key not in keys}
    return dict(offering, backend_settings=settings)


def test_the_attributes_are_the_ones_the_order_filter_reads():
    for entry in backends.every():
        read = gen_config_reference.attribute_lookups(entry.name)
        for name, _keys, attributes in entry.create_inputs:
            assert ", ".join(attributes) in read, (entry.name, name, read)


def test_defaults_for_everything_leave_no_gap():
    assert create_gaps(DO, EMPTY_FORM) == [] and create_gaps(AZURE, EMPTY_FORM) == []


@pytest.mark.parametrize("offering,key,field", [
    (DO, "default_region", "region"), (DO, "default_image", "image"),
    (AZURE, "default_location", "location"), (AZURE, "default_size", "size"), (AZURE, "default_image", "image"),
])
def test_a_missing_default_is_a_gap_unless_the_order_form_carries_it(offering, key, field):
    gaps = create_gaps(without(offering, key), EMPTY_FORM)
    assert len(gaps) == 1 and gaps[0].startswith("backend_settings.%s is not set" % key), gaps
    assert create_gaps(without(offering, key), {"order": [field], "options": {field: {"label": field}}}) == []
    assert create_gaps(without(offering, key), [field]) == []


def test_a_size_comes_from_default_size_size_mapping_or_the_form():
    bare = without(DO, "default_size")
    assert "or size_mapping" in create_gaps(bare, EMPTY_FORM)[0]
    assert create_gaps(dict(bare, backend_settings=dict(bare["backend_settings"], size_mapping={"s": {"cpu": 1}})),
                       EMPTY_FORM) == []
    assert create_gaps(bare, ["size_slug"]) == []


def test_an_unknown_order_form_or_backend_reports_nothing():
    assert create_gaps(without(DO, "default_region"), None) == []
    assert create_gaps({"order_processing_backend": "slurm", "backend_settings": {}}, EMPTY_FORM) == []
    assert order_form_fields("not a form") is None
    assert create_gaps(dict(without(DO, "default_region"), backend_settings=dict(default_region="  ")), EMPTY_FORM)

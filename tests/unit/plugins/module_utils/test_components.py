"""Figures onto components (upstream test_metering.py examples), sizes for limits, and the one limits rule."""

from ansible_collections.waldur.site_agent.plugins.module_utils.agent.components import (
    figure_for_component,
    figures_to_usages,
    limit_values_equal,
    limits_cover,
    limits_equal,
    size_for_limits,
    size_matches_limits,
)

# Standard_B2s: 2 cores, 4096 MiB, OS disk 30720 MiB + resource disk 8192 MiB
B2S = {"cores": 2, "ram_mb": 4096, "disk_mb": 30720 + 8192}
COMPONENTS = {
    "cpu": {"measured_unit": "Cores", "unit_factor": 1, "accounting_type": "limit"},
    "ram": {"measured_unit": "MiB", "unit_factor": 1, "accounting_type": "limit"},
    "disk": {"measured_unit": "MiB", "unit_factor": 1, "accounting_type": "limit"},
}


def test_standard_b2s_maps_onto_cpu_ram_disk():
    assert figures_to_usages(B2S, COMPONENTS) == {"cpu": 2, "ram": 4096, "disk": 38912}


def test_unit_factor_divides():
    components = {"ram": {"unit_factor": 1024}, "disk": {"unit_factor": 1024}}
    assert figures_to_usages(B2S, components) == {"ram": 4, "disk": 38}
    assert figures_to_usages({"ram_mb": 1536}, {"ram": {"unit_factor": 1024}}) == {"ram": 1.5}


def test_names_are_matched_by_alias_any_case():
    components = {"vCPU": {}, "VCores": {}, "Memory": {}, "mem": {}, "Storage": {}}
    assert figures_to_usages(B2S, components) == {
        "vCPU": 2, "VCores": 2, "Memory": 4096, "mem": 4096, "Storage": 38912}


def test_backend_name_wins_over_the_name():
    components = {"cpu": {"backend_name": "ram_mb"}, "gpu_hours": {"backend_name": "cores"}}
    assert figures_to_usages(B2S, components) == {"cpu": 4096, "gpu_hours": 2}


def test_a_backend_name_that_names_nothing_is_not_rescued_by_the_name():
    assert figure_for_component("cpu", {"backend_name": "gpus"}) is None
    assert figures_to_usages(B2S, {"cpu": {"backend_name": "gpus"}}) == {}


def test_unknown_components_are_left_out_not_zero():
    usages = figures_to_usages(B2S, {"cpu": {}, "licenses": {"unit_factor": 1}})
    assert usages == {"cpu": 2}
    assert "licenses" not in usages


def test_zero_is_a_value_and_missing_figures_are_left_out():
    assert figures_to_usages({"cores": 0, "ram_mb": None}, COMPONENTS) == {"cpu": 0}


def test_zero_or_missing_unit_factor_means_one():
    assert figures_to_usages(B2S, {"cpu": {"unit_factor": 0}, "ram": {"unit_factor": None}}) == {
        "cpu": 2, "ram": 4096}


MAPPING = {
    "s-1vcpu-1gb": {"cpu": 1, "ram": 1024},
    "s-2vcpu-2gb": {"cpu": 2, "ram": 2048},
    "s-2vcpu-2gb-dup": {"cpu": 2, "ram": 2048},
}


def test_size_for_limits_first_exact_match_numeric():
    assert size_for_limits(MAPPING, {"cpu": "2", "ram": 2048.0}) == "s-2vcpu-2gb"
    assert size_for_limits(MAPPING, {"cpu": 1, "ram": 1024, "disk": 25}) == "s-1vcpu-1gb"


def test_size_for_limits_none_when_nothing_matches():
    assert size_for_limits(MAPPING, {"cpu": 4, "ram": 8192}) is None
    assert size_for_limits(MAPPING, {"cpu": 2}) is None  # every key of the entry must be in the limits
    assert size_for_limits({}, {"cpu": 1}) is None
    assert size_for_limits({"empty": {}}, {"cpu": 1}) is None


def test_limit_values_compare_numbers_by_value_and_the_rest_as_text():
    assert limit_values_equal(2, 2.0) and limit_values_equal("2", 2) and limit_values_equal("2.0", 2)
    assert not limit_values_equal(2, 3) and not limit_values_equal("2", 2.5)
    assert limit_values_equal("gold", "gold") and not limit_values_equal("gold", "silver")
    assert not limit_values_equal(None, 0) and not limit_values_equal("", 0)


def test_limits_equal_needs_the_same_keys_and_a_missing_key_is_not_zero():
    assert limits_equal({"cpu": 2, "ram": "4096"}, {"cpu": 2.0, "ram": 4096})
    assert limits_equal(None, {}) and limits_equal({}, None)
    assert not limits_equal({"cpu": 2}, {"cpu": 2, "ram": 0})
    assert not limits_equal({"cpu": 2, "ram": 0}, {"cpu": 2})
    assert not limits_equal({"cpu": 2}, {"cpu": 3})


def test_limits_cover_asks_only_for_the_wanted_keys():
    assert limits_cover({"cpu": 2}, {"cpu": "2", "ram": 4096})
    assert not limits_cover({"cpu": 2, "ram": 0}, {"cpu": 2})
    assert not limits_cover({"cpu": 2}, None)
    assert limits_cover({}, {"cpu": 1})


def test_size_matches_limits_is_limits_cover_of_a_non_empty_entry():
    assert size_matches_limits({"cpu": 2, "ram": 2048}, {"cpu": "2", "ram": 2048.0, "disk": 25})
    assert not size_matches_limits({"cpu": 2, "ram": 2048}, {"cpu": 2})
    assert not size_matches_limits({}, {"cpu": 2})

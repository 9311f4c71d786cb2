"""The table of policy kinds: the server's descriptors and the CLI's rows name the same paths."""

from __future__ import annotations

from api.limits.kinds import KINDS, flow_controls_json
from api.limits.levels import LEVELS
from api.limits.schemas import FlowControls
from models.flow_resolution import FlowInputs, resolve_flow
from sluice.admin_cli.commands import policy_kinds as cli


def server_paths() -> set[tuple[str, str]]:
    return {(level, segment) for kind in KINDS for level, segment in kind.segments.items()}


def test_every_cli_row_names_a_path_the_server_serves():
    paths = server_paths()
    for row in cli.KINDS:
        assert (row.level, row.path_segment) in paths, row
        if row.subscription_segment:
            assert ("subscription", row.subscription_segment) in paths


def test_every_kind_exists_at_known_levels():
    for kind in KINDS:
        assert kind.segments and set(kind.segments) <= set(LEVELS), kind.name
        assert kind.applied_levels <= set(kind.segments), kind.name


def test_effective_flow_controls_list_every_resolved_kind_as_documented():
    controls = flow_controls_json(resolve_flow(FlowInputs()))
    assert list(controls) == list(FlowControls.model_fields)
    assert controls["messageTTL"] == {"value": 0, "source": "broker"}

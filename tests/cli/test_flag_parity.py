"""Every ``pulsar-admin`` command and flag of the reference (section 2) parses the same way.

Each row is a command line as the reference writes it (with ``sluice-admin`` for
``pulsar-admin``) and the values argparse must produce.  Nothing is sent to a server.
Not offered because Sluice's API has no such endpoints: the replicator dispatch rates.
"""

from __future__ import annotations

from tests.cli.parsing import parsing_test, usage_error_test

T = "persistent://t/ns/topic"
RATE = {
    "msg_dispatch_rate": 1000,
    "byte_dispatch_rate": 1048576,
    "dispatch_rate_period": 1,
    "relative_to_publish_rate": True,
}
DEFAULTS = {
    "msg_dispatch_rate": -1,
    "byte_dispatch_rate": -1,
    "dispatch_rate_period": 1,
    "relative_to_publish_rate": False,
}

CASES = [
    # resource groups (pulsar-admin resourcegroups, namespaces *-resource-group)
    ("resourcegroups list", {}),
    ("resourcegroups get rg", {"resourcegroup": "rg"}),
    (
        "resourcegroups create rg -mp 10 -bp 20 -md 30 -bd 40",
        {
            "resourcegroup": "rg",
            "msg_publish_rate": 10,
            "byte_publish_rate": 20,
            "msg_dispatch_rate": 30,
            "byte_dispatch_rate": 40,
        },
    ),
    (
        "resourcegroups update rg --msg-dispatch-rate 5",
        {"msg_dispatch_rate": 5, "msg_publish_rate": None, "byte_dispatch_rate": None},
    ),
    ("resourcegroups delete rg", {"resourcegroup": "rg"}),
    (
        "namespaces set-resource-group tenant/ns --resource-group-name rg",
        {"namespace": "tenant/ns", "resource_group_name": "rg"},
    ),
    ("namespaces set-resource-group tenant/ns -rgn rg", {"resource_group_name": "rg"}),
    ("namespaces get-resource-group tenant/ns", {"namespace": "tenant/ns"}),
    ("namespaces remove-resource-group tenant/ns", {"namespace": "tenant/ns"}),
    # 2.1 / 2.2 namespaces
    (
        "namespaces set-dispatch-rate tenant/ns --msg-dispatch-rate 1000 "
        "--byte-dispatch-rate 1048576 --dispatch-rate-period 1 --relative-to-publish-rate",
        {"namespace": "tenant/ns", **RATE},
    ),
    ("namespaces set-dispatch-rate tenant/ns", {"namespace": "tenant/ns", **DEFAULTS}),
    ("namespaces get-dispatch-rate tenant/ns", {"namespace": "tenant/ns"}),
    ("namespaces remove-dispatch-rate tenant/ns", {"namespace": "tenant/ns", "dry_run": False}),
    (
        "namespaces set-subscription-dispatch-rate tenant/ns -md 100 -bd -1 -dt 1 -rp",
        {"msg_dispatch_rate": 100, "byte_dispatch_rate": -1, "relative_to_publish_rate": True},
    ),
    ("namespaces get-subscription-dispatch-rate tenant/ns", {"namespace": "tenant/ns"}),
    ("namespaces remove-subscription-dispatch-rate tenant/ns", {"namespace": "tenant/ns"}),
    (
        "namespaces create tenant/ns --clusters c1,c2 --bundles 4",
        {"clusters": ["c1", "c2"], "bundles": 4},
    ),
    ("namespaces create tenant/ns -c c1 -b 2", {"clusters": ["c1"], "bundles": 2}),
    ("namespaces list tenant", {"tenant": "tenant"}),
    ("namespaces delete tenant/ns --force", {"force": True}),
    ("namespaces delete tenant/ns -f", {"force": True}),
    ("namespaces delete tenant/ns", {"force": False}),
    ("namespaces policies tenant/ns", {"namespace": "tenant/ns"}),
    ("namespaces topics tenant/ns", {"namespace": "tenant/ns"}),
    (
        "namespaces grant-permission tenant/ns --role r --actions produce,consume",
        {"namespace": "tenant/ns", "role": "r", "actions": ["produce", "consume"]},
    ),
    ("namespaces revoke-permission tenant/ns --role r", {"role": "r", "dry_run": False}),
    ("namespaces permissions tenant/ns", {"namespace": "tenant/ns"}),
    (
        "namespaces grant-subscription-permission tenant/ns --subscription s --roles a,b",
        {"namespace": "tenant/ns", "subscription": "s", "roles": ["a", "b"]},
    ),
    ("namespaces grant-subscription-permission tenant/ns -s s -rs a", {"roles": ["a"]}),
    (
        "namespaces revoke-subscription-permission tenant/ns --subscription s --role r",
        {"subscription": "s", "role": "r", "dry_run": False},
    ),
    ("namespaces revoke-subscription-permission tenant/ns -s s -r r", {"role": "r"}),
    ("namespaces subscription-permission tenant/ns", {"namespace": "tenant/ns"}),
    (f"topics grant-permission {T} --role r --actions consume", {"actions": ["consume"]}),
    (f"topics grant-permission {T} -r r -a produce,consume", {"role": "r"}),
    (f"topics revoke-permission {T} --role r", {"topic": T, "role": "r"}),
    (f"topics revoke-permission {T} -r r --dry-run", {"dry_run": True}),
    (f"topics permissions {T}", {"topic": T}),
    # 2.3 topicPolicies
    (
        f"topicPolicies set-dispatch-rate {T} -md 10 -bd -1 -dt 1 -rp -g",
        {"topic": T, "msg_dispatch_rate": 10, "global_policy": True},
    ),
    (f"topicPolicies get-dispatch-rate {T} -ap -g", {"applied": True, "global_policy": True}),
    (f"topicPolicies get-dispatch-rate {T} --applied --global", {"applied": True}),
    (f"topicPolicies remove-dispatch-rate {T} -g", {"global_policy": True}),
    (
        f"topicPolicies set-subscription-dispatch-rate {T} -md 5 -dt 1",
        {"msg_dispatch_rate": 5, "subscription": None},
    ),
    (f"topicPolicies get-subscription-dispatch-rate {T} -ap", {"applied": True}),
    (f"topicPolicies remove-subscription-dispatch-rate {T}", {"subscription": None}),
    (
        f"topicPolicies set-subscription-dispatch-rate {T} -s my-sub -md 5 -dt 1",
        {"subscription": "my-sub", "msg_dispatch_rate": 5},
    ),
    (
        f"topicPolicies get-subscription-dispatch-rate {T} -s my-sub -ap",
        {"subscription": "my-sub", "applied": True},
    ),
    (
        f"topicPolicies remove-subscription-dispatch-rate {T} --subscription my-sub",
        {"subscription": "my-sub"},
    ),
    # 2.4 topics
    (f"topics set-dispatch-rate {T} -md 1 -bd 2 -dt 3 -rp", {"dispatch_rate_period": 3}),
    (f"topics get-dispatch-rate {T} -ap", {"applied": True}),
    (f"topics remove-dispatch-rate {T}", {"topic": T}),
    (f"topics set-subscription-dispatch-rate {T} -md 1", {"msg_dispatch_rate": 1}),
    (f"topics set-subscription-dispatch-rate {T} -s sub -md 1", {"subscription": "sub"}),
    (f"topics get-subscription-dispatch-rate {T} -ap", {"applied": True}),
    (f"topics remove-subscription-dispatch-rate {T}", {"topic": T}),
    (f"topics create-partitioned-topic {T} --partitions 4", {"partitions": 4}),
    (f"topics create-partitioned-topic {T} -p 4", {"partitions": 4}),
    (f"topics create {T}", {"topic": T}),
    (f"topics create {T} -m a=1 --metadata b=2", {"metadata": ["a=1", "b=2"]}),
    (f"topics update-partitioned-topic {T} -p 8", {"partitions": 8}),
    (f"topics get-partitioned-topic-metadata {T}", {"topic": T}),
    (
        "topics list tenant/ns -td persistent -b 0x0_0xf -ist",
        {"topic_domain": "persistent", "bundle": "0x0_0xf", "include_system_topic": True},
    ),
    ("topics list tenant/ns --topic-domain non_persistent", {"topic_domain": "non_persistent"}),
    ("topics list-partitioned-topics tenant/ns -ist", {"include_system_topic": True}),
    (f"topics stats {T}-partition-0", {"topic": f"{T}-partition-0"}),
    (f"topics partitioned-stats {T} --per-partition", {"per_partition": True}),
    (f"topics delete {T} -f", {"force": True}),
    (f"topics delete-partitioned-topic {T} --force", {"force": True}),
    (f"topics subscriptions {T}", {"topic": T}),
    (f"topics create-subscription {T} -s sub", {"subscription": "sub"}),
    (f"topics unsubscribe {T} --subscription sub -f", {"subscription": "sub", "force": True}),
    # 2.5 brokers and tenants
    (
        "brokers update-dynamic-config --config dispatchThrottlingRatePerTopicInMsg --value 100",
        {"config_name": "dispatchThrottlingRatePerTopicInMsg", "value": "100"},
    ),
    ("brokers update-dynamic-config -c k -v true", {"config_name": "k", "value": "true"}),
    ("brokers delete-dynamic-config --config k", {"config_name": "k"}),
    ("brokers delete-dynamic-config -c k", {"config_name": "k"}),
    ("brokers list-dynamic-config", {}),
    ("brokers get-all-dynamic-config", {}),
    ("brokers get-runtime-config", {}),
    ("brokers healthcheck", {}),
    (
        "tenants create my-tenant --admin-roles role1,role2 --allowed-clusters standalone",
        {"admin_roles": ["role1", "role2"], "allowed_clusters": ["standalone"]},
    ),
    ("tenants create my-tenant -r role1 -c standalone", {"admin_roles": ["role1"]}),
    ("tenants list", {}),
    ("tenants get my-tenant", {"tenant": "my-tenant"}),
    ("tenants update my-tenant -r a -c standalone", {"admin_roles": ["a"]}),
    ("tenants delete my-tenant --force", {"force": True}),
    ("tenants delete my-tenant", {"force": False}),
    # beyond pulsar-admin
    (f"topics effective-dispatch-rates {T}", {"topic": T}),
    (f"topics set-dispatch-rate {T} -md 1 --dry-run", {"dry_run": True}),
    ("brokers update-dynamic-config -c k -v 1 --dry-run", {"dry_run": True}),
    (
        "audit list --entity e --entity-prefix p --entity-type t --role r --since 1h "
        "--until 2026-01-01T00:00:00Z --limit 5",
        {"entity": "e", "entity_prefix": "p", "entity_type": "t", "role": "r", "limit": 5},
    ),
    ("reports rates tenant/ns --since 1h", {"namespace": "tenant/ns", "since": "1h"}),
    ("reports backlog tenant/ns", {"since": "1h"}),
    # global options, before the group or after the command
    (
        "--admin-url http://h:1 --auth-params token:x --tls-allow-insecure --timeout 3 "
        "--output yaml tenants list",
        {"admin_url": "http://h:1", "auth_params": "token:x", "timeout": 3.0, "output": "yaml"},
    ),
    (
        "tenants list --output table --admin-url http://h:2 --tls-trust-cert-path /ca.pem",
        {"output": "table", "admin_url": "http://h:2", "tls_trust_cert_path": "/ca.pem"},
    ),
    ("--config /c.conf brokers delete-dynamic-config -c k", {"client_config": "/c.conf"}),
]


test_reference_command_lines_parse = parsing_test(CASES)


test_usage_errors = usage_error_test(
    [
        "topics create-partitioned-topic persistent://t/ns/x",  # -p is required
        "topics create-subscription persistent://t/ns/x",  # -s is required
        "namespaces grant-permission t/ns --role r",  # --actions is required
        "namespaces revoke-permission t/ns",  # --role is required
        "namespaces grant-subscription-permission t/ns -s s",  # --roles is required
        "namespaces revoke-subscription-permission t/ns --role r",  # -s is required
        "topics grant-permission persistent://t/ns/x --actions consume",  # --role too
        "brokers update-dynamic-config -c k",  # -v is required
        "namespaces set-dispatch-rate t/ns -md many",
        "topics list t/ns -td kafka",
        "tenants",  # a command is required
        "--output xml tenants list",
    ]
)

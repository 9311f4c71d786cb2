#!/usr/bin/env bash
# Export every tenant, namespace, topic, subscription, dispatch-rate policy and broker
# configuration override of a Sluice cluster as one JSON document (for apply-policies.sh).
#
# usage: export-policies.sh [OUTPUT_FILE]     (standard output by default)
#
# Honours SLUICE_ADMIN_URL and SLUICE_TOKEN.
set -euo pipefail
. "$(dirname "$0")/lib/admin.sh"

[ $# -le 1 ] || { echo "usage: export-policies.sh [OUTPUT_FILE]" >&2; exit 2; }

get() {
    api_ok GET "$1"
    printf '%s' "${API_BODY:-null}"
}

export_topic() {  # $1 full topic name, $2 partition count
    local path sub subs=() rate names
    path="/admin/v2/persistent/$(topic_path "$1")"
    names="$(get "$path/subscriptions")"
    while IFS= read -r sub; do
        [ -n "$sub" ] || continue
        rate="$(get "$path/$(urlenc "$sub")/dispatchRate")"
        subs+=("$(jq -cn --arg name "$sub" --argjson rate "$rate" '{name: $name, dispatchRate: $rate}')")
    done < <(jq -r '.[]' <<<"$names")
    jq -cn --arg name "$1" --argjson partitions "$2" \
        --argjson rate "$(get "$path/dispatchRate")" \
        --argjson subRate "$(get "$path/subscriptionDispatchRate")" \
        --argjson subs "$(printf '%s\n' "${subs[@]}" | jq -cs 'map(select(. != null))')" \
        '{name: $name, partitions: $partitions, dispatchRate: $rate,
          subscriptionDispatchRate: $subRate, subscriptions: $subs}'
}

export_namespace() {  # $1 tenant/namespace
    local t ns base partitioned all topics=() name count
    IFS=/ read -r t ns <<<"$1"
    base="$(urlenc "$t")/$(urlenc "$ns")"
    partitioned="$(get "/admin/v2/persistent/$base/partitioned")"
    all="$(get "/admin/v2/persistent/$base")"
    while IFS= read -r name; do
        [ -n "$name" ] || continue
        count="$(get "/admin/v2/persistent/$(topic_path "$name")/partitions" | jq '.partitions')"
        topics+=("$(export_topic "$name" "$count")")
    done < <(jq -rn --argjson p "$partitioned" --argjson a "$all" '
        $p + ($a | map(select(. as $n | $p | any(. as $b | $n | startswith($b + "-partition-")) | not)))
        | .[]')
    jq -cn --arg name "$1" \
        --argjson rate "$(get "/admin/v2/namespaces/$base/dispatchRate")" \
        --argjson subRate "$(get "/admin/v2/namespaces/$base/subscriptionDispatchRate")" \
        --argjson topics "$(printf '%s\n' "${topics[@]}" | jq -cs 'map(select(. != null))')" \
        '{name: $name, dispatchRate: $rate, subscriptionDispatchRate: $subRate, topics: $topics}'
}

tenants=()
tenant_names="$(get /admin/v2/tenants)"
while IFS= read -r tenant; do
    [ -n "$tenant" ] || continue
    t="$(urlenc "$tenant")"
    info="$(get "/admin/v2/tenants/$t")"
    namespaces=()
    names="$(get "/admin/v2/namespaces/$t")"
    while IFS= read -r namespace; do
        [ -n "$namespace" ] && namespaces+=("$(export_namespace "$namespace")")
    done < <(jq -r '.[]' <<<"$names")
    tenants+=("$(jq -cn --arg name "$tenant" --argjson info "$info" \
        --argjson namespaces "$(printf '%s\n' "${namespaces[@]}" | jq -cs 'map(select(. != null))')" \
        '{name: $name, info: $info, namespaces: $namespaces}')")
done < <(jq -r '.[]' <<<"$tenant_names")

document="$(jq -n --arg url "$SLUICE_ADMIN_URL" \
    --argjson broker "$(get /admin/v2/brokers/configuration/values)" \
    --argjson tenants "$(printf '%s\n' "${tenants[@]}" | jq -cs 'map(select(. != null))')" \
    '{format: "sluice-policies/1", exportedFrom: $url, brokerConfig: $broker, tenants: $tenants}')"
if [ $# -eq 1 ]; then
    printf '%s\n' "$document" >"$1"
else
    printf '%s\n' "$document"
fi

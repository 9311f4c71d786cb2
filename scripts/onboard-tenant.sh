#!/usr/bin/env bash
# Onboard a tenant: create it (kept if it exists), create one namespace (kept if it exists) and
# set the namespace's default dispatch rate and subscription dispatch rate.
#
# usage: onboard-tenant.sh TENANT NAMESPACE [--admin-roles r1,r2] [--clusters c1,c2]
#            [--msg-rate N] [--byte-rate N] [--sub-msg-rate N] [--sub-byte-rate N] [--period S]
#
# Defaults: 1000 msg/s and no byte limit per topic, 100 msg/s and no byte limit per
# subscription, period 1 s (-1 means no limit).  Honours SLUICE_ADMIN_URL and SLUICE_TOKEN.
set -euo pipefail
. "$(dirname "$0")/lib/admin.sh"

usage() {
    sed -n '5,6p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

[ $# -ge 2 ] || usage
tenant="$1" namespace="$2"
shift 2
roles="" clusters="" msg=1000 byte=-1 sub_msg=100 sub_byte=-1 period=1
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || usage
    case "$1" in
        --admin-roles) roles="$2" ;;
        --clusters) clusters="$2" ;;
        --msg-rate) msg="$2" ;;
        --byte-rate) byte="$2" ;;
        --sub-msg-rate) sub_msg="$2" ;;
        --sub-byte-rate) sub_byte="$2" ;;
        --period) period="$2" ;;
        *) usage ;;
    esac
    shift 2
done
for value in "$msg" "$byte" "$sub_msg" "$sub_byte" "$period"; do
    [[ "$value" =~ ^-?[0-9]+$ ]] || die "not an integer: $value"
done

info="$(jq -cn --arg roles "$roles" --arg clusters "$clusters" '
    {adminRoles: ($roles | split(",") | map(select(. != "")))}
    + (if $clusters == "" then {} else {allowedClusters: ($clusters | split(","))} end)')"
t="$(urlenc "$tenant")" ns="$(urlenc "$namespace")"

api_ok PUT "/admin/v2/tenants/$t" "$info" --allow 409
[ "$API_STATUS" = 409 ] && echo "tenant $tenant: exists, kept" || echo "tenant $tenant: created"
api_ok PUT "/admin/v2/namespaces/$t/$ns" --allow 409
[ "$API_STATUS" = 409 ] && echo "namespace $tenant/$namespace: exists, kept" \
    || echo "namespace $tenant/$namespace: created"
api_ok POST "/admin/v2/namespaces/$t/$ns/dispatchRate" "$(rate_json "$msg" "$byte" "$period")"
echo "namespace $tenant/$namespace: dispatchRate msg=$msg byte=$byte period=$period"
api_ok POST "/admin/v2/namespaces/$t/$ns/subscriptionDispatchRate" \
    "$(rate_json "$sub_msg" "$sub_byte" "$period")"
echo "namespace $tenant/$namespace: subscriptionDispatchRate msg=$sub_msg byte=$sub_byte period=$period"

#!/usr/bin/env bash
# Apply a document written by export-policies.sh to a (possibly different) Sluice cluster:
# create what is missing (existing tenants are updated, existing namespaces, topics and
# subscriptions kept), then make every dispatch-rate policy and broker override match the
# document (a policy that is null in the document is removed).
#
# usage: apply-policies.sh [FILE]     (standard input by default)
#
# Honours SLUICE_ADMIN_URL (the target cluster) and SLUICE_TOKEN.
set -euo pipefail
. "$(dirname "$0")/lib/admin.sh"

[ $# -le 1 ] || { echo "usage: apply-policies.sh [FILE]" >&2; exit 2; }
document="$(cat -- "${1:--}")"
jq -e '.format == "sluice-policies/1"' >/dev/null 2>&1 <<<"$document" \
    || die "not a sluice-policies/1 document (written by export-policies.sh)"

# One jq pass turns the document into requests, in order, one per line:
#   OP <US> PATH <US> BODY <US> LABEL      (US = the ASCII unit separator)
# OP is create (409 = exists, kept), tenant (409 = exists, then updated), rate (null body =
# remove), config, or echo (print LABEL).
PROGRAM='
def rate($path; $value): ["rate", $path, ($value | tojson), ""];
def topic_path: sub("^persistent://"; "") | split("/") | map(@uri) | join("/")
    | "/admin/v2/persistent/" + .;
(.brokerConfig // {} | to_entries[]
    | ["config", "/admin/v2/brokers/configuration/\(.key | @uri)/\(.value | @uri)", "", ""]),
(.tenants[] as $t
  | ["tenant", "/admin/v2/tenants/\($t.name | @uri)", ($t.info | tojson), ""],
    ["echo", "", "", "tenant \($t.name)"],
    ($t.namespaces[] as $n
      | ($n.name | split("/") | map(@uri) | "/admin/v2/namespaces/" + join("/")) as $np
      | ["create", $np, "", ""],
        rate("\($np)/dispatchRate"; $n.dispatchRate),
        rate("\($np)/subscriptionDispatchRate"; $n.subscriptionDispatchRate),
        ["echo", "", "", "namespace \($n.name)"],
        ($n.topics[] as $topic
          | ($topic.name | topic_path) as $tp
          | (if $topic.partitions > 0
               then ["create", "\($tp)/partitions", ($topic.partitions | tojson), ""]
               else ["create", $tp, "", ""] end),
            rate("\($tp)/dispatchRate"; $topic.dispatchRate),
            rate("\($tp)/subscriptionDispatchRate"; $topic.subscriptionDispatchRate),
            ($topic.subscriptions[]
              | ["create", "\($tp)/subscription/\(.name | @uri)", "", ""],
                rate("\($tp)/\(.name | @uri)/dispatchRate"; .dispatchRate)),
            ["echo", "", "", "topic \($topic.name)"])))
| join("\u001f")'
requests="$(jq -r "$PROGRAM" <<<"$document")"

with_body() {  # METHOD PATH BODY [--allow ...]: BODY may be empty
    local method="$1" path="$2" body="$3"
    shift 3
    if [ -n "$body" ]; then
        api_ok "$method" "$path" "$body" "$@"
    else
        api_ok "$method" "$path" "$@"
    fi
}

writes=0
while IFS=$'\x1f' read -r op path body label; do
    case "$op" in
        echo) echo "$label" ;;
        create) with_body PUT "$path" "$body" --allow 409 ;;
        tenant)
            api_ok PUT "$path" "$body" --allow 409
            [ "$API_STATUS" != 409 ] || api_ok POST "$path" "$body"
            ;;
        rate)
            if [ "$body" = null ]; then
                api_ok DELETE "$path" --allow 404
            else
                api_ok POST "$path" "$body"
            fi
            writes=$((writes + 1))
            ;;
        config)
            api_ok POST "$path"
            writes=$((writes + 1))
            ;;
        *) die "internal error: unknown step '$op'" ;;
    esac
done <<<"$requests"

echo "applied to $SLUICE_ADMIN_URL ($writes policy and config writes)" >&2

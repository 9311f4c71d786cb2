# Helpers shared by the Sluice admin scripts (sourced, not run).
#
# SLUICE_ADMIN_URL  admin service URL (default http://localhost:8080)
# SLUICE_TOKEN      optional bearer token; passed to curl on stdin, never on the command line
#
# api METHOD PATH [JSON]  sends one request and sets API_STATUS and API_BODY.
# api_ok METHOD PATH [JSON] [--allow CODE...]  the same, but stops the script on an HTTP error
#   (printing the server's reason) unless the status is one of the allowed codes.

shopt -s inherit_errexit  # a failed request inside $(...) stops the script too
SLUICE_ADMIN_URL="${SLUICE_ADMIN_URL:-http://localhost:8080}"
SLUICE_ADMIN_URL="${SLUICE_ADMIN_URL%/}"
API_STATUS=""
API_BODY=""
_API_TMP="$(mktemp)"
trap 'rm -f "$_API_TMP"' EXIT

need() {
    for tool in "$@"; do
        command -v "$tool" >/dev/null 2>&1 || { echo "$(basename "$0"): $tool is required" >&2; exit 1; }
    done
}
need curl jq

die() {
    echo "$(basename "$0"): $*" >&2
    exit 1
}

# One path segment, percent-encoded (byte by byte, in bash: no process per call).
urlenc() {
    local LC_ALL=C s="$1" out="" c i
    for ((i = 0; i < ${#s}; i++)); do
        c="${s:i:1}"
        case "$c" in
            [a-zA-Z0-9._~-]) out+="$c" ;;
            *) printf -v c '%%%02X' "'$c"; out+="$c" ;;
        esac
    done
    printf '%s' "$out"
}

# persistent://t/ns/topic or t/ns/topic -> t/ns/topic (encoded); fails on anything else.
topic_path() {
    local name="${1#persistent://}" t ns local rest
    IFS=/ read -r t ns local rest <<<"$name"
    if [ -z "$t" ] || [ -z "$ns" ] || [ -z "$local" ] || [ -n "$rest" ] || [[ "$1" == *://* && "$1" != persistent://* ]]; then
        return 1
    fi
    printf '%s/%s/%s' "$(urlenc "$t")" "$(urlenc "$ns")" "$(urlenc "$local")"
}

api() {
    local method="$1" path="$2"
    local args=(-sS -X "$method" -o "$_API_TMP" -w '%{http_code}' -H 'Accept: application/json' -K -)
    if [ $# -ge 3 ]; then
        args+=(-H 'Content-Type: application/json' --data-binary "$3")
    fi
    local auth=""
    if [ -n "${SLUICE_TOKEN:-}" ]; then
        auth="header = \"Authorization: Bearer ${SLUICE_TOKEN}\""
    fi
    if ! API_STATUS="$(printf '%s\n' "$auth" | curl "${args[@]}" "${SLUICE_ADMIN_URL}${path}" 2>/dev/null)"; then
        die "cannot reach ${SLUICE_ADMIN_URL}"
    fi
    API_BODY="$(cat "$_API_TMP")"
}

reason() {
    jq -r '.reason? // empty' <<<"$API_BODY" 2>/dev/null || true
}

api_ok() {
    local method="$1" path="$2" allowed=() call=("$1" "$2")
    shift 2
    if [ $# -gt 0 ] && [ "$1" != "--allow" ]; then
        call+=("$1")
        shift
    fi
    if [ $# -gt 0 ] && [ "$1" = "--allow" ]; then
        shift
        allowed=("$@")
    fi
    api "${call[@]}"
    if [ "$API_STATUS" -ge 400 ]; then
        for code in "${allowed[@]}"; do
            [ "$API_STATUS" = "$code" ] && return 0
        done
        die "$method $path: $(reason) (HTTP $API_STATUS)"
    fi
}

# A DispatchRate JSON body.
rate_json() {
    jq -cn --argjson m "$1" --argjson b "$2" --argjson p "$3" \
        '{dispatchThrottlingRateInMsg: $m, dispatchThrottlingRateInByte: $b, ratePeriodInSecond: $p, relativeToPublishRate: false}'
}

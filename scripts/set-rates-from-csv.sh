#!/usr/bin/env bash
# Set the dispatch rate of many topics from a CSV file (or standard input).
#
# usage: set-rates-from-csv.sh [--dry-run] [FILE]
#
# Each line: topic,msgRate,byteRate[,period]  (topic as persistent://t/ns/topic or t/ns/topic;
# period defaults to 1 s; -1 means no limit).  A first line starting with "topic" is a header;
# blank lines and lines starting with # are skipped.  Every line is tried; the exit status is 1
# when any line failed.  --dry-run asks the server what each change would do and changes
# nothing: one line per row with the fields that would change (old -> new) and the limit per
# partition the topic would then dispatch under.  Honours SLUICE_ADMIN_URL and SLUICE_TOKEN.
set -euo pipefail
. "$(dirname "$0")/lib/admin.sh"

query=""
if [ "${1:-}" = "--dry-run" ]; then
    query="?dryRun=true"
    shift
fi
[ $# -le 1 ] || { sed -n '4p' "$0" | sed 's/^# //' >&2; exit 2; }
input="${1:--}"
[ "$input" = "-" ] || [ -r "$input" ] || die "cannot read $input"

trim() {
    local value="${1//$'\r'/}"
    value="${value#"${value%%[![:space:]]*}"}"
    printf '%s' "${value%"${value##*[![:space:]]}"}"
}

# One readable line: the fields of the stored rate ($1, JSON or null) that the row
# ($2 msg, $3 byte, $4 period) changes, and the topic's effective limit from the dry-run
# answer ($5).
describe_change() {
    jq -rn --argjson cur "$1" --argjson m "$2" --argjson b "$3" --argjson p "$4" --argjson dry "$5" '
        def show: if . == null then "unset" elif . < 0 then "unlimited" else tostring end;
        def rate($v; $unit): if $v == null then "unlimited \($unit)/s" else "\($v) \($unit)/s" end;
        ($cur // {}) as $c
        | [["msg", $c.dispatchThrottlingRateInMsg, $m],
           ["byte", $c.dispatchThrottlingRateInByte, $b],
           ["period", $c.ratePeriodInSecond, $p]]
        | map(select(.[1] != .[2]) | "\(.[0]) \(.[1] | show) -> \(.[2] | show)")
        | (if length == 0 then "no change" else "would set " + join(", ") end) as $what
        | ($dry.topics[0].effective // {}) as $e
        | "\($what); then \(rate($e.msgPerSecond; "msg")), \(rate($e.bytePerSecond; "byte"))"
          + " per partition"
          + (if $e.msgLimiter then " (msg limit from the \($e.msgLimiter) limiter)" else "" end)'
}

line_no=0 done_count=0 failed=0
while IFS=, read -r topic msg byte period extra || [ -n "${topic:-}" ]; do
    line_no=$((line_no + 1))
    topic="$(trim "${topic:-}")" msg="$(trim "${msg:-}")" byte="$(trim "${byte:-}")"
    period="$(trim "${period:-}")"
    [ -n "$topic" ] && [[ "$topic" != \#* ]] || continue
    if [ "$line_no" = 1 ] && [[ "$topic" == topic* ]]; then continue; fi
    period="${period:-1}"
    if [ -n "${extra:-}" ] || ! [[ "$msg" =~ ^-?[0-9]+$ && "$byte" =~ ^-?[0-9]+$ && "$period" =~ ^[0-9]+$ ]]; then
        echo "line $line_no: expected topic,msgRate,byteRate[,period] with integers" >&2
        failed=$((failed + 1))
        continue
    fi
    if ! path="$(topic_path "$topic")"; then
        echo "line $line_no: invalid topic name '$topic'" >&2
        failed=$((failed + 1))
        continue
    fi
    current=null
    if [ -n "$query" ]; then
        api GET "/admin/v2/persistent/$path/dispatchRate"
        [ "$API_STATUS" -ge 400 ] || current="${API_BODY:-null}"
    fi
    api POST "/admin/v2/persistent/$path/dispatchRate$query" "$(rate_json "$msg" "$byte" "$period")"
    if [ "$API_STATUS" -ge 400 ]; then
        echo "line $line_no: $topic: $(reason) (HTTP $API_STATUS)" >&2
        failed=$((failed + 1))
        continue
    fi
    if [ -n "$query" ]; then
        echo "$topic: $(describe_change "$current" "$msg" "$byte" "$period" "$API_BODY")"
    else
        echo "$topic: msg=$msg byte=$byte period=$period"
    fi
    done_count=$((done_count + 1))
done < <(cat -- "$input")

if [ -n "$query" ]; then
    echo "dry run: $done_count would be set, $failed failed, nothing changed" >&2
else
    echo "$done_count set, $failed failed" >&2
fi
[ "$failed" = 0 ]

#!/usr/bin/env bash
# Set the dispatch rate of many topics from a CSV file (or standard input).
#
# usage: set-rates-from-csv.sh [--dry-run] [FILE]
#
# Each line: topic,msgRate,byteRate[,period]  (topic as persistent://t/ns/topic or t/ns/topic;
# period defaults to 1 s; -1 means no limit).  A first line starting with "topic" is a header;
# blank lines and lines starting with # are skipped.  Every line is tried; the exit status is 1
# when any line failed.  --dry-run asks the server what each change would do and changes
# nothing.  Honours SLUICE_ADMIN_URL and SLUICE_TOKEN.
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
    api POST "/admin/v2/persistent/$path/dispatchRate$query" "$(rate_json "$msg" "$byte" "$period")"
    if [ "$API_STATUS" -ge 400 ]; then
        echo "line $line_no: $topic: $(reason) (HTTP $API_STATUS)" >&2
        failed=$((failed + 1))
        continue
    fi
    if [ -n "$query" ]; then
        echo "$topic: would set msg=$msg byte=$byte period=$period"
        printf '%s\n' "$API_BODY"
    else
        echo "$topic: msg=$msg byte=$byte period=$period"
    fi
    done_count=$((done_count + 1))
done < <(cat -- "$input")

echo "$done_count set, $failed failed" >&2
[ "$failed" = 0 ]

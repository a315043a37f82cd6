#!/bin/sh
# Backs up every deliberation of a parley engine as stream recordings
# (docs/RECORDINGS.md), one file per deliberation, in DIR: the list from
# the engine's HTTP API, page by page; each recording read straight from
# the stream by engine export. docs/OPERATIONS.md, "Backups".
#
#   PARLEY_HTTP=http://127.0.0.1:8080 PARLEY_NATS=nats://127.0.0.1:4222 \
#   PARLEY_NATS_USER=orchestrator PARLEY_NATS_PASSWORD=… deploy/backup.sh DIR
#
# On the embedded default, without PARLEY_NATS_USER, export reads the
# stream as the participant of the engine's credentials.json:
# PARLEY_DATA names the engine's data directory (default ./parley-data).
# PAGE (1000) is how many deliberations one request lists.
# Needs curl and jq, and engine on PATH (or ENGINE=/path/to/engine).
# PARLEY_HTTP_TOKEN is sent as the bearer token when set (an engine whose
# --http listens beyond loopback wants it for reads). Exits non-zero at the
# first deliberation that cannot be exported.
set -eu
dir=${1:?usage: backup.sh DIR}
engine=${ENGINE:-engine}
http=${PARLEY_HTTP:-http://127.0.0.1:8080}
nats=${PARLEY_NATS:-nats://127.0.0.1:4222}
mkdir -p "$dir"
auth=""
[ -n "${PARLEY_HTTP_TOKEN:-}" ] && auth="Authorization: Bearer ${PARLEY_HTTP_TOKEN%%=*}"
cursor=""
n=0
while :; do
  headers=$(mktemp)
  curl -sSf -D "$headers" ${auth:+-H "$auth"} "$http/api/v1/deliberations?limit=${PAGE:-1000}${cursor:+&cursor=$cursor}" -o "$dir/.page.json"
  for id in $(jq -r '.[].id' "$dir/.page.json"); do
    "$engine" export --deliberation "$id" --nats "$nats" ${PARLEY_NATS_USER:+--user "$PARLEY_NATS_USER"} ${PARLEY_DATA:+--data "$PARLEY_DATA"} --out "$dir/$id.jsonl.tmp"
    mv "$dir/$id.jsonl.tmp" "$dir/$id.jsonl"
    n=$((n + 1))
  done
  cursor=$(sed -n 's/^[Xx]-[Nn]ext-[Cc]ursor: *\([^[:space:]]*\).*/\1/p' "$headers")
  rm -f "$headers"
  [ -n "$cursor" ] || break
done
rm -f "$dir/.page.json"
echo "backed up $n deliberations to $dir"

#!/bin/sh
# Creates the Council namespace and registers the search attributes the deliberation
# workflow sets. Runs in temporalio/admin-tools once the server is healthy; safe to
# repeat. Reads TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, NAMESPACE_RETENTION and
# SEARCH_ATTRIBUTES ("Name=Type ...", types as `temporal operator search-attribute
# create --type` takes them).
set -eu

NAMESPACE=${TEMPORAL_NAMESPACE:-default}

# The server listens on IPv4 (BIND_ON_IP=0.0.0.0): connect over IPv4 even where the
# service name also resolves to an IPv6 address.
host=${TEMPORAL_ADDRESS%:*}
port=${TEMPORAL_ADDRESS##*:}
ipv4=$(getent ahostsv4 "$host" 2>/dev/null | awk 'NR == 1 { print $1 }') || true
if [ -n "$ipv4" ]; then
  export TEMPORAL_ADDRESS="$ipv4:$port"
fi

# retry TRIES PAUSE WHAT COMMAND...: run COMMAND until it succeeds, TRIES times at most,
# PAUSE seconds apart; then give up saying WHAT is not ready.
retry() {
  tries=$1 pause=$2 what=$3
  shift 3
  attempt=0
  until "$@" >/dev/null 2>&1; do
    attempt=$((attempt + 1))
    if [ "$attempt" -ge "$tries" ]; then
      echo "setup: $what after $tries tries" >&2
      exit 1
    fi
    sleep "$pause"
  done
}

retry 60 2 "the Temporal server at $TEMPORAL_ADDRESS is not healthy" \
  temporal operator cluster health

if temporal operator namespace describe --namespace "$NAMESPACE" >/dev/null 2>&1; then
  echo "setup: namespace $NAMESPACE exists"
else
  temporal operator namespace create --namespace "$NAMESPACE" --retention "${NAMESPACE_RETENTION:-30d}"
  echo "setup: created namespace $NAMESPACE"
fi

# A new namespace takes a few seconds to reach every frontend's cache.
retry 60 1 "namespace $NAMESPACE is not usable" \
  temporal operator search-attribute list --namespace "$NAMESPACE"
existing=$(temporal operator search-attribute list --namespace "$NAMESPACE")
for attribute in $SEARCH_ATTRIBUTES; do
  name=${attribute%%=*}
  type=${attribute##*=}
  if printf '%s\n' "$existing" | grep -qw "$name"; then
    echo "setup: search attribute $name exists"
  else
    temporal operator search-attribute create --namespace "$NAMESPACE" --name "$name" --type "$type"
    echo "setup: registered search attribute $name ($type)"
  fi
done

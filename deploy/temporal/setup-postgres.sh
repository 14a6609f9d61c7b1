#!/bin/sh
# Creates Temporal's two PostgreSQL databases and brings their schemas up to the
# version this admin-tools image ships. Runs in temporalio/admin-tools before the
# server starts; safe to repeat (existing databases and applied versions are skipped).
# Reads DB (postgres12), POSTGRES_SEEDS, DB_PORT, POSTGRES_USER and SQL_PASSWORD.
set -eu

SCHEMA_DIR=/etc/temporal/schema/postgresql/v12

sql_tool() {
  temporal-sql-tool --plugin "$DB" --endpoint "$POSTGRES_SEEDS" --port "$DB_PORT" \
    --user "$POSTGRES_USER" "$@"
}

until nc -z "$POSTGRES_SEEDS" "$DB_PORT"; do
  echo "waiting for PostgreSQL at $POSTGRES_SEEDS:$DB_PORT"
  sleep 1
done

for database in temporal:temporal temporal_visibility:visibility; do
  name=${database%%:*}
  schema=${database##*:}
  echo "schema: database $name"
  sql_tool --database "$name" create-database   # exits 0 when it exists
  sql_tool --database "$name" setup-schema -v 0.0
  sql_tool --database "$name" update-schema -d "$SCHEMA_DIR/$schema/versioned"
done
echo "schema: up to date"

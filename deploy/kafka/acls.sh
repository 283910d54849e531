#!/usr/bin/env bash
# Kafka ACLs under which only the gateway writes queries and reads labels, and only the daemon reads
# queries and writes labels (docs/GATEWAY.md, "Kafka ACLs"). Clients get no Kafka access at all: they
# use the gateway's HTTP API.
#
#   KAFKA=broker:9092 ADMIN_CONFIG=admin.properties bash deploy/kafka/acls.sh
#
# The principals are those your cluster authenticates the two services as (SASL/SCRAM user names, or
# the subjects of their TLS client certificates); set them in GATEWAY and DAEMON. The cluster needs an
# authorizer (KRaft: authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer) and
# allow.everyone.if.no.acl.found=false, or these ACLs restrict nothing.
set -euo pipefail
: "${KAFKA:?set KAFKA to the bootstrap servers}"
GATEWAY=${GATEWAY:-User:everlast-gateway}
DAEMON=${DAEMON:-User:everlast-daemon}
QUERIES=${QUERIES:-everlast.queries}
LABELS=${LABELS:-everlast.labels}
DEAD_LETTERS=${DEAD_LETTERS:-everlast.dead-letters}
CHECKPOINTS=${CHECKPOINTS:-everlast.checkpoints}
GROUP=${GROUP:-everlast}
acl() { kafka-acls.sh --bootstrap-server "$KAFKA" ${ADMIN_CONFIG:+--command-config "$ADMIN_CONFIG"} --add "$@"; }

# the gateway: writes queries, reads labels (it assigns partitions itself: no consumer group)
acl --allow-principal "$GATEWAY" --operation Write --operation Describe --topic "$QUERIES"
acl --allow-principal "$GATEWAY" --operation Read --operation Describe --topic "$LABELS"

# the daemon: reads queries in its consumer group, writes labels and dead letters, keeps checkpoints
acl --allow-principal "$DAEMON" --operation Read --operation Describe --topic "$QUERIES"
acl --allow-principal "$DAEMON" --operation Read --group "$GROUP"
acl --allow-principal "$DAEMON" --operation Write --operation Describe --topic "$LABELS"
acl --allow-principal "$DAEMON" --operation Write --operation Describe --topic "$DEAD_LETTERS"
acl --allow-principal "$DAEMON" --operation Read --operation Write --operation Describe --topic "$CHECKPOINTS"

kafka-acls.sh --bootstrap-server "$KAFKA" ${ADMIN_CONFIG:+--command-config "$ADMIN_CONFIG"} --list

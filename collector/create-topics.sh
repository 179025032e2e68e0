#!/usr/bin/env bash
# Create nexa-gauge's Kafka topics (idempotent). Run by the `kafka-init` service of
# docker-compose.yml with the apache/kafka image's CLI.
#   TOPICS="name:partitions ..."  BOOTSTRAP=kafka:9092  MAX_MESSAGE_BYTES=10485760
# Each topic gets max.message.bytes=$MAX_MESSAGE_BYTES so a batch of LLM-sized spans that the
# collector may send (producer.max_message_bytes in collector/config.yaml) is never rejected.
set -euo pipefail
: "${TOPICS:?set TOPICS to a list of name:partitions}"
: "${BOOTSTRAP:?set BOOTSTRAP to host:port of a broker}"
MAX_MESSAGE_BYTES="${MAX_MESSAGE_BYTES:-10485760}"
KAFKA_BIN="${KAFKA_BIN:-/opt/kafka/bin}"
for spec in $TOPICS; do
  name="${spec%%:*}"
  partitions="${spec##*:}"
  "$KAFKA_BIN/kafka-topics.sh" --bootstrap-server "$BOOTSTRAP" --create --if-not-exists \
    --topic "$name" --partitions "$partitions" --replication-factor 1 \
    --config "max.message.bytes=$MAX_MESSAGE_BYTES"
  echo "topic ready: $name ($partitions partitions)"
done

#!/bin/bash
chan="${1:-#deploys}"
msg="Deployed $(git log -1 --format='%h %s' 2>/dev/null || echo 'unknown commit')"
curl -s -m 10 -X POST https://slack.com/api/chat.postMessage \
  -H "Authorization: Bearer ${SLACK_BOT_TOKEN}" \
  -H 'Content-Type: application/json; charset=utf-8' \
  --data "{\"channel\":\"${chan}\",\"text\":\"${msg}\"}" >/dev/null || echo "slack unreachable"
echo "notified ${chan}"

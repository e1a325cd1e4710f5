#!/bin/bash
set -e
{
  echo "# Changelog"
  echo
  git log --date=short --format='- %ad %s (%an)' | head -n 200
  echo
  echo "## Contributors"
  git shortlog -sn HEAD | sed 's/^/- /'
} > CHANGELOG.md
git status --short | head -n 5
git diff --stat HEAD~1 2>/dev/null | tail -n 1 || true
echo "CHANGELOG.md written ($(wc -l < CHANGELOG.md) lines)"

#!/usr/bin/env bash
# Debian and npm packages for the test suite. Idempotent; skipped parts are reported.
set -uo pipefail
need=()
command -v chromium >/dev/null || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null \
      || echo "ci: could not install ${need[*]} (tests that need them are skipped)" >&2
  else
    echo "ci: not root or no apt-get: ${need[*]} not installed (tests that need them are skipped)" >&2
  fi
fi
exit 0

#!/bin/sh
# Checks systemd/snowflaked.service.d/http.conf.example against the unit offline with
# `systemd-analyze security --offline=yes` (which, unlike `verify`, loads drop-ins):
#   - the unit alone keeps the network closed;
#   - with the drop-in, systemd loads it without a single warning, the service reaches
#     the host's network over AF_INET/AF_INET6, and every other hardening line stays;
#   - a drop-in with a misspelt key does warn (so the check can fail).
#   verify_dropin.sh UNIT DROPIN WORK_DIR
set -u
unit=$1 dropin=$2 work=$3
rm -rf "$work" && mkdir -p "$work/snowflaked.service.d"
sed "s|^ExecStart=[^ ]*/snowflaked|ExecStart=/bin/true|" "$unit" > "$work/snowflaked.service"
cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }

base=$(systemd-analyze security --offline=yes snowflaked.service 2>/dev/null)
echo "$base" | grep -q "Service has no access to the host's network" ||
  fail "the unit alone should be network-less"

cp "$dropin" snowflaked.service.d/http.conf
warnings=$(systemd-analyze security --offline=yes snowflaked.service 2>&1 >/dev/null)
[ -z "$warnings" ] || fail "systemd warns about the drop-in: $warnings"
opened=$(systemd-analyze security --offline=yes snowflaked.service 2>/dev/null)
echo "$opened" | grep -q "Service has access to the host's network" ||
  fail "with the drop-in the service should reach the network"
echo "$opened" | grep -q "Service may allocate Internet sockets" ||
  fail "with the drop-in AF_INET/AF_INET6 should be allowed"
# Every other line of the assessment is unchanged.
strip() { grep -v -e 'PrivateNetwork=' -e 'RestrictAddressFamilies=~AF_(INET' -e 'IPAddressDeny=' \
  -e 'Overall exposure'; }
[ "$(echo "$base" | strip)" = "$(echo "$opened" | strip)" ] ||
  fail "the drop-in changed more than the network lines"

sed 's/^SocketBindDeny=/SocketBindDenyy=/' "$dropin" > snowflaked.service.d/http.conf
[ -n "$(systemd-analyze security --offline=yes snowflaked.service 2>&1 >/dev/null)" ] ||
  fail "a misspelt key in the drop-in printed nothing: the check cannot fail"
echo "ok: the drop-in opens the network and keeps the rest of the hardening"

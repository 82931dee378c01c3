#!/bin/sh
# Runs `systemd-analyze verify` on systemd/snowflaked.service together with the etcd
# drop-in (systemd/snowflaked.service.d/etcd.conf.example installed as etcd.conf) and
# fails on ANY output. A copy of the drop-in with a misspelt key must produce output, so
# the drop-in is known to be read at all.
#   verify_dropin.sh UNIT DROPIN BINARY WORK_DIR
set -u
unit=$1 dropin=$2 binary=$3 work=$4
rm -rf "$work" && mkdir -p "$work/snowflaked.service.d"
sed "s|^ExecStart=[^ ]*/snowflaked|ExecStart=$binary|" "$unit" > "$work/snowflaked.service"
sed 's/^IPAddressAllow=/IPAddressAllows=/' "$dropin" > "$work/snowflaked.service.d/etcd.conf"
if [ -z "$(SYSTEMD_UNIT_PATH="$work:" systemd-analyze verify --man=no "$work/snowflaked.service" 2>&1)" ]; then
  echo "FAIL: a misspelt key in the drop-in printed nothing: the drop-in is not read"
  exit 1
fi
cp "$dropin" "$work/snowflaked.service.d/etcd.conf"
output=$(SYSTEMD_UNIT_PATH="$work:" systemd-analyze verify --man=no "$work/snowflaked.service" 2>&1)
status=$?
if [ $status -ne 0 ] || [ -n "$output" ]; then
  echo "FAIL: systemd-analyze verify with the etcd drop-in (exit $status):"
  echo "$output"
  exit 1
fi
for line in "PrivateNetwork=no" "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6" "IPAddressAllow="; do
  grep -q "^$line" "$dropin" || { echo "FAIL: the drop-in lacks '$line'"; exit 1; }
done
# The hardening the drop-in does not touch stays in the unit.
grep -q '^IPAddressDeny=any' "$unit" || { echo "FAIL: the unit lost IPAddressDeny=any"; exit 1; }
echo "ok"

#!/usr/bin/env bash
# Checks that libsnowflake.so exports its public API and nothing else (the version script
# libclient/libsnowflake.map): internals such as snowflake::shm must stay private.
#   check_exports.sh path/to/libsnowflake.so
set -euo pipefail
lib=$1
symbols=$(nm -D --defined-only "$lib" | awk '{print $3}' | c++filt | sed 's/@@SNOWFLAKE_0$//' | grep -v '^SNOWFLAKE_0$')
allowed='^(sf_[a-z_]+|snowflake::(Client::(Client|~Client|operator=|Open|Inspect|Next|NextBatch|Decode|layout|GetStatus|service)|Clock::(Clock|~Clock|Real|NowUnixNs|CoarseNowUnixMs|CoarseLag|SteadyNow|SleepUntil|SleepFor)|DefaultRuntimeDir|ValidateServiceName|ClientErrorName|IdErrorMessage|ParseTimeText|FormatTimeText)[[(].*|(vtable|typeinfo|typeinfo name) for snowflake::Clock)$'
unexpected=$(grep -Ev "$allowed" <<<"$symbols" || true)
if [ -n "$unexpected" ]; then
  echo "libsnowflake.so exports symbols outside its API:" >&2
  echo "$unexpected" >&2
  exit 1
fi
for required in sf_open sf_next sf_next_batch sf_close sf_bounds sf_parse_time sf_parse_layout sf_decode_in sf_bounds_in 'snowflake::ParseTimeText' 'snowflake::Client::Open(' 'snowflake::Client::Next()' 'snowflake::Clock::Real()' 'vtable for snowflake::Clock'; do
  grep -qF -- "$required" <<<"$symbols" || { echo "libsnowflake.so does not export $required" >&2; exit 1; }
done
echo "libsnowflake.so exports $(wc -l <<<"$symbols") API symbols and nothing else"

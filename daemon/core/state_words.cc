#include "daemon/core/state_words.h"

namespace snowflake::daemon {

std::string DescribeReason(shm::StateReason reason, int64_t detail, std::string_view extra,
                           std::optional<int64_t> now_unix_ms) {
  std::string text = vocab::DescribeReason(reason, detail, now_unix_ms);
  if (!extra.empty()) text += " (" + std::string(extra) + ")";
  return text;
}

}  // namespace snowflake::daemon

#include "daemon/http/session_front.h"

namespace snowflake::daemon::transport {

SessionFront::~SessionFront() = default;

}  // namespace snowflake::daemon::transport
